// Flash attention forward, FlashAttention-3's schedule written with tilepipe's pipeline:
//     O = softmax(scale * Q K^T + mask) V,   LSE = ln sum_keys exp(scale * Q K^T + mask)   (per query row)
//
//     tp::attention_forward(dev, q, k, v, o, {.causal = true});          // [B, S, H, D] tensors
//     tp::attention_forward_varlen(dev, q, k, v, o, cu_q, cu_k, max_sq);  // packed [total, H, D]
//
// One CTA per SM loops over tiles of 128 query rows of one head (sched/attention_tiles.cuh:
// under a causal or local mask, pairs of row blocks of equal cost, head after head). Each tile is one warp-specialised pipeline
// over its KV blocks: the memory warpgroup loads Q once (a stationary input) and streams K
// and V through two slots each; the two compute warpgroups own 64 query rows each. At step
// s a compute warpgroup
//   1. takes its turn (tp::turn_order): issues S = Q K[s]^T and O += P[s-1] V[s-1], passes
//      the turn — the other warpgroup's wgmmas run while this one does its softmax (ping-pong);
//   2. waits for S only (P V stays in flight: overlap inside the warpgroup, though ptxas
//      still moves the wait for P V ahead of the softmax: docs/design.md), masks the
//      ragged, causal and window edges, and updates the online softmax in log2 units with
//      the scale folded into one FMA per element (exp2(s * scale log2 e - m));
//   3. waits for P V, rescales O, and converts P to 16 bits in registers: the A operand of
//      the next P V wgmma (the accumulator layout is the A-fragment layout), no SMEM trip.
// V lags K by one step (its index map is max(s - 1, 0), and the grid has one more step than
// KV blocks), so every block is released by the step whose wgmmas read it.
// The epilogue divides by the row sums and stores O and LSE from registers with the rows
// clipped to the sequence (a packed sequence ends anywhere: no TMA store).
#pragma once

#include "../ops/turn_order.cuh"
#include "../sched/attention_tiles.cuh"
#include "../tilepipe.cuh"
#include "attention_decode.cuh"

#include <cmath>
#include <type_traits>

namespace tilepipe {

/// What attention computes; the shapes come from the tensors. Masks are aligned to the
/// bottom right when Sq != Sk (FlashAttention 2/3): query row i sees keys j with
/// i + Sk - Sq - window_left <= j <= i + Sk - Sq + window_right.
struct attention_options {
  float scale = 0.0f;     // softmax scale; 0: 1 / sqrt(head_dim)
  bool causal = false;    // window_right = 0
  int window_left = -1;   // -1: unbounded
  int window_right = -1;  // -1: unbounded
  float* lse = nullptr;   // optional f32 log-sum-exp out: [B, Hq, Sq], or [Hq, total_q] for varlen
  void* stream = nullptr; // cudaStream_t (GPU)
  profiler* profile = nullptr;  // records the call's timeline (TILEPIPE_PROFILE builds; host/profiler.cuh)
  // Decode (max Sq <= 16, kernels/attention_decode.cuh): KV splits per query tile, 0 to
  // choose from the problem and the SMs; splits need the workspace (attention_partial_slots).
  int num_splits = 0;
  partials_ref partials{};
  // A KV cache (FlashAttention-3's seqused_k and page_table; any Sq runs the decode kernel,
  // chunked prefill too; varlen queries through the attention_forward_varlen overload with
  // 4-D k and v). seqused_k: [B] ints on the device, sequence b attends to its first
  // seqused_k[b] keys. page_table: [B, max_pages_per_seq] ints on the device (row-major); k
  // and v are then pages [num_pages, page_size, Hkv, D] (page_size a power of two from 16 to
  // 256) and key j of sequence b is row j % page_size of page page_table[b][j / page_size].
  // A paged cache needs seqused_k. Lengths beyond the table and pages outside k fail in the
  // interpreter and TILEPIPE_DEBUG builds, else are clipped (nothing outside k and v is read).
  const int* seqused_k = nullptr;
  const int* page_table = nullptr;
  int max_pages_per_seq = 0;
  // An fp8 KV cache (k and v fp8_e4m3, the overloads below; FlashInfer's and vLLM's k_scale
  // and v_scale, FlashAttention-3's k_descale and v_descale): attention runs on K = k *
  // k_scale and V = v * v_scale. f32 on the device: one value for the whole cache, or with
  // kv_scale_per_head one per KV head ([Hkv]); null is 1. k_scale must be positive and
  // finite, v_scale finite (checked in the interpreter and TILEPIPE_DEBUG builds). The
  // scales are folded into the softmax scale and the output's normalisation, not applied
  // per element; Q and O stay bf16 / f16. Runs on the decode kernel for any Sq.
  const float* k_scale = nullptr;
  const float* v_scale = nullptr;
  bool kv_scale_per_head = false;
};

/// KV block rows per head dimension: the fastest measured that fit SMEM with Q, two K and two
/// V slots (docs/benchmarks.md; 80 at head dim 256 fills 224 KB). At head dim 128 a causal or
/// local mask takes blocks of 128 (FlashAttention-3's choice too): a masked block's columns
/// past the diagonal are wasted work, and 128-row blocks line up with 128-row query tiles.
/// bench/variants.sh tries others (TP_ATTN_N64 ... of bench_attention).
template <int N64 = 192, int N128 = 176, int N256 = 80, int N128Masked = 128>
struct attention_blocks {
  template <int D, bool Masked = false>
  static constexpr int n = D == 64 ? N64 : D == 128 ? (Masked ? N128Masked : N128) : N256;
};

template <class T, int D, int BN = attention_blocks<>::n<D>>
struct attention_kernel {
  static_assert(D == 64 || D == 128 || D == 256, "tilepipe: attention supports head dims 64, 128 and 256");
  static constexpr warp_specialization<2, 40> ws{};  // two compute warpgroups, the memory one last
  static constexpr int num_threads = ws.num_threads;
  static constexpr int BM = 128, WM = 64;  // query rows per tile and per compute warpgroup
  using q_tile = tile<block<squeezed, element(BM), squeezed, D>, swizzle<128>>;
  using kv_tile = tile<block<squeezed, element(BN), squeezed, D>, swizzle<128>>;
  // Q in two slots where SMEM holds them beside two K and two V slots: the next tile's Q
  // then lands while this tile runs (with one, its load starts after this tile's last Q K^T).
  static constexpr int q_slots = 2 * BM * D * sizeof(T) + 4 * BN * D * sizeof(T) + 1024 <= smem_capacity ? 2 : 1;

  attention_tile_order tiles;
  int seqlen_q = 0, seqlen_k = 0;                       // fixed-length batches
  const int* cu_seqlens_q = nullptr;                    // varlen: sequence b is rows
  const int* cu_seqlens_k = nullptr;                    //   [cu[b], cu[b + 1]) of the packed tensors
  int max_seqlen_q = 0;                                 // varlen: the longest query sequence allowed
  int group = 1;                                        // query heads per KV head
  float scale_log2 = 0.0f;                              // scale * log2(e)
  int window_left = -1, window_right = -1;
  float* lse = nullptr;
  long long lse_head_stride = 0, lse_batch_stride = 0;  // varlen: the batch's rows start at cu_seqlens_q[b]

  /// n limited to [0, cap]: the rows of a block that lie inside its sequence.
  TP_HD static int clamp_rows(int n, int cap) { return n < 0 ? 0 : n < cap ? n : cap; }

  /// Where sequence b lives: its batch index in the 4-D tensors, first row and length.
  struct sequence {
    int batch, q0, sq, k0, sk;
  };
  /// Varlen offsets are in device memory, which only the kernel reads. Offsets that leave
  /// the packed tensors (total_q rows of q, total_k of k) or decrease, and sequences longer
  /// than max_seqlen_q, fail in the interpreter and TILEPIPE_DEBUG GPU builds; elsewhere
  /// they are clipped to the tensors and the bound: wrong rows, but nothing read or written
  /// outside q, k, v, o and lse (the policy of grouped_matmul's group tables).
  TP_HD sequence sequence_of([[maybe_unused]] const kernel_context& ctx, int b, int total_q, int total_k) const {
    if (!cu_seqlens_q) return {b, 0, seqlen_q, 0, seqlen_k};
    const int q0 = cu_seqlens_q[b], q1 = cu_seqlens_q[b + 1], k0 = cu_seqlens_k[b], k1 = cu_seqlens_k[b + 1];
    if constexpr (debug_checks) {
      if (q0 < 0 || q1 < q0 || q1 > total_q)
        prim::fail(ctx.failure(), "attention: sequence %d is rows [%d, %d) of q, which has %d (cu_seqlens_q must not "
                   "decrease and must stay within q)", b, q0, q1, total_q);
      if (k0 < 0 || k1 < k0 || k1 > total_k)
        prim::fail(ctx.failure(), "attention: sequence %d is rows [%d, %d) of k and v, which have %d (cu_seqlens_k must "
                   "not decrease and must stay within k)", b, k0, k1, total_k);
      if (q1 - q0 > max_seqlen_q)
        prim::fail(ctx.failure(), "attention: sequence %d has %d query rows, more than max_seqlen_q = %d", b, q1 - q0,
                   max_seqlen_q);
    }
    const int qa = clamp_rows(q0, total_q), qb = qa + clamp_rows(q1 - qa, total_q - qa);
    const int ka = clamp_rows(k0, total_k), kb = ka + clamp_rows(k1 - ka, total_k - ka);
    return {0, qa, clamp_rows(qb - qa, max_seqlen_q), ka, kb - ka};
  }

  TP_HD void operator()(kernel_context& ctx, gmem<T, 4, q_tile> q, gmem<T, 4, kv_tile> k, gmem<T, 4, kv_tile> v,
                        gmem<T, 4> o) const {
    const int ci = ws.compute_index(ctx);
    const turn_order<2> turns{ci};
    // The compute warpgroups' state: O, P packed as the A operand of P V, the running row
    // maxima and this thread's share of the row sums (finished once, in the epilogue).
    accumulator<WM, D> acc_o;
    operand_fragment<T, WM, BN> p;
    row_vector<WM> m, l;
    // V is read one step after it lands: the block of the previous step and its release.
    pending_block<smem<T, kv_tile>> v_prev{};
    consumed_token v_prev_done{};

    auto tile_pipeline = [&](attention_tile t) {
      const sequence seq = sequence_of(ctx, t.batch, static_cast<int>(q.shape[1]), static_cast<int>(k.shape[1]));
      const int row0 = t.m_block * BM;  // the tile's first query row in its sequence
      const int tile_rows = clamp_rows(seq.sq - row0, BM);
      // The KV blocks any of the tile's rows sees.
      const int shift = seq.sk - seq.sq, last_row = row0 + tile_rows - 1;
      const int key_end = window_right >= 0 ? min(seq.sk, last_row + shift + window_right + 1) : seq.sk;
      const int key_begin = window_left >= 0 ? max(0, row0 + shift - window_left) : 0;
      const int n_lo = key_begin / BN, n_hi = key_end > 0 ? (key_end + BN - 1) / BN : 0;
      const int blocks = tile_rows > 0 && n_hi > n_lo ? n_hi - n_lo : 0;
      const int kv_head = t.head / group;

      // Step s reads KV block n_hi - 1 - s (the last first, as FlashAttention-3: the block
      // that crosses the sequence's end or the causal diagonal comes first, in the step with
      // the mask), issues S = Q K^T of its block and O += P V of the previous one. Blocks
      // n >= mask_hi cross the sequence's end or the right window edge of one of this
      // warpgroup's rows, blocks n < mask_lo its left window edge: those run with the mask.
      const int q_first = row0 + ci * WM, q_last = q_first + WM - 1;
      const int visible_end = window_right >= 0 ? min(seq.sk, q_first + shift + window_right + 1) : seq.sk;
      const int mask_hi = max(visible_end, 0) / BN;
      const int left_edge = window_left >= 0 ? q_last + shift - window_left : 0;
      const int mask_lo = left_edge > 0 ? (left_edge + BN - 1) / BN : 0;
      auto body = [&, seq, n_hi, shift, q_first, mask_hi, mask_lo](index<1> at, auto q_s, auto k_s, auto v_s,
                                                                     consumed_token q_done, consumed_token k_done,
                                                                     consumed_token v_done) {
        const int s = at[0];
        const int n = n_hi - 1 - s, key0 = n * BN;
        const bool masked = n >= mask_hi || n < mask_lo;
        auto step = [&](auto first, auto with_mask) {
          accumulator<WM, BN> acc_s;
          turns.take([&] {
            wgmma(acc_s, rows<WM>(q_s, ci * WM), transpose(k_s), false);
            if constexpr (!first) wgmma(acc_o, p, v_prev.wait());
          });
          wgmma_wait<first ? 0 : 1>(acc_s);  // S is ready; P V still runs
          k_done.arrive();  // K's last reader is done: its slot refills under the softmax
          q_done.arrive();  // (Q's only after the tile's last Q K^T)
          profile_scope softmax_scope(ctx, "softmax");  // on the timeline: the ping-pong (docs/guide.md)
          if constexpr (with_mask) {
            mask_columns(acc_s, [&](int r) {  // row r sees keys [row - left, row + right] of the sequence
              const int row = q_first + r + shift - key0;
              const int hi = min(seq.sk - key0, BN);
              return column_range{window_left >= 0 ? row - window_left : 0,
                                  window_right >= 0 ? min(hi, row + window_right + 1) : hi};
            }, -INFINITY);
          }
          // Online softmax in log2 units: m is the running max of s * scale * log2(e). Only a
          // masked block can leave a row without keys (m = -inf, which exp2 must not see).
          const row_vector<WM> m_new = max(m, row_max(acc_s) * scale_log2);
          row_vector<WM> m_use = m_new;
          if constexpr (with_mask) m_use = map(m_new, [](float x) { return x == -INFINITY ? 0.0f : x; });
          const row_vector<WM> alpha = exp2(m - m_use);
          const float sl2 = scale_log2;
          auto probs = broadcast_rows(acc_s, m_use, [sl2](float x, float mu) { return prim::exp2(x * sl2 - mu); });
          l = l * alpha + partial_row_sum(probs);
          m = m_new;
          if constexpr (!first) {
            pin(probs, l, m);  // the softmax runs under P V: before the wait, not after
            wgmma_wait<0>(acc_o, p);
            v_prev_done.arrive();
            acc_o = acc_o * alpha;
          }
          p = to_operand<T>(probs);
          v_prev = v_s, v_prev_done = v_done;
        };
        // Three copies of the step: the first (no P V yet, and the mask), and the others with
        // and without the mask (FlashAttention-3 splits its loop likewise): a mask under a
        // branch inside one step costs registers and scheduling freedom in every block.
        if (s == 0) step(std::true_type{}, std::true_type{});
        else if (masked) step(std::false_type{}, std::true_type{});
        else step(std::false_type{}, std::false_type{});
      };

      auto context = compute_context([&, seq, t, row0, tile_rows, blocks](auto pipeline) {
        acc_o = zeros<float, WM, D>();
        m = full<row_vector<WM>>(-INFINITY);
        l = full<row_vector<WM>>(0.0f);
        pipeline();
        if (blocks > 0) {  // the last block's P V
          turns.take([&] { wgmma(acc_o, p, v_prev.wait()); });
          wgmma_wait<0>(acc_o, p);
          v_prev_done.arrive();
        }
        l = finish_row_sum(l);
        acc_o = acc_o * map(l, [](float x) { return x > 0.0f ? 1.0f / x : 0.0f; });
        const int my_row0 = row0 + ci * WM, my_rows = clamp_rows(tile_rows - ci * WM, WM);
        if (my_rows == 0) return;
        store(plane<1, 3>(o.at(ds{seq.batch, 1}, ds{seq.q0 + my_row0, my_rows}, ds{t.head, 1}, ds{0, D})), acc_o);
        if (lse) {
          const auto lse_rows = zip(m, l, [](float mx, float sum) {
            return sum > 0.0f ? (mx + log2f(sum)) * 0.69314718f : -INFINITY;
          });
          const long long first = (cu_seqlens_q ? seq.q0 : t.batch * lse_batch_stride) + t.head * lse_head_stride + my_row0;
          gmem_ref<float, 1> dst;
          dst.data = lse + first, dst.shape[0] = my_rows, dst.stride[0] = 1;
          store(dst, lse_rows);
        }
      });
      // K and V stream (their maps are affine in the step: a new block every step, no index
      // compares), and only compute warpgroup 0 waits for them to land: the turn order puts
      // warpgroup 1's wgmmas behind warpgroup 0's, which came after its wait.
      const int qb = seq.batch, q_row = seq.q0 + row0, k_top = seq.k0 + (n_hi - 1) * BN, head = t.head;
      auto q_map = [=](auto) { return idx(qb, q_row, head, 0); };
      auto kv_map = [=](auto s) { return idx(qb, k_top - s * BN, kv_head, 0); };
      return emit_pipeline_warp_specialized(
          body, grid(blocks),
          in_specs(spec<q_tile>(q_map, waited_by<0>, buffered<q_slots>), spec<kv_tile>(kv_map, waited_by<0>),
                   spec<kv_tile>(kv_map, manual_ready, waited_by<0>)),
          out_specs(), ws, max_concurrent_steps<2>, manual_consumed_barriers, context);
    };
    auto loop = persistent_pipelines<attention_tile>(ws, ctx, tile_pipeline, q, k, v);
    if (!ws.is_memory(ctx)) turns.start();
    loop.run(ctx.axis_index(0), tiles.tiles(), ctx.axis_size(0), [&](int j) { return tiles.at(j); });
    if (!ws.is_memory(ctx)) turns.finish();
  }

  tilepipe::launch_config config(int workers, void* stream, profiler* profile = nullptr) const {
    return {.grid = {workers}, .stream = stream, .profile = profile};
  }
};

namespace attention_detail {

/// A packed [total, H, D] view as [1, total, H, D].
template <class T>
tensor_view<T, 4> batch_of_one(const tensor_view<T, 3>& t) {
  return {t.data, {1, t.shape[0], t.shape[1], t.shape[2]}, {t.shape[0] * t.stride[0], t.stride[0], t.stride[1], t.stride[2]},
          t.on_gpu};
}

/// The workers of a launch: one per SM (four in the interpreter), at most one per tile.
inline int attention_workers(const device& dev, int tiles) {
  const int sms = dev.is_gpu() ? dev.multiprocessors() : 4;
  return tiles < sms ? tiles : sms;
}

template <class T, int D, int BN>
void launch(const device& dev, attention_kernel<T, D, BN> kern, const tensor_view<T, 4>& q, const tensor_view<T, 4>& k,
            const tensor_view<T, 4>& v, const tensor_view<T, 4>& o, const attention_options& opt) {
  kernel(kern, kern.config(attention_workers(dev, kern.tiles.tiles()), opt.stream, opt.profile))(dev, q, k, v, o);
}

/// Checks the shapes, fills in the kernel's parameters and dispatches on the head dim. K and
/// V are T, or fp8_e4m3 (the decode kernel only).
template <class T, class Blocks, class KV>
void run(const device& dev, const tensor_view<T, 4>& q, const tensor_view<KV, 4>& k, const tensor_view<KV, 4>& v,
         const tensor_view<T, 4>& o, int batches, int max_sq, int sq, int sk, const int* cu_q, const int* cu_k,
         const attention_options& opt) {
  constexpr bool fp8_kv = std::is_same_v<KV, fp8_e4m3>;
  static_assert(std::is_same_v<KV, T> || fp8_kv, "tilepipe: attention's K and V are Q's type or fp8_e4m3");
  const long long hq = q.shape[2], hkv = k.shape[2], d = q.shape[3];
  if (!fp8_kv && (opt.k_scale || opt.v_scale || opt.kv_scale_per_head))
    detail::throw_formatted("attention: k_scale, v_scale and kv_scale_per_head dequantise fp8 (e4m3) K and V; k and v "
                            "are %s", dtype_traits<KV>::name);
  if (d != 64 && d != 128 && d != 256)
    detail::throw_formatted("attention: head dim %lld is not supported (64, 128 or 256)", d);
  if (k.shape[3] != d || v.shape[3] != d || o.shape[3] != d)
    detail::throw_formatted("attention: head dims differ: q %lld, k %lld, v %lld, o %lld", d, k.shape[3], v.shape[3],
                            o.shape[3]);
  if (hkv < 1 || hq % hkv != 0)
    detail::throw_formatted("attention: %lld query heads are not a multiple of %lld KV heads", hq, hkv);
  if (v.shape[0] != k.shape[0] || v.shape[1] != k.shape[1] || v.shape[2] != hkv)
    detail::throw_formatted("attention: k and v differ in shape");
  for (int i = 0; i < 4; ++i)
    if (o.shape[i] != q.shape[i]) detail::throw_formatted("attention: o and q differ in shape (dimension %d)", i);
  const bool paged = opt.page_table != nullptr;
  const bool kv_cache = paged || opt.seqused_k != nullptr;
  if (kv_cache && cu_k)
    detail::throw_formatted("attention: seqused_k and page_table take the cache as k and v ([B, Sk, Hkv, D], or pages), "
                            "not packed rows with cu_seqlens_k: call attention_forward, or attention_forward_varlen "
                            "with 4-D k and v");
  if (cu_q && !cu_k && !kv_cache)
    detail::throw_formatted("attention: varlen queries against a 4-D k and v need seqused_k (a KV cache)");
  if (paged) {
    const long long page = k.shape[1];
    if (!opt.seqused_k)
      detail::throw_formatted("attention: page_table needs seqused_k, the keys each sequence uses (device, [B] ints)");
    if (opt.max_pages_per_seq < 1)
      detail::throw_formatted("attention: page_table needs max_pages_per_seq, its row length (>= 1), got %d",
                              opt.max_pages_per_seq);
    if (page < 16 || page > 256 || (page & (page - 1)) != 0)
      detail::throw_formatted("attention: page size %lld (dimension 1 of the paged k and v, [num_pages, page_size, "
                              "Hkv, D]) is not supported: a power of two from 16 to 256", page);
    if (k.shape[0] < 1) detail::throw_formatted("attention: a paged cache needs at least one page, k has none");
    if (static_cast<long long>(opt.max_pages_per_seq) * page > 0x7fffffffLL)
      detail::throw_formatted("attention: max_pages_per_seq = %d pages of %lld keys is more than 2^31 keys",
                              opt.max_pages_per_seq, page);
  } else if (cu_q && !cu_k) {
    if (k.shape[0] != batches)
      detail::throw_formatted("attention: k has %lld sequences, the batch %d", k.shape[0], batches);
  } else if (k.shape[0] != q.shape[0]) {
    detail::throw_formatted("attention: q and k differ in batch size");
  }
  if (opt.window_left < -1 || opt.window_right < -1)
    detail::throw_formatted("attention: window sizes are -1 (unbounded) or >= 0, got %d and %d", opt.window_left,
                            opt.window_right);
  if (opt.num_splits < 0)
    detail::throw_formatted("attention: num_splits is 0 (chosen from the problem) or positive, got %d", opt.num_splits);
  // No keys at all (Sk = 0, or a varlen batch whose sequences all have none): every row's
  // output is 0 and its LSE -inf, which the kernel computes without reading K or V (no KV
  // block, no pipeline step), as for an empty sequence of a varlen batch. A tensor map
  // cannot describe an empty tensor, so K and V are then given as one row of Q's memory,
  // which nothing reads.
  const bool no_keys = k.shape[1] == 0;
  constexpr long long per_q_element = sizeof(T) / sizeof(KV);  // q's strides counted in KV elements
  const tensor_view<KV, 4> keys =
      no_keys ? tensor_view<KV, 4>{reinterpret_cast<KV*>(q.data), {q.shape[0], 1, hkv, d},
                                   {q.stride[0] * per_q_element, q.stride[1] * per_q_element,
                                    q.stride[2] * per_q_element, q.stride[3]}, q.on_gpu}
              : k;
  const tensor_view<KV, 4> values = no_keys ? keys : v;
  host::require_tma_rows(q, "attention", "q"), host::require_tma_rows(keys, "attention", "k");
  host::require_tma_rows(values, "attention", "v"), host::require_tma_rows(o, "attention", "o");
  const int right = opt.causal ? 0 : opt.window_right;
  const int m_blocks = (max_sq + 127) / 128;
  const float scale = opt.scale != 0.0f ? opt.scale : 1.0f / std::sqrt(static_cast<float>(d));
  const bool masked = right >= 0 || opt.window_left >= 0;
  auto fill = [&](auto kern) {
    const int tiles = batches * static_cast<int>(hq) * (m_blocks > 0 ? m_blocks : 1);
    kern.tiles = attention_tile_order(batches, static_cast<int>(hq), m_blocks > 0 ? m_blocks : 1, masked,
                                      attention_workers(dev, tiles));
    kern.seqlen_q = sq, kern.seqlen_k = sk, kern.cu_seqlens_q = cu_q, kern.cu_seqlens_k = cu_k;
    kern.max_seqlen_q = max_sq;
    kern.group = static_cast<int>(hq / hkv);
    kern.scale_log2 = scale * 1.4426950408889634f;
    kern.window_left = opt.window_left, kern.window_right = right;
    kern.lse = opt.lse;
    kern.lse_head_stride = cu_q ? q.shape[1] : sq;
    kern.lse_batch_stride = hq * sq;
    return kern;
  };
  if (batches == 0 || max_sq == 0 || hq == 0) return;  // nothing to compute
  // A KV cache runs on the decode kernel for any Sq (chunked prefill too: its 64-row tiles of
  // packed heads and split-KV work for long query sequences, without the prefill kernel's
  // two-warpgroup ping-pong; docs/design.md).
  // fp8 K and V too, for any Sq: the prefill kernel has no fp8 path.
  if (max_sq <= attention_decode_max_seqlen_q || kv_cache || fp8_kv)
    return attention_decode(dev, q, keys, values, o, batches, max_sq, sq, sk, cu_q, cu_k,
                            {scale, opt.window_left, right, opt.lse, opt.num_splits, opt.partials, opt.stream, opt.profile,
                             opt.seqused_k, opt.page_table, opt.max_pages_per_seq, opt.k_scale, opt.v_scale,
                             opt.kv_scale_per_head});
  if constexpr (fp8_kv) return;
  else if (d == 64) launch(dev, fill(attention_kernel<T, 64, Blocks::template n<64>>{}), q, keys, values, o, opt);
  else if (d == 128 && masked) launch(dev, fill(attention_kernel<T, 128, Blocks::template n<128, true>>{}), q, keys, values, o, opt);
  else if (d == 128) launch(dev, fill(attention_kernel<T, 128, Blocks::template n<128>>{}), q, keys, values, o, opt);
  else launch(dev, fill(attention_kernel<T, 256, Blocks::template n<256>>{}), q, keys, values, o, opt);
}

/// The public entry points' shapes as run takes them, for K and V of either element type.
template <class T, class Blocks, class KV>
void forward_fixed(const device& dev, const tensor_view<T, 4>& q, const tensor_view<KV, 4>& k,
                   const tensor_view<KV, 4>& v, const tensor_view<T, 4>& o, const attention_options& opt) {
  run<T, Blocks>(dev, q, k, v, o, static_cast<int>(q.shape[0]), static_cast<int>(q.shape[1]),
                 static_cast<int>(q.shape[1]), static_cast<int>(k.shape[1]), nullptr, nullptr, opt);
}

template <class T, class Blocks, class KV>
void forward_varlen_cache(const device& dev, const tensor_view<T, 3>& q, const tensor_view<KV, 4>& k,
                          const tensor_view<KV, 4>& v, const tensor_view<T, 3>& o, const int* cu_seqlens_q, int batches,
                          int max_seqlen_q, const attention_options& opt) {
  if (!cu_seqlens_q) detail::throw_formatted("attention: varlen needs cu_seqlens_q");
  run<T, Blocks>(dev, batch_of_one(q), k, v, batch_of_one(o), batches, max_seqlen_q, 0, static_cast<int>(k.shape[1]),
                 cu_seqlens_q, nullptr, opt);
}

template <class T, class Blocks, class KV>
void forward_varlen_packed(const device& dev, const tensor_view<T, 3>& q, const tensor_view<KV, 3>& k,
                           const tensor_view<KV, 3>& v, const tensor_view<T, 3>& o, const int* cu_seqlens_q,
                           const int* cu_seqlens_k, int batches, int max_seqlen_q, const attention_options& opt) {
  if (!cu_seqlens_q || !cu_seqlens_k) detail::throw_formatted("attention: varlen needs cu_seqlens_q and cu_seqlens_k");
  run<T, Blocks>(dev, batch_of_one(q), batch_of_one(k), batch_of_one(v), batch_of_one(o), batches, max_seqlen_q, 0, 0,
                 cu_seqlens_q, cu_seqlens_k, opt);
}

}  // namespace attention_detail

/// Attention over fixed-length batches: q and o [B, Sq, Hq, D], k and v [B, Sk, Hkv, D]
/// (bf16 or f16), Hq a multiple of Hkv (grouped-query attention), D 64, 128 or 256.
template <class T, class Blocks = attention_blocks<>>
void attention_forward(const device& dev, const tensor_view<T, 4>& q, const tensor_view<T, 4>& k,
                       const tensor_view<T, 4>& v, const tensor_view<T, 4>& o, const attention_options& opt = {}) {
  attention_detail::forward_fixed<T, Blocks>(dev, q, k, v, o, opt);
}

/// The same over an fp8 (e4m3) K and V, dequantised by opt.k_scale and opt.v_scale (q and o
/// bf16 or f16; any Sq, on the decode kernel; a KV cache with seqused_k / page_table too).
template <class T, class Blocks = attention_blocks<>>
void attention_forward(const device& dev, const tensor_view<T, 4>& q, const tensor_view<fp8_e4m3, 4>& k,
                       const tensor_view<fp8_e4m3, 4>& v, const tensor_view<T, 4>& o, const attention_options& opt = {}) {
  attention_detail::forward_fixed<T, Blocks>(dev, q, k, v, o, opt);
}

/// Varlen queries against a KV cache (chunked prefill of a batch of sequences of different
/// lengths, FlashAttention-3's varlen call with page_table): q and o [total_q, Hq, D],
/// sequence b's queries rows [cu_q[b], cu_q[b + 1]); k and v the cache, [B, Sk, Hkv, D] with
/// opt.seqused_k, or pages [num_pages, page_size, Hkv, D] with opt.page_table too; sequence b
/// attends to its first seqused_k[b] keys. LSE [Hq, total_q]. Runs on the decode kernel.
template <class T, class Blocks = attention_blocks<>>
void attention_forward_varlen(const device& dev, const tensor_view<T, 3>& q, const tensor_view<T, 4>& k,
                              const tensor_view<T, 4>& v, const tensor_view<T, 3>& o, const int* cu_seqlens_q,
                              int batches, int max_seqlen_q, const attention_options& opt) {
  attention_detail::forward_varlen_cache<T, Blocks>(dev, q, k, v, o, cu_seqlens_q, batches, max_seqlen_q, opt);
}

/// The same over an fp8 (e4m3) cache, dequantised by opt.k_scale and opt.v_scale.
template <class T, class Blocks = attention_blocks<>>
void attention_forward_varlen(const device& dev, const tensor_view<T, 3>& q, const tensor_view<fp8_e4m3, 4>& k,
                              const tensor_view<fp8_e4m3, 4>& v, const tensor_view<T, 3>& o, const int* cu_seqlens_q,
                              int batches, int max_seqlen_q, const attention_options& opt) {
  attention_detail::forward_varlen_cache<T, Blocks>(dev, q, k, v, o, cu_seqlens_q, batches, max_seqlen_q, opt);
}

/// Attention over a batch of packed sequences (FlashAttention's varlen interface): q and o
/// [total_q, Hq, D], k and v [total_k, Hkv, D]; sequence b is rows [cu_q[b], cu_q[b + 1])
/// of q and [cu_k[b], cu_k[b + 1]) of k and v (device arrays of batches + 1 ints, empty
/// sequences allowed); max_seqlen_q bounds the query lengths (it sizes the tile space).
template <class T, class Blocks = attention_blocks<>>
void attention_forward_varlen(const device& dev, const tensor_view<T, 3>& q, const tensor_view<T, 3>& k,
                              const tensor_view<T, 3>& v, const tensor_view<T, 3>& o, const int* cu_seqlens_q,
                              const int* cu_seqlens_k, int batches, int max_seqlen_q, const attention_options& opt = {}) {
  attention_detail::forward_varlen_packed<T, Blocks>(dev, q, k, v, o, cu_seqlens_q, cu_seqlens_k, batches, max_seqlen_q,
                                                     opt);
}

/// The same over packed fp8 (e4m3) K and V, dequantised by opt.k_scale and opt.v_scale (any
/// query lengths, on the decode kernel).
template <class T, class Blocks = attention_blocks<>>
void attention_forward_varlen(const device& dev, const tensor_view<T, 3>& q, const tensor_view<fp8_e4m3, 3>& k,
                              const tensor_view<fp8_e4m3, 3>& v, const tensor_view<T, 3>& o, const int* cu_seqlens_q,
                              const int* cu_seqlens_k, int batches, int max_seqlen_q, const attention_options& opt = {}) {
  attention_detail::forward_varlen_packed<T, Blocks>(dev, q, k, v, o, cu_seqlens_q, cu_seqlens_k, batches, max_seqlen_q,
                                                     opt);
}

}  // namespace tilepipe
