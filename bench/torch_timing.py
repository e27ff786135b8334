"""CUDA-event timing of PyTorch peers, shared by the bench/*_peers_torch.py scripts: batches of
CALLS calls, WARM untimed, the median of BATCHES timed ones."""
import statistics

import torch

CALLS, WARM, BATCHES = 10, 3, 15


def time_batches(run_batch):
    """run_batch(j) enqueues batch j of CALLS calls; median ms per call over the timed batches."""
    ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(BATCHES)]
    for j in range(WARM + BATCHES):
        if j >= WARM:
            ev[j - WARM][0].record()
        run_batch(j)
        if j >= WARM:
            ev[j - WARM][1].record()
    torch.cuda.synchronize()
    return statistics.median(a.elapsed_time(b) for a, b in ev) / CALLS


def time_call(call):
    """(median ms per call, 'eager' or 'graph'): the faster of eager batches and a replayed CUDA
    graph of CALLS calls. call(i) is the batch's i-th call (i selects an operand set)."""
    eager = time_batches(lambda j: [call(i) for i in range(CALLS)])
    try:
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            call(0)
        torch.cuda.current_stream().wait_stream(side)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            for i in range(CALLS):
                call(i)
        graph = time_batches(lambda j: g.replay())
        del g
    except Exception:
        graph = float("inf")
    return (eager, "eager") if eager <= graph else (graph, "graph")
