// GPU device groups on NCCL's device API (2.28): one process per GPU, symmetric memory in
// NCCL windows, peers reached by load/store and TMA over NVLink. Only GPU programs include
// this file (it needs nccl.h and libnccl); the interpreter's groups are device_group::simulated.
//
//     tp::run_ranks(tp::gpu_count(), [&](tp::nccl_group& g) {    // in each child process, one per GPU
//       const tp::device& dev = g.devices().local()[0];
//       tp::all_gather_matmul<bf16> ag(g.devices(), shards, K, N);
//       ag(dev, a, b, c);
//     });
//
// The host sequence is NCCL's (docs/design.md): ncclCommInitRank; per buffer ncclMemAlloc
// (cuMem-backed, as registration needs) and ncclCommWindowRegister with
// NCCL_WIN_COLL_SYMMETRIC; ncclDevCommCreate once, without multimem. NVLink SHARP (NVLS) is
// switched off (NCCL_NVLS_ENABLE=0, set before the communicator exists) and nothing asks for
// multimem: the machines this runs on forbid it. Peer addresses come from
// ncclGetPeerPointer, read by a one-thread kernel after registration, and are checked: a
// window NCCL could not map on every peer is an error, not a silent local-only buffer.
#pragma once

#include "device_group.cuh"

#include <nccl.h>
#include <nccl_device.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

namespace tilepipe {

namespace nccl_detail {

inline void check(ncclResult_t r, const char* call) {
  if (r != ncclSuccess)
    detail::throw_formatted("%s failed: %s (%s)", call, ncclGetErrorString(r), ncclGetLastError(nullptr));
}

/// Each device's address of a window, as this device maps it (a template: defined in every
/// translation unit that includes this header without clashing at link time).
template <int = 0>
__global__ void window_peers(ncclWindow_t window, int ranks, void** out) {
  for (int r = 0; r < ranks; ++r) out[r] = ncclGetPeerPointer(window, 0, r);
}

}  // namespace nccl_detail

#define TP_NCCL_CHECK(call) ::tilepipe::nccl_detail::check((call), #call)

/// This process's place in a group of processes, one GPU each, over NCCL.
class nccl_group {
 public:
  /// Rank `rank` of `ranks`; this process drives GPU `rank` (call before any other CUDA call).
  nccl_group(const ncclUniqueId& id, int rank, int ranks) : rank_(rank), ranks_(ranks) {
    if (ranks < 1 || ranks > max_devices)
      detail::throw_formatted("nccl_group: %d ranks; a group has 1 to %d devices", ranks, max_devices);
    setenv("NCCL_NVLS_ENABLE", "0", 1);  // no NVLink SHARP, no multimem: forbidden where this runs
    TP_CUDA_CHECK(cudaSetDevice(rank));
    TP_NCCL_CHECK(ncclCommInitRank(&comm_, ranks, id, rank));
    if (const ncclTeam lsa = ncclTeamLsa(comm_); lsa.nRanks != ranks)
      detail::throw_formatted("nccl_group: only %d of the %d GPUs share load/store memory (NVLink); the collective "
                              "kernels need all of them in one domain",
                              lsa.nRanks, ranks);
    ncclDevCommRequirements reqs;
    std::memset(&reqs, 0, sizeof reqs);  // 2.28 has no initializer; multimem stays off
    TP_NCCL_CHECK(ncclDevCommCreate(comm_, &reqs, &dev_comm_));
    const device dev = device::open(backend::gpu).in_group(rank, ranks, nullptr);
    devices_ = std::make_unique<device_group>(
        ranks, std::vector<device>{dev}, [this](std::size_t bytes, const std::string& name) { return allocate(bytes, name); },
        [this](const std::vector<long long>& values) { return all_gather(values); });
  }
  ~nccl_group() {
    ncclDevCommDestroy(comm_, &dev_comm_);
    ncclCommDestroy(comm_);
  }
  nccl_group(const nccl_group&) = delete;
  nccl_group& operator=(const nccl_group&) = delete;

  const device_group& devices() const { return *devices_; }
  ncclComm_t comm() const { return comm_; }
  int rank() const { return rank_; }
  int size() const { return ranks_; }

 private:
  /// A window of `bytes` (collective), zeroed, with every peer's address of it.
  symmetric_allocation allocate(std::size_t bytes, const std::string& name) {
    const std::size_t size = (std::max<std::size_t>(bytes, 1) + 4095) / 4096 * 4096;  // NCCL_WIN_REQUIRED_ALIGNMENT
    void* p = nullptr;
    TP_NCCL_CHECK(ncclMemAlloc(&p, size));
    TP_CUDA_CHECK(cudaMemset(p, 0, size));
    // Zeroed before registration returns on any rank: a peer may signal into it right after.
    TP_CUDA_CHECK(cudaDeviceSynchronize());
    ncclWindow_t window = nullptr;
    TP_NCCL_CHECK(ncclCommWindowRegister(comm_, p, size, &window, NCCL_WIN_COLL_SYMMETRIC));
    void** peers = nullptr;
    TP_CUDA_CHECK(cudaMalloc(&peers, sizeof(void*) * ranks_));
    nccl_detail::window_peers<<<1, 1>>>(window, ranks_, peers);
    TP_CUDA_CHECK(cudaGetLastError());
    symmetric_allocation a;
    a.bases.resize(static_cast<std::size_t>(ranks_));
    TP_CUDA_CHECK(cudaMemcpy(a.bases.data(), peers, sizeof(void*) * ranks_, cudaMemcpyDeviceToHost));
    TP_CUDA_CHECK(cudaFree(peers));
    // The addresses are NCCL's flat symmetric mapping (lsaFlatBase + rank x stride): this
    // rank's own is another virtual address of p's memory, not p. A local-only window
    // (no P2P, no cuMem) gives no distinct address per rank.
    for (int r = 0; r < ranks_; ++r)
      if (!a.bases[r] || (r > 0 && a.bases[r] == a.bases[r - 1]))
        detail::throw_formatted("nccl_group: the window for %s is not mapped on device %d (NCCL needs CUDA P2P between "
                                "all GPUs, cuMem and NCCL_WIN_ENABLE=1)",
                                name.c_str(), r);
    ncclComm_t comm = comm_;
    a.owner = std::shared_ptr<void>(p, [comm, window](void* q) {
      cudaDeviceSynchronize();  // no kernel may still use the window
      ncclCommWindowDeregister(comm, window);
      ncclMemFree(q);
    });
    return a;
  }

  /// Every rank's values, rank after rank (ncclAllGather; collective, equal lengths).
  std::vector<long long> all_gather(const std::vector<long long>& values) {
    const std::size_t n = values.size(), bytes = n * sizeof(long long);
    long long* buffer = nullptr;
    TP_CUDA_CHECK(cudaMalloc(&buffer, bytes * (ranks_ + 1)));
    long long* const all = buffer + n;
    TP_CUDA_CHECK(cudaMemcpy(buffer, values.data(), bytes, cudaMemcpyHostToDevice));
    TP_NCCL_CHECK(ncclAllGather(buffer, all, n, ncclInt64, comm_, nullptr));
    std::vector<long long> out(n * ranks_);
    TP_CUDA_CHECK(cudaMemcpy(out.data(), all, bytes * ranks_, cudaMemcpyDeviceToHost));  // waits for the gather
    TP_CUDA_CHECK(cudaFree(buffer));
    return out;
  }

  int rank_, ranks_;
  ncclComm_t comm_ = nullptr;
  ncclDevComm dev_comm_{};
  std::unique_ptr<device_group> devices_;
};

/// The number of GPUs, asked in a child process: CUDA must not be initialised in a process
/// that forks the ranks afterwards.
inline int gpu_count() {
  int fds[2];
  if (pipe(fds) != 0) throw error("tilepipe: gpu_count: pipe failed");
  const pid_t pid = fork();
  if (pid == 0) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) n = 0;
    (void)!write(fds[1], &n, sizeof n);
    _exit(0);
  }
  close(fds[1]);
  int n = 0;
  if (read(fds[0], &n, sizeof n) != static_cast<ssize_t>(sizeof n)) n = 0;
  close(fds[0]);
  waitpid(pid, nullptr, 0);
  return n;
}

/// Runs body in `ranks` child processes, rank r on GPU r, each with its nccl_group; returns
/// when all have finished, and throws naming the ranks that failed (each prints its error);
/// the first failure kills the ranks still running (they could be waiting for it forever).
/// Rank 0 makes the NCCL id and hands it to the others through pipes, so the calling
/// process never initialises CUDA or NCCL.
inline void run_ranks(int ranks, const std::function<void(nccl_group&)>& body) {
  std::vector<int> to_child(static_cast<std::size_t>(ranks) * 2);
  for (int r = 0; r < ranks; ++r)
    if (pipe(&to_child[2 * r]) != 0) throw error("tilepipe: run_ranks: pipe failed");
  std::vector<pid_t> pids;
  for (int r = 0; r < ranks; ++r) {
    const pid_t pid = fork();
    if (pid < 0) throw error("tilepipe: run_ranks: fork failed");
    if (pid == 0) {
      int code = 0;
      try {
        ncclUniqueId id;
        if (r == 0) {
          TP_NCCL_CHECK(ncclGetUniqueId(&id));
          for (int q = 1; q < ranks; ++q) (void)!write(to_child[2 * q + 1], &id, sizeof id);
        } else if (read(to_child[2 * r], &id, sizeof id) != static_cast<ssize_t>(sizeof id)) {
          throw error("tilepipe: run_ranks: rank 0 sent no NCCL id");
        }
        nccl_group group(id, r, ranks);
        body(group);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "rank %d: %s\n", r, e.what());
        code = 1;
      }
      std::fflush(stdout), std::fflush(stderr);
      _exit(code);
    }
    pids.push_back(pid);
  }
  for (int fd : to_child) close(fd);
  // A rank that fails leaves the others waiting for it (in NCCL, or in a kernel for its
  // signals): they are killed, so that the failure is reported instead of a hang. Polled per
  // child, so that no other child of the calling process is reaped.
  std::string failed;
  for (int running = ranks; running > 0;) {
    for (int r = 0; r < ranks; ++r) {
      int status = 0;
      if (pids[r] == 0) continue;
      const pid_t got = waitpid(pids[r], &status, WNOHANG);
      if (got == 0) continue;  // still running
      pids[r] = 0, --running;
      const bool ok = got > 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0;
      const bool stopped_by_us = got > 0 && !failed.empty() && WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
      if (ok || stopped_by_us) continue;
      failed += (failed.empty() ? "" : ", ") + std::to_string(r) +
                (got < 0                ? std::string(" (lost)")
               : WIFEXITED(status) ? " (exit " + std::to_string(WEXITSTATUS(status)) + ")"
                                   : std::string(" (killed)"));
      for (pid_t other : pids)
        if (other > 0) kill(other, SIGKILL);
    }
    if (running > 0) usleep(10000);
  }
  if (!failed.empty()) throw error("tilepipe: run_ranks: rank(s) " + failed + " failed; the others were stopped");
}

}  // namespace tilepipe
