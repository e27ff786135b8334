// Flash attention backward, FlashAttention-2's deterministic schedule written with tilepipe's
// pipeline: the gradients of O = softmax(scale * Q K^T + mask) V (kernels/attention.cuh) from dO
// and the forward's log-sum-exp, recomputing the probabilities block by block:
//     P = exp(scale * Q K^T - LSE),  dP = dO V^T,  dS = P * (dP - delta),  delta = rowsum(dO * O),
//     dV = P^T dO,   dK = scale * dS^T Q,   dQ = scale * dS K.
//
//     tp::attention_backward(dev, q, k, v, o, d_o, lse, dq, dk, dv, {.causal = true});
//     tp::attention_backward_varlen(dev, q, k, v, o, d_o, lse, dq, dk, dv, cu_q, cu_k, batches, max_sq, max_sk);
//
// Three launches and no atomics: every element of a gradient is summed by one warpgroup in a
// fixed order, so the result is bitwise reproducible.
//   1. delta: one warpgroup per 64 query rows computes rowsum(dO * O) of every head (f32), into
//      a workspace shaped as the LSE.
//   2. dQ: one CTA per SM loops over tiles of 128 query rows of one head, in the forward's tile
//      order. Q and dO are stationary, K and V stream in blocks of 64 keys (32 at head dim
//      256); each compute warpgroup (64 rows) recomputes S = Q K^T and dP = dO V^T, forms dS
//      and accumulates dQ += dS K with dS as the A operand in registers (the accumulator
//      layout is the A layout).
//   3. dK, dV: tiles of 128 keys of one KV head; K and V are stationary, Q and dO stream in
//      blocks of 64 rows, those of every query head of the KV head's group (GQA's sum stays in
//      the CTA) that see the tile's keys. Each compute warpgroup owns 64 keys: it computes S
//      and dP for the block's rows and its keys (LSE and delta are row vectors), stores P and
//      dS in 16 bits to its own SMEM scratch, and accumulates dV += P^T dO and dK += dS^T Q
//      with the transposed scratch as wgmma's A operand (docs/design.md says why not S^T).
//      Head dim 256: tiles of 64 keys; each warpgroup computes S and dP for 32 of them, both
//      read P and dS of all 64, and each accumulates dK and dV for half of the columns.
// Masks are the forward's (bottom-right aligned); only blocks that cross a mask's edge (and,
// in the dQ kernel, a sequence's end) run the masked copy of a step. Both kernels wait for
// every wgmma inside the step.
#pragma once

#include "../sched/attention_tiles.cuh"
#include "../tilepipe.cuh"

#include <cmath>
#include <cstdint>
#include <type_traits>
#include <utility>

namespace tilepipe {

/// What the backward differentiates: the forward's scale and mask (attention_options).
struct attention_backward_options {
  float scale = 0.0f;            // softmax scale; 0: 1 / sqrt(head_dim)
  bool causal = false;           // window_right = 0
  int window_left = -1;          // -1: unbounded
  int window_right = -1;         // -1: unbounded
  float* workspace = nullptr;    // f32 scratch of lse's size for delta = rowsum(dO * O); null: allocated per call
  /// true: the three-launch schedule, every gradient summed in a fixed order (the same bits
  /// every run). false: FlashAttention-3's single pass, dQ added by the dK dV kernels to an f32
  /// buffer in whatever order they come (the last bits vary between runs); at head dim 256
  /// the three launches (faster there).
  bool deterministic = true;
  /// deterministic = false (head dims 64 and 128): f32 scratch of
  /// attention_backward_dq_workspace_size elements, 16-byte aligned; null: allocated per call.
  float* dq_workspace = nullptr;
  void* stream = nullptr;  // cudaStream_t (GPU)
  profiler* profile = nullptr;  // records the dK dV kernel's timeline (TILEPIPE_PROFILE builds; host/profiler.cuh)
};

/// The f32 elements of attention_backward_options::dq_workspace: heads_q x head_dim per query
/// row, a sequence's rows padded to a multiple of 64 (batches x Sq rounded up to 64 rows; for
/// varlen, rows = total_q, total_q + 64 x batches).
inline long long attention_backward_dq_workspace_size(long long batches, long long rows, long long heads_q,
                                                      long long head_dim, bool varlen = false) {
  return (varlen ? rows + 64 * batches : batches * ((rows + 63) / 64 * 64)) * heads_q * head_dim;
}

namespace attention_backward_detail {

/// n limited to [0, cap]: the rows of a block that lie inside its sequence.
TP_HD inline int clamp_rows(int n, int cap) { return n < 0 ? 0 : n < cap ? n : cap; }

/// Where sequence b lives: its batch index in the 4-D tensors, first row and length.
struct sequence {
  int batch, q0, sq, k0, sk;
};

/// The sequences of a launch: fixed lengths, or varlen offsets in device memory, checked and
/// clipped as the forward does (kernels/attention.cuh): offsets that leave q or k, decrease,
/// or exceed the maximum lengths fail in the interpreter and TILEPIPE_DEBUG GPU builds;
/// elsewhere they are clipped (wrong rows, but nothing read or written outside the tensors).
struct batch_layout {
  int seqlen_q = 0, seqlen_k = 0;
  const int* cu_seqlens_q = nullptr;
  const int* cu_seqlens_k = nullptr;
  int max_seqlen_q = 0, max_seqlen_k = 0;  // varlen: the tile spaces of the query and key sides
  int total_q = 0, total_k = 0;            // varlen: rows of the packed q and k

  TP_HD sequence of([[maybe_unused]] const kernel_context& ctx, int b) const {
    if (!cu_seqlens_q) return {b, 0, seqlen_q, 0, seqlen_k};
    const int q0 = cu_seqlens_q[b], q1 = cu_seqlens_q[b + 1], k0 = cu_seqlens_k[b], k1 = cu_seqlens_k[b + 1];
    if constexpr (debug_checks) {
      if (q0 < 0 || q1 < q0 || q1 > total_q)
        prim::fail(ctx.failure(), "attention_backward: sequence %d is rows [%d, %d) of q, which has %d (cu_seqlens_q "
                   "must not decrease and must stay within q)", b, q0, q1, total_q);
      if (k0 < 0 || k1 < k0 || k1 > total_k)
        prim::fail(ctx.failure(), "attention_backward: sequence %d is rows [%d, %d) of k and v, which have %d "
                   "(cu_seqlens_k must not decrease and must stay within k)", b, k0, k1, total_k);
      if (q1 - q0 > max_seqlen_q)
        prim::fail(ctx.failure(), "attention_backward: sequence %d has %d query rows, more than max_seqlen_q = %d", b,
                   q1 - q0, max_seqlen_q);
      if (k1 - k0 > max_seqlen_k)
        prim::fail(ctx.failure(), "attention_backward: sequence %d has %d keys, more than max_seqlen_k = %d", b,
                   k1 - k0, max_seqlen_k);
    }
    const int qa = clamp_rows(q0, total_q), qb = qa + clamp_rows(q1 - qa, total_q - qa);
    const int ka = clamp_rows(k0, total_k), kb = ka + clamp_rows(k1 - ka, total_k - ka);
    return {0, qa, clamp_rows(qb - qa, max_seqlen_q), ka, clamp_rows(kb - ka, max_seqlen_k)};
  }
};

/// One f32 per query row of each head, laid out as the forward's LSE: [B, Hq, Sq], or
/// [Hq, total_q] for varlen (whose sequences are batch 0 starting at row q0). The rows are
/// contiguous, so that a thread's reads of the columns it holds are one address and immediate
/// offsets (a run-time row stride cost the dK dV kernel a register per column, and spills).
struct row_values {
  float* data = nullptr;
  long long batch_stride = 0, head_stride = 0;

  /// The sequence's query rows of head h, from row 0.
  TP_HD const float* rows(const sequence& s, int h) const { return data + s.batch * batch_stride + h * head_stride + s.q0; }
  /// Rows [row0, row0 + count) of head h, for a store.
  TP_HD gmem_ref<float, 1> rows(const sequence& s, int h, int row0, int count) const {
    gmem_ref<float, 1> r;
    r.data = data + s.batch * batch_stride + h * head_stride + s.q0 + row0;
    r.shape[0] = count, r.stride[0] = 1;
    return r;
  }
};

/// dQ's f32 accumulator of the single pass. Per head, a sequence's query rows in blocks of
/// 64 (the last one padded), a block as D / 64 parts of 64 rows x 64 columns, each part 4096
/// consecutive floats in the register order of the warpgroup that adds it (tp::store_packed):
/// a dK dV step's share is then one contiguous bulk reduction from SMEM, written there with
/// 16-byte stores free of bank conflicts, and the conversion reads it with 16-byte loads.
/// [B, Hq, Sq rounded up to 64, D], or for varlen [Hq, total_q + 64 batches, D] with sequence
/// b's rows from q0 + 64 b rounded down to 64 (FlashAttention-3's padding: a sequence's blocks
/// end before the next one's start).
struct dq_tiles {
  float* data = nullptr;
  long long batch_stride = 0, head_stride = 0;  // elements
  int head_dim = 0;
  bool varlen = false;

  /// Part `part` (columns 64 part ..) of the block of rows [row0, row0 + 64) (row0 a multiple of
  /// 64) of sequence b, head h.
  TP_HD float* part(const sequence& s, int b, int h, int row0, int part) const {
    const long long first = varlen ? (s.q0 + 64LL * b) / 64 * 64 : 0;
    return data + s.batch * batch_stride + h * head_stride + (first + row0) * head_dim + part * 64 * 64;
  }
};

/// LSE in log2 units, the exponent's offset: exp(scale s - LSE) = exp2(s scale log2 e - LSE log2 e).
/// A row that sees no key has LSE -inf and no visible element; +inf keeps exp2 at 0 (not NaN).
TP_HD inline float lse_log2(float lse) { return lse == -INFINITY ? INFINITY : lse * 1.4426950408889634f; }

}  // namespace attention_backward_detail

/// delta = rowsum(dO * O) per query row, for every head: one warpgroup per block of 64 rows of
/// a sequence (grid: row blocks x sequences), a pipeline over the heads.
template <class T, int D>
struct attention_backward_delta_kernel {
  static constexpr int num_threads = 1;
  static constexpr int BR = 64;
  using rows_tile = tile<block<squeezed, element(BR), squeezed, D>, swizzle<128>>;
  // Two inputs in two slots each, their barriers, and the swizzle's 1024-byte alignment.
  static constexpr std::size_t smem_bytes = 2 * 2 * BR * D * sizeof(T) + 2048;

  attention_backward_detail::batch_layout batch;
  attention_backward_detail::row_values delta;
  int heads = 0;
  attention_backward_detail::dq_tiles dq_accum;  // the single pass: zeroed here, filled by the dK dV kernels

  TP_HD void operator()(kernel_context& ctx, gmem<T, 4, rows_tile> o, gmem<T, 4, rows_tile> d_o) const {
    using namespace attention_backward_detail;
    const int b = ctx.axis_index(1);
    const sequence seq = batch.of(ctx, b);
    const int row0 = ctx.axis_index(0) * BR, rows = clamp_rows(seq.sq - row0, BR);
    if (rows == 0) return;
    auto step = [&](index<1> at, auto o_s, auto do_s) {
      // 64 columns at a time (two 64 x 256 f32 fragments would take every register), each
      // thread's share first and the threads of a row combined once.
      auto sum = partial_row_sum(load<float>(cols<64>(o_s, 0)) * load<float>(cols<64>(do_s, 0)));
#pragma unroll
      for (int c = 64; c < D; c += 64)
        sum = sum + partial_row_sum(load<float>(cols<64>(o_s, c)) * load<float>(cols<64>(do_s, c)));
      store(delta.rows(seq, at[0], row0, rows), finish_row_sum(sum));
      if (dq_accum.data) {  // the whole block, padding included: every reduction adds to all of it
        float* block = dq_accum.part(seq, b, at[0], row0, 0);
        store_rows(zeros<float, BR, D>(), BR, [&](int r) { return block + r * D; });
      }
    };
    auto rows_of = [b = seq.batch, r = seq.q0 + row0](auto h) { return idx(b, r, h, 0); };
    emit_pipeline(step, grid(heads), in_specs(spec<rows_tile>(rows_of), spec<rows_tile>(rows_of)))(ctx, o, d_o);
  }
};

/// The parameters the dQ and dK dV kernels share.
struct attention_backward_params {
  attention_tile_order tiles;
  attention_backward_detail::batch_layout batch;
  attention_backward_detail::row_values lse, delta;
  int group = 1;            // query heads per KV head
  float scale = 0.0f;       // softmax scale
  float scale_log2 = 0.0f;  // scale * log2(e)
  int window_left = -1, window_right = -1;
};

/// dQ: tiles of 128 query rows of one head (the forward's tiles and order), K and V streamed.
template <class T, int D>
struct attention_backward_dq_kernel : attention_backward_params {
  static constexpr warp_specialization<2, 40> ws{};  // two compute warpgroups, the memory one last
  static constexpr int num_threads = ws.num_threads;
  // Query rows per tile and per warpgroup, keys per step. Head dim 256 steps by 32 keys: dQ
  // takes 128 registers there, and S and dP of 64 keys 64 more; and the stationary Q and dO
  // (64 KB each) leave room for two K and two V slots of 32 keys only.
  static constexpr int BM = 128, WM = 64, BN = D == 256 ? 32 : 64;
  using q_tile = tile<block<squeezed, element(BM), squeezed, D>, swizzle<128>>;
  using kv_tile = tile<block<squeezed, element(BN), squeezed, D>, swizzle<128>>;

  TP_HD void operator()(kernel_context& ctx, gmem<T, 4, q_tile> q, gmem<T, 4, q_tile> d_o, gmem<T, 4, kv_tile> k,
                        gmem<T, 4, kv_tile> v, gmem<T, 4> dq) const {
    using namespace attention_backward_detail;
    const int ci = ws.compute_index(ctx);
    accumulator<WM, D> acc_dq;
    row_vector<WM> lse2, delta_rows;  // this warpgroup's rows: LSE in log2 units, and delta

    auto tile_pipeline = [&](attention_tile t) {
      const sequence seq = batch.of(ctx, t.batch);
      const int row0 = t.m_block * BM, tile_rows = clamp_rows(seq.sq - row0, BM);
      // The KV blocks any of the tile's rows sees (row i sees keys i + shift - left .. i + shift + right).
      const int shift = seq.sk - seq.sq, last_row = row0 + tile_rows - 1;
      const int key_end = window_right >= 0 ? min(seq.sk, last_row + shift + window_right + 1) : seq.sk;
      const int key_begin = window_left >= 0 ? max(0, row0 + shift - window_left) : 0;
      const int n_lo = key_begin / BN, n_hi = key_end > 0 ? (key_end + BN - 1) / BN : 0;
      const int blocks = tile_rows > 0 && n_hi > n_lo ? n_hi - n_lo : 0;
      // Blocks n >= mask_hi cross the sequence's end or the right window edge of one of this
      // warpgroup's rows, blocks n < mask_lo its left window edge: those run with the mask.
      const int q_first = row0 + ci * WM, q_last = q_first + WM - 1;
      const int visible_end = window_right >= 0 ? min(seq.sk, q_first + shift + window_right + 1) : seq.sk;
      const int mask_hi = max(visible_end, 0) / BN;
      const int left_edge = window_left >= 0 ? q_last + shift - window_left : 0;
      const int mask_lo = left_edge > 0 ? (left_edge + BN - 1) / BN : 0;

      auto body = [&, seq, n_lo, shift, q_first, mask_hi, mask_lo](index<1> at, auto q_s, auto do_s, auto k_s,
                                                                     auto v_s) {
        const int n = n_lo + at[0], key0 = n * BN;
        // Two copies of the step, with and without the mask (the forward's reason: a mask under
        // a branch inside one step costs registers and scheduling in every block).
        auto step = [&](auto with_mask) {
          accumulator<WM, BN> s, dp;
          wgmma(s, rows<WM>(q_s, ci * WM), transpose(k_s), false);
          wgmma(dp, rows<WM>(do_s, ci * WM), transpose(v_s), false);
          wgmma_wait<0>(s, dp);
          const float sl2 = scale_log2;
          auto p = broadcast_rows(s, lse2, [sl2](float x, float l) { return prim::exp2(x * sl2 - l); });
          if constexpr (with_mask) {
            mask_columns(p, [&](int r) {  // row r sees keys [row - left, row + right] of the sequence
              const int row = q_first + r + shift - key0;
              const int hi = min(seq.sk - key0, BN);
              return column_range{window_left >= 0 ? row - window_left : 0,
                                  window_right >= 0 ? min(hi, row + window_right + 1) : hi};
            }, 0.0f);
          }
          operand_fragment<T, WM, BN> grad_s = to_operand<T>(p * (dp - delta_rows));
          wgmma(acc_dq, grad_s, k_s);
          wgmma_wait<0>(acc_dq, grad_s);
        };
        if (n >= mask_hi || n < mask_lo) step(std::true_type{});
        else step(std::false_type{});
      };

      auto context = compute_context([&, seq, t, row0, tile_rows](auto pipeline) {
        const int my_row0 = row0 + ci * WM, my_rows = clamp_rows(tile_rows - ci * WM, WM);
        // Rows past the sequence get P = 0 (exp2 of -inf) and delta 0: their dQ is not stored.
        const float* lse_of = lse.rows(seq, t.head) + my_row0;
        const float* delta_of = delta.rows(seq, t.head) + my_row0;
        lse2 = map(full<row_vector<WM>>(0.0f), [&](float, int r) { return r < my_rows ? lse_log2(lse_of[r]) : INFINITY; });
        delta_rows = map(full<row_vector<WM>>(0.0f), [&](float, int r) { return r < my_rows ? delta_of[r] : 0.0f; });
        acc_dq = zeros<float, WM, D>();
        pipeline();
        if (my_rows == 0) return;
        store(plane<1, 3>(dq.at(ds{seq.batch, 1}, ds{seq.q0 + my_row0, my_rows}, ds{t.head, 1}, ds{0, D})),
              acc_dq * scale);
      });
      const int b = seq.batch, q_row = seq.q0 + row0, key_row = seq.k0 + n_lo * BN, head = t.head;
      const int kv_head = t.head / group;
      auto q_map = [=](auto) { return idx(b, q_row, head, 0); };
      auto kv_map = [=](auto s) { return idx(b, key_row + s * BN, kv_head, 0); };
      return emit_pipeline_warp_specialized(
          body, grid(blocks),
          in_specs(spec<q_tile>(q_map), spec<q_tile>(q_map), spec<kv_tile>(kv_map), spec<kv_tile>(kv_map)),
          out_specs(), ws, max_concurrent_steps<2>, context);
    };
    auto loop = persistent_pipelines<attention_tile>(ws, ctx, tile_pipeline, q, d_o, k, v);
    loop.run(ctx.axis_index(0), tiles.tiles(), ctx.axis_size(0), [&](int j) { return tiles.at(j); });
  }

  tilepipe::launch_config config(int workers, void* stream) const { return {.grid = {workers}, .stream = stream}; }
};

/// dK and dV: tiles of 128 keys (64 at head dim 256) of one KV head (the forward's tile order
/// over KV heads and key blocks: a causal key block n is seen by the query blocks from n on, so
/// pairs n and N - 1 - n cost the same, as the forward's row blocks do), Q and dO streamed.
/// With FusedDq the same step also adds its share of dQ, dS K, to an f32 accumulator in global
/// memory (FlashAttention-3's single pass; the dQ kernel is not run).
template <class T, int D, bool FusedDq = false>
struct attention_backward_dkdv_kernel : attention_backward_params {
  static constexpr warp_specialization<2, 40> ws{};  // two compute warpgroups, the memory one last
  static constexpr int num_threads = ws.num_threads;
  /// Head dim 256 splits the head dim between the compute warpgroups instead of the keys
  /// (FlashAttention-3's split at 256): dK and dV of a warpgroup's 64 keys would take all 256
  /// registers of a thread, those of 64 keys x 128 columns take 128, as at head dim 128. A
  /// tile is then 64 keys; each warpgroup computes S and dP for 32 of them (a column half:
  /// 32 rows are no wgmma shape), stores its half of P and dS to a scratch both warpgroups
  /// read, and accumulates dK and dV of all 64 keys for its 128 columns.
  static constexpr bool split_head_dim = D == 256;
  // Keys per tile, keys of a warpgroup's S and dP, query rows per step.
  static constexpr int BN = split_head_dim ? 64 : 128, WN = BN / 2, BM = 64;
  // A warpgroup's dK and dV: its keys and columns.
  static constexpr int acc_keys = split_head_dim ? BN : WN, acc_cols = split_head_dim ? D / 2 : D;
  using kv_tile = tile<block<squeezed, element(BN), squeezed, D>, swizzle<128>>;
  using q_tile = tile<block<squeezed, element(BM), squeezed, D>, swizzle<128>>;
  /// P or dS of a step in 16 bits (the block's rows x the keys of a warpgroup's dK and dV),
  /// read back transposed as wgmma's A operand: each warpgroup's own, or at head dim 256 one
  /// both write (32 keys each) and read.
  using scratch_view = smem<T, tile<block<BM, acc_keys>, swizzle<128>>>;
  static constexpr int pds_sets = split_head_dim ? 1 : 2;
  /// Fused dQ at head dim 128: the two compute warpgroups share dQ's columns (64 each, two
  /// 32-register accumulators instead of two of 64), so each reads both warpgroups' dS, which
  /// alternates between two buffers by step. A step's dQ is computed one step late, so that
  /// the warpgroups need not meet inside a step (in step with each other, the tensor cores
  /// idled through both softmaxes: 15% of the step's time at 16k keys). Warpgroup w announces
  /// the end of step g (its dS_g stored, its products of step g, dQ_{g-1} among them, done)
  /// on named barrier exchange_barrier(w, g); the other waits for it in step g + 1 before it
  /// stores dS_{g+1} over dS_{g-1} and reads dS_g, or at the end of a tile, where the tile's
  /// last dQ is not left for the next one (its K is gone). So a warpgroup runs up to a step's
  /// softmax ahead of the other. At head dim 64
  /// each warpgroup adds its own keys' part of all 64 columns. (Head dim 256 runs the
  /// three-launch schedule in both modes: a fused dQ there left dO one slot of SMEM and ran
  /// at two thirds of its speed; docs/design.md.)
  static_assert(!(FusedDq && split_head_dim), "tilepipe: the single pass has no head dim 256 schedule");
  static constexpr bool split_dq = FusedDq && D == 128;
  static constexpr int dq_cols = split_dq ? D / 2 : D;
  static constexpr int ds_buffers = split_dq ? 2 : 1;
  /// split_dq: the named barrier on which warpgroup w announces the end of a step of parity p
  /// (two per warpgroup: an announcement is awaited before the one after next is made).
  static constexpr int exchange_barrier(int w, int p) { return prim::user_barrier_base + 2 * w + p; }
  /// Fused dQ: a warpgroup's share of a step (64 x 64 floats) goes to SMEM (tp::store_packed),
  /// from where one thread adds it to the accumulator in global memory with a bulk reduction
  /// that runs on while the step goes on. Two buffers where SMEM holds them (head dim 64): a
  /// step rewrites one after the reduction of two steps back has read it. At head dim 128 one:
  /// the reduction issued in a step has until the next step's P and dS are stored.
  static constexpr std::uint32_t dq_part_bytes = FusedDq ? BM * dq_cols * sizeof(float) : 0;
  static_assert(!FusedDq || (BM == 64 && dq_cols == 64), "tilepipe: a dQ share is one 64 x 64 part of dq_tiles");
  static constexpr std::uint32_t pds_bytes = pds_sets * (1 + ds_buffers) * scratch_view::bytes;  // P, dS
  static constexpr int dq_buffers =
      (2 * BN * D + 4 * BM * D) * sizeof(T) + pds_bytes + 2 * 2 * dq_part_bytes + 4096 <= smem_capacity ? 2 : 1;
  static constexpr std::uint32_t scratch_bytes = pds_bytes + 2 * dq_buffers * dq_part_bytes;
  attention_backward_detail::dq_tiles dq_accum;  // FusedDq: dQ in f32, zeroed by the delta kernel
  // K and V in two slots where SMEM holds them beside two Q and two dO slots, the scratch, the
  // barriers and each allocation's 1024-byte alignment (head dim 64): the next tile's K and V
  // then land while this tile runs. At head dims 128 and 256 they load after its last step.
  static constexpr int kv_slots = (4 * BN * D + 4 * BM * D) * sizeof(T) + scratch_bytes + 4096 <= smem_capacity ? 2 : 1;

  TP_HD void operator()(kernel_context& ctx, gmem<T, 4, kv_tile> k, gmem<T, 4, kv_tile> v, gmem<T, 4, q_tile> q,
                        gmem<T, 4, q_tile> d_o, gmem<T, 4> dk, gmem<T, 4> dv) const {
    using namespace attention_backward_detail;
    const int ci = ws.compute_index(ctx);
    // This warpgroup's dK and dV: keys key_first .. of the tile, columns col_first ...
    const int key_first = split_head_dim ? 0 : ci * WN, col_first = split_head_dim ? ci * acc_cols : 0;
    accumulator<acc_keys, acc_cols> acc_dk, acc_dv;
    unsigned char* scratch = nullptr;
    // The P this compute warpgroup's dK and dV read, and warpgroup w's dS buffer b.
    const int pds_set = split_head_dim ? 0 : ci;
    auto p_smem = [&] {
      return scratch_view{reinterpret_cast<T*>(scratch + (1 + ds_buffers) * pds_set * scratch_view::bytes), 0};
    };
    auto ds_smem = [&](int w, int b) {
      return scratch_view{reinterpret_cast<T*>(scratch + ((1 + ds_buffers) * w + 1 + b) * scratch_view::bytes), 0};
    };
    // This compute warpgroup's dQ buffer b.
    auto dq_smem = [&](int b) {
      return reinterpret_cast<float*>(scratch + pds_bytes + (dq_buffers * ci + b) * dq_part_bytes);
    };
    int step_parity = 0;  // FusedDq: the dS and dQ buffers of this step (both warpgroups run every step)
    int lagged_head = 0, lagged_row = 0;  // split_dq: the head and first row of the previous step's dQ

    auto tile_pipeline = [&](attention_tile t) {  // t.head: the KV head, t.m_block: the key block
      const sequence seq = batch.of(ctx, t.batch);
      const int key0 = t.m_block * BN, tile_keys = clamp_rows(seq.sk - key0, BN);
      // The query rows that see any of the tile's keys: key j is seen by rows
      // j - shift - right .. j - shift + left.
      const int shift = seq.sk - seq.sq, last_key = key0 + tile_keys - 1;
      const int row_begin = window_right >= 0 ? max(0, key0 - shift - window_right) : 0;
      const int row_end = window_left >= 0 ? min(seq.sq, last_key - shift + window_left + 1) : seq.sq;
      const int m_lo = row_begin / BM, m_hi = row_end > 0 ? (row_end + BM - 1) / BM : 0;
      const int m_blocks = tile_keys > 0 && m_hi > m_lo ? m_hi - m_lo : 0;
      const int k_first = key0 + ci * WN, k_last = min(k_first + WN, seq.sk) - 1;  // this warpgroup's S and dP keys

      auto body = [&, seq, t, m_lo, m_blocks, shift, k_first, k_last](index<2> at, auto k_s, auto v_s, auto q_s,
                                                                        auto do_s) {
        const int head = t.head * group + at[0], i0 = (m_lo + at[1]) * BM;
        // Head dim 256: P and dS have one buffer (SMEM holds no second beside two Q and two dO
        // slots), rewritten once both warpgroups are done with the last step's products, which
        // read it. Here and not at the stores: those are in the masked and unmasked copies of
        // the step, which the warpgroups may take differently (bar.sync is aligned: all its
        // threads must reach the same instruction).
        if constexpr (split_head_dim) ctx.team_sync();
        // A block runs with the mask if one of this warpgroup's keys lies right of the first
        // row's window or left of the last row's. Keys past the sequence's end need none (their
        // dK and dV rows are not stored), nor do rows past it (their LSE reads as +inf: P = 0).
        // With FusedDq keys past the sequence are masked too: their P would reach dQ.
        const bool masked = (window_right >= 0 && k_last > i0 + shift + window_right) ||
                            (window_left >= 0 && k_first < i0 + BM - 1 + shift - window_left) ||
                            (FusedDq && k_first + WN > seq.sk);
        const int buffer = split_dq ? step_parity : 0;
        const scratch_view p_s = p_smem(), ds_s = ds_smem(pds_set, buffer);
        // P and dS of the block: with the mask or without (each warpgroup decides for its keys).
        auto scores = [&](auto with_mask) {
          const int rows_left = seq.sq - i0;
          const float *lse_of = lse.rows(seq, head) + i0, *delta_of = delta.rows(seq, head) + i0;
          const auto lse2 = map(full<row_vector<BM>>(0.0f),
                                [&](float, int r) { return r < rows_left ? lse_log2(lse_of[r]) : INFINITY; });
          // dS is stored times the scale, dK's factor: dK needs no pass of its own in the epilogue,
          // and one FMA per element replaces dP - delta's subtraction.
          const float sc = scale;
          const auto delta_scaled = map(full<row_vector<BM>>(0.0f),
                                        [&](float, int r) { return r < rows_left ? delta_of[r] * sc : 0.0f; });
          const float sl2 = scale_log2;
          accumulator<BM, WN> s, dp;  // the block's rows x this warpgroup's keys
          {
            profile_scope scores_scope(ctx, "S and dP");  // on the timeline (bench_attention_backward_on)
            wgmma(s, q_s, transpose(rows<WN>(k_s, ci * WN)), false);
            wgmma(dp, do_s, transpose(rows<WN>(v_s, ci * WN)), false);
            wgmma_wait<0>(s, dp);
          }
          auto p = broadcast_rows(s, lse2, [sl2](float x, float l) { return prim::exp2(x * sl2 - l); });
          if constexpr (with_mask) {
            mask_columns(p, [&](int r) {  // row r sees keys [row - left, row + right] of the sequence
              const int row = i0 + r + shift - k_first;
              const int hi = FusedDq ? min(WN, seq.sk - k_first) : WN;
              return column_range{window_left >= 0 ? row - window_left : 0,
                                  window_right >= 0 ? min(hi, row + window_right + 1) : hi};
            }, 0.0f);
          }
          const auto ds_values = p * broadcast_rows(dp, delta_scaled, [sc](float x, float d) { return x * sc - d; });
          if constexpr (split_dq) {
            return std::pair{p, ds_values};  // stored below, once the other warpgroup is done with the buffer
          } else {
            const int key_col = split_head_dim ? ci * WN : 0;  // this warpgroup's keys in the scratch
            store(cols<WN>(p_s, key_col), p);
            store(cols<WN>(ds_s, key_col), ds_values);
          }
        };
        [[maybe_unused]] const int other = 1 - ci;
        [[maybe_unused]] const bool first = at[0] == 0 && at[1] == 0;
        [[maybe_unused]] const bool last = at[0] == group - 1 && at[1] == m_blocks - 1;
        if constexpr (split_dq) {
          const auto [p_values, ds_values] = masked ? scores(std::true_type{}) : scores(std::false_type{});
          // The other warpgroup's previous step is done: dS_{g-1} is stored, and its dQ_{g-2}
          // (the last reader of the buffer dS_g goes to) has read. (A tile's first step: the
          // last one's end waited for it.) Outside the masked / unmasked branch: bar.sync is aligned.
          if (!first) {
            profile_scope handshake(ctx, "dS handshake");
            prim::named_barrier_sync(exchange_barrier(other, step_parity ^ 1), 2 * warpgroup_size);
          }
          store(p_s, p_values);
          store(ds_s, ds_values);
        } else {
          if (masked) scores(std::true_type{});
          else scores(std::false_type{});
        }
        // P and dS in 16 bits: their transposed views are dV's and dK's A operands. The
        // same barrier lets this step's dQ buffer go (its last reduction has read it).
        if constexpr (FusedDq) commit_smem<dq_buffers - 1>(reads_done);
        else commit_smem();
        // At head dim 256 the other warpgroup's half of P and dS is in SMEM too: each reads
        // both for its half of dK's and dV's columns. One barrier instruction for both
        // warpgroups, outside the masked / unmasked branch.
        if constexpr (split_head_dim) ctx.team_sync();
        // dQ's and dK's and dV's columns of this warpgroup: Q's and dO's.
        const auto q_cols = cols<acc_cols>(q_s, col_first), do_cols = cols<acc_cols>(do_s, col_first);
        if constexpr (split_dq) {
          // dQ of the previous step (its dS in the other buffer: both warpgroups' halves),
          // this step's dV and dK; then, at a tile's last step, this step's dQ.
          const int c0 = ci * dq_cols;
          accumulator<BM, dq_cols> acc_dq;
          auto dq_of = [&](int b) {
            wgmma(acc_dq, ds_smem(0, b), cols<dq_cols>(rows<WN>(k_s, 0), c0), false);
            wgmma(acc_dq, ds_smem(1, b), cols<dq_cols>(rows<WN>(k_s, WN), c0));
          };
          auto add_dq = [&](int h, int row0) {  // the share in SMEM, added to the f32 accumulator
            float* dq_s = dq_smem(0);
            store_packed(dq_s, acc_dq);
            commit_smem();
            reduce_add_smem_to_gmem(dq_s, dq_accum.part(seq, t.batch, h, row0, ci), BM * dq_cols);
          };
          // (Issued at a tile's first step too, where it reads the last tile's dS or, at the
          // kernel's first, whatever the buffer holds, and is dropped: with the product under a
          // condition ptxas serialised every wgmma of the step, C7514.)
          dq_of(buffer ^ 1);
          wgmma(acc_dv, transpose(p_s), do_cols);
          wgmma(acc_dk, transpose(ds_s), q_cols);
          wgmma_wait<2>(acc_dq);
          if (!first) add_dq(lagged_head, lagged_row);
          wgmma_wait<0>(acc_dv, acc_dk);
          prim::named_barrier_arrive(exchange_barrier(ci, step_parity), 2 * warpgroup_size);
          if (last) {  // the tile's last dQ: once the other warpgroup's dS of this step is stored
            prim::named_barrier_sync(exchange_barrier(other, step_parity), 2 * warpgroup_size);
            dq_of(buffer);
            wgmma_wait<0>(acc_dq);
            commit_smem<0>(reads_done);  // the buffer's last reduction has read it
            add_dq(head, i0);
          }
          lagged_head = head, lagged_row = i0;
          step_parity ^= 1;
        } else if constexpr (FusedDq) {
          // dQ's share of this step first (dS is stored times the scale: no factor left to
          // apply): it goes to SMEM under dV's and dK's products, and its accumulator is
          // free again before they complete.
          accumulator<BM, dq_cols> acc_dq;
          wgmma(acc_dq, ds_s, rows<WN>(k_s, ci * WN), false);
          wgmma(acc_dv, transpose(p_s), do_cols);
          wgmma(acc_dk, transpose(ds_s), q_cols);
          wgmma_wait<2>(acc_dq);
          float* dq_s = dq_smem(dq_buffers > 1 ? step_parity : 0);
          step_parity ^= 1;
          store_packed(dq_s, acc_dq);
          commit_smem();
          reduce_add_smem_to_gmem(dq_s, dq_accum.part(seq, t.batch, head, i0, 0), BM * dq_cols);
          wgmma_wait<0>(acc_dv, acc_dk);
        } else {
          wgmma(acc_dv, transpose(p_s), do_cols);
          wgmma(acc_dk, transpose(ds_s), q_cols);
          wgmma_wait<0>(acc_dv, acc_dk);
        }
      };

      auto context = compute_context([&, seq, t, key0, tile_keys](auto pipeline) {
        acc_dk = zeros<float, acc_keys, acc_cols>();
        acc_dv = zeros<float, acc_keys, acc_cols>();
        pipeline();
        const int my_keys = clamp_rows(tile_keys - key_first, acc_keys);
        if (my_keys == 0) return;
        const ds batch_slice{seq.batch, 1}, key_slice{seq.k0 + key0 + key_first, my_keys}, head_slice{t.head, 1};
        const ds dims{col_first, acc_cols};
        store(plane<1, 3>(dk.at(batch_slice, key_slice, head_slice, dims)), acc_dk);
        store(plane<1, 3>(dv.at(batch_slice, key_slice, head_slice, dims)), acc_dv);
      });
      const int b = seq.batch, key_row = seq.k0 + key0, kv_head = t.head, first_head = t.head * group;
      const int q_row = seq.q0 + m_lo * BM;
      auto kv_map = [=](auto, auto) { return idx(b, key_row, kv_head, 0); };
      auto q_map = [=](auto h, auto m) { return idx(b, q_row + m * BM, first_head + h, 0); };
      return emit_pipeline_warp_specialized(
          body, grid(group, m_blocks),
          in_specs(spec<kv_tile>(kv_map, buffered<kv_slots>), spec<kv_tile>(kv_map, buffered<kv_slots>),
                   spec<q_tile>(q_map), spec<q_tile>(q_map)),
          out_specs(), ws, max_concurrent_steps<2>, context);
    };
    auto loop = persistent_pipelines<attention_tile, scratch_bytes>(ws, ctx, tile_pipeline, k, v, q, d_o);
    scratch = ctx.allocate(scratch_bytes, FusedDq ? "P, dS and dQ of the compute warpgroups" : "P and dS of the compute warpgroups");
    loop.run(ctx.axis_index(0), tiles.tiles(), ctx.axis_size(0), [&](int j) { return tiles.at(j); });
    // The last reductions read SMEM, which must outlive them.
    if constexpr (FusedDq)
      if (!ws.is_memory(ctx)) wait_smem_to_gmem<0>(reads_done);
  }

  tilepipe::launch_config config(int workers, void* stream, profiler* profile) const {
    return {.grid = {workers}, .stream = stream, .profile = profile};
  }
};

/// The single pass's last launch: dQ in the gradients' type from its f32 accumulator, one
/// warpgroup per 64 rows of a sequence (grid: row blocks x sequences), head after head.
template <class T, int D>
struct attention_backward_dq_convert_kernel {
  static constexpr int num_threads = 1;
  static constexpr int BR = 64;  // dq_tiles' blocks

  attention_backward_detail::batch_layout batch;
  attention_backward_detail::dq_tiles dq_accum;
  int heads = 0;

  TP_HD void operator()(kernel_context& ctx, gmem<T, 4> dq) const {
    using namespace attention_backward_detail;
    const int b = ctx.axis_index(1);
    const sequence seq = batch.of(ctx, b);
    const int row0 = ctx.axis_index(0) * BR, rows = clamp_rows(seq.sq - row0, BR);
    if (rows == 0) return;
#pragma unroll 1
    for (int h = 0; h < heads; ++h)
#pragma unroll
      for (int part = 0; part < D / 64; ++part) {
        const auto f = load_packed<float, BR, 64>(dq_accum.part(seq, b, h, row0, part));
        store_rows(f, rows, [&](int r) {
          return dq.data + seq.batch * dq.stride[0] + (seq.q0 + row0 + r) * dq.stride[1] + h * dq.stride[2] + 64 * part;
        });
      }
  }
};

namespace attention_backward_detail {

/// The workers of a launch: one per SM (four in the interpreter), at most one per tile.
inline int workers(const device& dev, int tiles) {
  const int sms = dev.is_gpu() ? dev.multiprocessors() : 4;
  return tiles < sms ? tiles : sms;
}

/// A packed [total, H, D] view as [1, total, H, D].
template <class T>
tensor_view<T, 4> batch_of_one(const tensor_view<T, 3>& t) {
  return {t.data, {1, t.shape[0], t.shape[1], t.shape[2]}, {t.shape[0] * t.stride[0], t.stride[0], t.stride[1], t.stride[2]},
          t.on_gpu};
}

/// One row of `rows`'s memory with `heads` heads, for a tensor map over an empty tensor (a map
/// cannot describe one): the kernels read nothing through it.
template <class T>
tensor_view<T, 4> stand_in(const tensor_view<T, 4>& rows, long long heads) {
  return {rows.data, {rows.shape[0], 1, heads, rows.shape[3]}, rows.stride, rows.on_gpu};
}

template <class T, int D, bool FusedDq>
void launch_dkdv(const device& dev, const tensor_view<T, 4>& k, const tensor_view<T, 4>& v,
                 const tensor_view<T, 4>& rows, const tensor_view<T, 4>& grads, const tensor_view<T, 4>& dk,
                 const tensor_view<T, 4>& dv, const attention_backward_params& params, const dq_tiles& dq_accum,
                 int batches, int max_sk, bool masked, void* stream, profiler* profile) {
  attention_backward_dkdv_kernel<T, D, FusedDq> dkdv{params};
  dkdv.dq_accum = dq_accum;
  const int n_blocks = (max_sk + dkdv.BN - 1) / dkdv.BN;
  const int tiles = batches * static_cast<int>(k.shape[2]) * n_blocks;
  dkdv.tiles = attention_tile_order(batches, static_cast<int>(k.shape[2]), n_blocks, masked, workers(dev, tiles));
  kernel(dkdv, dkdv.config(workers(dev, tiles), stream, profile))(dev, k, v, rows, grads, dk, dv);
}

template <class T, int D>
void launch(const device& dev, const tensor_view<T, 4>& q, const tensor_view<T, 4>& k, const tensor_view<T, 4>& v,
            const tensor_view<T, 4>& o, const tensor_view<T, 4>& d_o, const tensor_view<T, 4>& dq,
            const tensor_view<T, 4>& dk, const tensor_view<T, 4>& dv, const attention_backward_params& params,
            const dq_tiles& dq_accum, int batches, const attention_backward_options& opt) {
  const int hq = static_cast<int>(q.shape[2]), hkv = static_cast<int>(k.shape[2]);
  const batch_layout& batch = params.batch;
  const int max_sq = batch.cu_seqlens_q ? batch.max_seqlen_q : batch.seqlen_q;
  const int max_sk = batch.cu_seqlens_k ? batch.max_seqlen_k : batch.seqlen_k;
  const bool masked = params.window_left >= 0 || params.window_right >= 0;
  // A tensor map cannot describe an empty tensor: with no query rows (or no keys) at all, Q
  // and dO (K and V) are given as one row of K's (Q's) memory, which no step reads.
  const bool no_rows = q.shape[1] == 0, no_keys = k.shape[1] == 0;
  const bool fused = dq_accum.data != nullptr;
  const int row_blocks = (max_sq + 63) / 64;  // the delta and dQ conversion kernels' 64-row blocks
  if (max_sq > 0 && !no_rows) {
    attention_backward_delta_kernel<T, D> delta{batch, params.delta, hq, dq_accum};
    kernel(delta, launch_config{.grid = {row_blocks, batches}, .smem_bytes = delta.smem_bytes, .stream = opt.stream})(
        dev, o, d_o);
  }
  if (max_sq > 0 && !no_rows && !fused) {
    attention_backward_dq_kernel<T, D> dq_kern{params};
    const int m_blocks = (max_sq + dq_kern.BM - 1) / dq_kern.BM;
    const int tiles = batches * hq * m_blocks;
    dq_kern.tiles = attention_tile_order(batches, hq, m_blocks, masked, workers(dev, tiles));
    const tensor_view<T, 4> keys = no_keys ? stand_in(q, hkv) : k, values = no_keys ? stand_in(q, hkv) : v;
    kernel(dq_kern, dq_kern.config(workers(dev, tiles), opt.stream))(dev, q, d_o, keys, values, dq);
  }
  if (max_sk > 0 && !no_keys) {
    const tensor_view<T, 4> rows = no_rows ? stand_in(k, hkv) : q, grads = no_rows ? stand_in(k, hkv) : d_o;
    if (!fused)
      launch_dkdv<T, D, false>(dev, k, v, rows, grads, dk, dv, params, {}, batches, max_sk, masked, opt.stream,
                               opt.profile);
    else if constexpr (D != 256)  // (run gives head dim 256 no dQ accumulator: no single pass there)
      launch_dkdv<T, D, true>(dev, k, v, rows, grads, dk, dv, params, dq_accum, batches, max_sk, masked, opt.stream,
                              opt.profile);
  }
  if constexpr (D != 256) {
    if (max_sq > 0 && !no_rows && fused) {
      attention_backward_dq_convert_kernel<T, D> convert{batch, dq_accum, hq};
      kernel(convert, launch_config{.grid = {row_blocks, batches}, .stream = opt.stream})(dev, dq);
    }
  }
}

/// Checks the tensors, fills in the kernels' parameters and dispatches on the head dim. lse is
/// [B, Hq, Sq] or [Hq, total_q] (varlen), its data and strides checked by the caller.
template <class T>
void run(const device& dev, const tensor_view<T, 4>& q, const tensor_view<T, 4>& k, const tensor_view<T, 4>& v,
         const tensor_view<T, 4>& o, const tensor_view<T, 4>& d_o, row_values lse, const tensor_view<T, 4>& dq,
         const tensor_view<T, 4>& dk, const tensor_view<T, 4>& dv, batch_layout batch, int batches,
         const attention_backward_options& opt) {
  const long long hq = q.shape[2], hkv = k.shape[2], d = q.shape[3];
  if (d != 64 && d != 128 && d != 256)
    detail::throw_formatted("attention_backward: head dim %lld is not supported (64, 128 or 256)", d);
  if (hkv < 1 || hq % hkv != 0)
    detail::throw_formatted("attention_backward: %lld query heads are not a multiple of %lld KV heads", hq, hkv);
  const tensor_view<T, 4>* shaped_as_q[] = {&o, &d_o, &dq};
  const char* q_names[] = {"o", "d_o", "dq"};
  for (int t = 0; t < 3; ++t)
    for (int i = 0; i < 4; ++i)
      if (shaped_as_q[t]->shape[i] != q.shape[i])
        detail::throw_formatted("attention_backward: %s and q differ in shape (dimension %d: %lld, %lld)", q_names[t], i,
                                shaped_as_q[t]->shape[i], q.shape[i]);
  const tensor_view<T, 4>* shaped_as_k[] = {&v, &dk, &dv};
  const char* k_names[] = {"v", "dk", "dv"};
  for (int t = 0; t < 3; ++t)
    for (int i = 0; i < 4; ++i)
      if (shaped_as_k[t]->shape[i] != k.shape[i])
        detail::throw_formatted("attention_backward: %s and k differ in shape (dimension %d: %lld, %lld)", k_names[t], i,
                                shaped_as_k[t]->shape[i], k.shape[i]);
  if (k.shape[3] != d) detail::throw_formatted("attention_backward: head dims differ: q %lld, k %lld", d, k.shape[3]);
  if (k.shape[0] != q.shape[0]) detail::throw_formatted("attention_backward: q and k differ in batch size");
  if (opt.window_left < -1 || opt.window_right < -1)
    detail::throw_formatted("attention_backward: window sizes are -1 (unbounded) or >= 0, got %d and %d",
                            opt.window_left, opt.window_right);
  const tensor_view<T, 4>* tma_inputs[] = {&q, &k, &v, &o, &d_o};
  const char* tma_names[] = {"q", "k", "v", "o", "d_o"};
  for (int t = 0; t < 5; ++t)
    if (tma_inputs[t]->shape[1] > 0) host::require_tma_rows(*tma_inputs[t], "attention_backward", tma_names[t]);
  const bool varlen = batch.cu_seqlens_q != nullptr;
  const long long rows = varlen ? hq * q.shape[1] : batches * hq * static_cast<long long>(batch.seqlen_q);
  if (batches == 0 || hq == 0 || (q.shape[1] == 0 && k.shape[1] == 0)) return;  // nothing to compute

  // delta = rowsum(dO * O) in the caller's workspace or one of this call's, laid out as a
  // contiguous LSE.
  tensor<float, 1> owned;
  float* workspace = opt.workspace;
  if (!workspace && rows > 0) owned = tensor<float, 1>(dev, {rows}), workspace = owned.data();
  const long long row_count = varlen ? q.shape[1] : batch.seqlen_q;
  const row_values delta{workspace, varlen ? 0 : hq * row_count, row_count};

  attention_backward_params params;
  params.batch = batch;
  params.lse = lse, params.delta = delta;
  params.group = static_cast<int>(hq / hkv);
  params.scale = opt.scale != 0.0f ? opt.scale : 1.0f / std::sqrt(static_cast<float>(d));
  params.scale_log2 = params.scale * 1.4426950408889634f;
  params.window_left = opt.window_left, params.window_right = opt.causal ? 0 : opt.window_right;

  // The single pass's dQ accumulator in 64-row blocks (dq_tiles), the caller's or one of this
  // call's.
  dq_tiles dq_accum;
  tensor<float, 1> owned_dq;
  // (At head dim 256 the three launches in either mode: faster there, and their sums come in
  // an order at least as good as any.)
  if (!opt.deterministic && rows > 0 && d != 256) {
    if (reinterpret_cast<std::uintptr_t>(opt.dq_workspace) % 16 != 0)
      detail::throw_formatted("attention_backward: dq_workspace must be 16-byte aligned (bulk reductions add to it)");
    const long long padded_rows = varlen ? q.shape[1] + 64LL * batches : (row_count + 63) / 64 * 64;
    dq_accum.data = opt.dq_workspace;
    if (!dq_accum.data) {
      owned_dq = tensor<float, 1>(dev, {attention_backward_dq_workspace_size(batches, row_count, hq, d, varlen)});
      dq_accum.data = owned_dq.data();
    }
    dq_accum.head_stride = padded_rows * d, dq_accum.batch_stride = varlen ? 0 : hq * padded_rows * d;
    dq_accum.head_dim = static_cast<int>(d), dq_accum.varlen = varlen;
  }
  if (d == 64) launch<T, 64>(dev, q, k, v, o, d_o, dq, dk, dv, params, dq_accum, batches, opt);
  else if (d == 128) launch<T, 128>(dev, q, k, v, o, d_o, dq, dk, dv, params, dq_accum, batches, opt);
  else launch<T, 256>(dev, q, k, v, o, d_o, dq, dk, dv, params, dq_accum, batches, opt);
}

}  // namespace attention_backward_detail

/// The gradients of tp::attention_forward over fixed-length batches: q, o, d_o and dq
/// [B, Sq, Hq, D], k, v, dk and dv [B, Sk, Hkv, D] (bf16 or f16; D 64, 128 or 256; Hq a multiple of
/// Hkv: dk and dv sum over the query heads of a KV head), lse the forward's [B, Hq, Sq] f32
/// log-sum-exp. Same scale and mask as the forward call (attention_backward_options).
template <class T>
void attention_backward(const device& dev, const tensor_view<T, 4>& q, const tensor_view<T, 4>& k,
                        const tensor_view<T, 4>& v, const tensor_view<T, 4>& o, const tensor_view<T, 4>& d_o,
                        const tensor_view<float, 3>& lse, const tensor_view<T, 4>& dq, const tensor_view<T, 4>& dk,
                        const tensor_view<T, 4>& dv, const attention_backward_options& opt = {}) {
  if (lse.shape[0] != q.shape[0] || lse.shape[1] != q.shape[2] || lse.shape[2] != q.shape[1])
    detail::throw_formatted("attention_backward: lse must be [B, Hq, Sq] = [%lld, %lld, %lld], got [%lld, %lld, %lld]",
                            q.shape[0], q.shape[2], q.shape[1], lse.shape[0], lse.shape[1], lse.shape[2]);
  if (lse.shape[2] > 1 && lse.stride[2] != 1)
    detail::throw_formatted("attention_backward: lse's rows must be contiguous (stride 1 along Sq, got %lld)",
                            lse.stride[2]);
  attention_backward_detail::batch_layout batch;
  batch.seqlen_q = static_cast<int>(q.shape[1]), batch.seqlen_k = static_cast<int>(k.shape[1]);
  attention_backward_detail::run<T>(dev, q, k, v, o, d_o, {lse.data, lse.stride[0], lse.stride[1]}, dq, dk, dv, batch,
                                    static_cast<int>(q.shape[0]), opt);
}

/// The same over a batch of packed sequences (attention_forward_varlen): q, o, d_o and dq
/// [total_q, Hq, D], k, v, dk and dv [total_k, Hkv, D], lse [Hq, total_q]; sequence b is rows
/// [cu_q[b], cu_q[b + 1]) of q and [cu_k[b], cu_k[b + 1]) of k (device arrays of batches + 1
/// ints); max_seqlen_q and max_seqlen_k bound the lengths (they size the tile spaces).
template <class T>
void attention_backward_varlen(const device& dev, const tensor_view<T, 3>& q, const tensor_view<T, 3>& k,
                               const tensor_view<T, 3>& v, const tensor_view<T, 3>& o, const tensor_view<T, 3>& d_o,
                               const tensor_view<float, 2>& lse, const tensor_view<T, 3>& dq,
                               const tensor_view<T, 3>& dk, const tensor_view<T, 3>& dv, const int* cu_seqlens_q,
                               const int* cu_seqlens_k, int batches, int max_seqlen_q, int max_seqlen_k,
                               const attention_backward_options& opt = {}) {
  using attention_backward_detail::batch_of_one;
  if (!cu_seqlens_q || !cu_seqlens_k)
    detail::throw_formatted("attention_backward: varlen needs cu_seqlens_q and cu_seqlens_k");
  if (lse.shape[0] != q.shape[1] || lse.shape[1] != q.shape[0])
    detail::throw_formatted("attention_backward: lse must be [Hq, total_q] = [%lld, %lld], got [%lld, %lld]", q.shape[1],
                            q.shape[0], lse.shape[0], lse.shape[1]);
  if (max_seqlen_q < 0 || max_seqlen_k < 0)
    detail::throw_formatted("attention_backward: max_seqlen_q and max_seqlen_k must be >= 0, got %d and %d",
                            max_seqlen_q, max_seqlen_k);
  if (lse.shape[1] > 1 && lse.stride[1] != 1)
    detail::throw_formatted("attention_backward: lse's rows must be contiguous (stride 1 along total_q, got %lld)",
                            lse.stride[1]);
  attention_backward_detail::batch_layout batch;
  batch.cu_seqlens_q = cu_seqlens_q, batch.cu_seqlens_k = cu_seqlens_k;
  batch.max_seqlen_q = max_seqlen_q, batch.max_seqlen_k = max_seqlen_k;
  batch.total_q = static_cast<int>(q.shape[0]), batch.total_k = static_cast<int>(k.shape[0]);
  attention_backward_detail::run<T>(dev, batch_of_one(q), batch_of_one(k), batch_of_one(v), batch_of_one(o),
                                    batch_of_one(d_o), {lse.data, 0, lse.stride[0]}, batch_of_one(dq),
                                    batch_of_one(dk), batch_of_one(dv), batch, batches, opt);
}

}  // namespace tilepipe
