// Attention for decode and short queries (Sq <= 16: a new token, or speculative decoding's
// drafts) against a long KV cache; tp::attention_forward and attention_forward_varlen run
// it when the query sequences are that short (kernels/attention.cuh), and for any Sq over a
// KV cache (chunked prefill: several 64-row tiles of packed rows per KV head). It computes what
// the prefill kernel computes, O and the LSE, with the same masks, on another schedule:
//
// Grouped-query packing. The query heads that share a KV head, times the query rows, are
// one tile's rows: packed row r is query position r / G of query head kv_head * G + r % G
// (G = Hq / Hkv; FlashAttention-3's PackGQA order), 64 rows a tile, so a KV head's K and
// V are read once for all its query heads. One compute warpgroup holds a tile (a decode
// tile has few rows: two warpgroups would each hold mostly padding). The packed rows are
// no box TMA can load (G is a run-time value), so the compute warpgroup gathers them into
// SMEM with ordinary loads at the start of the tile, while the memory warpgroup already
// streams the tile's first K and V blocks.
//
// Split-KV (FlashDecoding). When batch x KV heads x row tiles leaves SMs idle, each tile's
// KV blocks are split into `splits` contiguous ranges, one work item each; the items are
// dealt round robin to one CTA per SM (the splits of a tile side by side, so they finish
// together). An item's pipeline streams its range's K and V blocks, the last first, as
// the prefill kernel does (one step: S = Q K^T and the previous block's P V in flight
// together, the online softmax under P V). With one split the epilogue stores O and LSE.
// With more, each item writes its O (normalised) and LSE rows to a slot of a workspace and
// counts itself on the tile's counter; the item that arrives last combines the tile's
// slots, in split order (the result does not depend on which one is last):
//     LSE = log sum_i exp(LSE_i),   O = sum_i exp(LSE_i - LSE) O_i
// A split with no keys (more splits than blocks, a short sequence) has LSE_i = -inf and
// O_i = 0 and adds nothing; a row without any key ends with O = 0 and LSE = -inf.
//
// K and V are addressed by one index map (kv_map: sequence, first key of the block, KV
// head). A paged KV cache (attention_options::page_table, FlashAttention-3's page_table and
// seqused_k) keeps the block of 128 keys (64 at head dim 256) and fetches it page by page:
// K and V are [num_pages, page_size, Hkv, D], and the block is a tp::gathered_spec whose
// row boxes come from the pages the table names: one box per block where a page holds the
// block (page_size >= the block), else boxes of 16 rows, each from its page, all landing
// in the block's slot on its one barrier. The compute side is the unpaged kernel's: a
// paged run gives the bytes an unpaged run on the same keys gives.
#pragma once

#include "../tilepipe.cuh"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <type_traits>

namespace tilepipe {

/// The longest query sequences (max_seqlen_q) that tp::attention_forward runs on the decode kernel.
inline constexpr int attention_decode_max_seqlen_q = 16;

/// One work item of a decode launch: row tile m_block of the packed rows of (batch, KV
/// head), over the KV blocks of one split.
struct decode_item {
  int batch, kv_head, m_block, split;
};

/// The items in the order the CTAs take them round robin: the row tiles of one split side
/// by side (they read the same K and V blocks, from L2 after the first), then the splits of
/// one (batch, KV head) (they finish together, so the last one's combine does not wait for
/// a straggler of another wave), then the KV heads and batches. Divisions prepared on the host.
class decode_items {
 public:
  decode_items() = default;
  decode_items(int batches, int kv_heads, int m_blocks, int splits)
      : items_(batches * kv_heads * m_blocks * splits), m_blocks_(m_blocks), splits_(splits), kv_heads_(kv_heads) {}

  TP_HD int items() const { return items_; }
  TP_HD int splits() const { return splits_.divisor(); }
  TP_HD decode_item at(int j) const {
    const int rest = m_blocks_.div(j), bh = splits_.div(rest), batch = kv_heads_.div(bh);
    return {batch, bh - batch * kv_heads_.divisor(), j - rest * m_blocks_.divisor(), rest - bh * splits_.divisor()};
  }
  /// The tile an item belongs to (its counter in the workspace); its slot is tile * splits + split.
  TP_HD int tile(const decode_item& it) const {
    return (it.batch * kv_heads_.divisor() + it.kv_head) * m_blocks_.divisor() + it.m_block;
  }

 private:
  int items_ = 0;
  fast_divmod m_blocks_, splits_, kv_heads_;
};

/// KV block rows per head dim: the S accumulator (64 x BN floats), the P operand and O
/// (64 x D floats) fit one warpgroup's registers.
template <int D>
inline constexpr int attention_decode_block = D == 256 ? 64 : 128;

/// The rows of the boxes a paged decode kernel gathers a KV block from when a page is
/// smaller than the block: the smallest page (a page of 32 or 64 keys moves in two or four).
inline constexpr int attention_page_box_rows = 16;

/// PageBoxRows: 0 for K and V as [B, Sk, Hkv, D] tensors (or packed varlen rows); else a
/// paged cache whose KV blocks are gathered in boxes of that many rows (BN: one box, the
/// page holds the block; attention_page_box_rows: the pages are smaller than the block).
/// KV: K and V's element type, T's, or fp8_e4m3 (an fp8 KV cache: each block is converted
/// to T in SMEM for the wgmmas, and the scales are folded into the softmax scale and the
/// output's normalisation).
template <class T, int D, int BN = attention_decode_block<D>, int PageBoxRows = 0, class KV = T>
struct attention_decode_kernel {
  static_assert(D == 64 || D == 128 || D == 256, "tilepipe: attention supports head dims 64, 128 and 256");
  static constexpr bool fp8_kv = std::is_same_v<KV, fp8_e4m3>;
  static_assert(std::is_same_v<KV, T> || fp8_kv, "tilepipe: the decode kernel's K and V are Q's type or fp8_e4m3");
  static_assert(PageBoxRows >= 0 && PageBoxRows <= BN && BN % (PageBoxRows > 0 ? PageBoxRows : 1) == 0,
                "tilepipe: a paged KV block is a whole number of boxes");
  static constexpr int BM = 64;  // packed query rows per tile
  static constexpr int block_n = BN;
  static constexpr bool paged = PageBoxRows > 0;
  // The compute warpgroups, the memory one last. With one compute warpgroup the memory one
  // may keep up to 256 registers and the compute one still gets 256 (register_split): a
  // gathered KV block holds its boxes' coordinates (up to 8 x 4 ints) at once, so that
  // their table loads are in flight together, which spilled 12-52 bytes at 40 (72 with two).
  // fp8 K and V: two compute warpgroups, each taking every other KV block with its own
  // softmax state, merged at the tile's end: converting a block in SMEM takes longer than
  // reading it, and one warpgroup converted every block between its wgmmas (docs/design.md).
  // (Head dim 256 keeps one: warpgroup 0 would hold both halves' O for the merge.)
  // 16-bit K and V at head dim 64: two as well, each step's chain (S, its wait, the softmax,
  // P V's wait) overlapping the other warpgroup's; at 128 their merge buffer (32 KB) would
  // cost one of three K and V slots. Pages smaller than a block keep two too, though 3%
  // slower there: a paged run must give the bytes of an unpaged run on the same keys.
  static constexpr bool merge_buffer_own = !fp8_kv && D == 64;
  static constexpr int compute_wgs = (fp8_kv && D <= 128) || merge_buffer_own ? 2 : 1;
  static constexpr warp_specialization<compute_wgs, paged ? (compute_wgs > 1 ? 72 : 96) : 40> ws{};
  static constexpr int num_threads = ws.num_threads;
  using kv_block = block<squeezed, element(BN), squeezed, D>;
  // fp8 blocks land unswizzled: only the conversion reads them, with ordinary loads of 8
  // contiguous bytes per thread, which no swizzle would make faster.
  using kv_swizzle = std::conditional_t<fp8_kv, swizzle<0>, swizzle<128>>;
  // L2 promotion to a box row's bytes, not 256: K and V are read once, in box rows of 64 to
  // 256 bytes of a [.., Hkv, D] row; promoted to 256 bytes HBM delivered 8-12% less (docs/design.md).
  static constexpr int kv_box_row_bytes = tile_layout<tile<kv_block, kv_swizzle>, sizeof(KV)>::row_bytes;
  using kv_promotion = l2_promotion<kv_box_row_bytes < 256 ? kv_box_row_bytes : 256>;
  using kv_tile = std::conditional_t<paged && PageBoxRows < BN,
                                     tile<kv_block, kv_swizzle, box_rows<PageBoxRows>, kv_promotion>,
                                     tile<kv_block, kv_swizzle, kv_promotion>>;
  using q_view = smem<T, tile<block<BM, D>, swizzle<128>>>;
  // Q's rows in a slot of the pipeline (16-bit K and V, head dims 64 and 128), a block of q
  // seen as [B, Sq Hq, D] (a box from any row: an element offset) fetched once per item. Where
  // the tile's packed rows are consecutive rows of that view (q_rows_by_tma: one query
  // position, or one KV head) the memory warpgroup's TMA brings them, in stream order just
  // ahead of the item's first K block; else the compute warpgroup gathers them into the slot
  // once the block (any rows of q) has landed. (Elsewhere it gathers them into its own SMEM.)
  static constexpr bool q_slot = !fp8_kv && D <= 128;
  using q_rows_tile = tile<block<squeezed, element(BM), D>, swizzle<128>>;
  using q_rows_param = std::conditional_t<q_slot, gmem<T, 3, q_rows_tile>, gmem<T, 4>>;
  /// P V's operand type: T, or f16 with fp8 K and V, whose codes turn into f16 in one
  /// instruction per two values (into bf16 in four, through f32). P's values in [0, 1] keep
  /// 11 bits in f16 down to 2^-14 (bf16: 8); those below 2^-25 become 0, each less than
  /// 2^-25 of the row maximum's weight of 1.
  using pv_type = std::conditional_t<fp8_kv, f16, T>;
  /// fp8: a K block converted to T and a V block converted to pv_type, the wgmmas' operands
  /// (the layout of a 16-bit KV slot).
  using converted_view = smem<T, tile<block<BN, D>, swizzle<128>>>;
  using converted_v_view = smem<pv_type, tile<block<BN, D>, swizzle<128>>>;
  static constexpr std::uint32_t kv_block_bytes = BN * D * sizeof(KV);
  /// SMEM the kernel allocates itself: Q's rows, and with fp8 K and V each compute
  /// warpgroup's converted blocks.
  static constexpr std::uint32_t merge_stats_bytes = compute_wgs > 1 ? 2 * BM * sizeof(float) : 0;
  // Warpgroup 1's O for the merge: in its converted blocks with fp8 K and V, else its own.
  static constexpr std::uint32_t merge_o_bytes = merge_buffer_own ? BM * D * sizeof(float) : 0;
  // (With q_slot Q's rows are the pipeline's; BM floats remain for the combine's LSE rows.)
  static constexpr std::uint32_t q_bytes = q_slot ? BM * sizeof(float) : q_view::bytes;
  static constexpr std::uint32_t own_smem =
      q_bytes + (fp8_kv ? 2 * compute_wgs * converted_view::bytes : 0) + merge_stats_bytes + merge_o_bytes;
  // Decode is bound by the bandwidth of K and V: as many K and V slots as SMEM holds beside
  // Q (each fetch in flight is latency hidden).
  static constexpr int stages_beside(int q_slots, std::uint32_t reserve) {
    return static_cast<int>((smem_capacity - own_smem - q_slots * q_view::bytes - reserve) / (2 * kv_block_bytes));
  }
  // q_slot: two slots for Q's rows (the next item's land during this one) where they cost
  // no K and V slot, else one (the next item's rows then wait for this one's last Q K^T).
  // (3 KB for the barriers and alignment: at head dim 128, two Q slots and three K and V
  // slots leave 256 bytes too few.)
  static constexpr int q_slots = !q_slot ? 0 : stages_beside(2, 3072) == stages_beside(1, 3072) ? 2 : 1;
  static constexpr int stages = stages_beside(q_slots, q_slot ? 3072 : 2048);
  static_assert(stages >= 2, "tilepipe: the decode kernel's K and V blocks leave fewer than two slots each");
  /// A split's partial result in the workspace: its O rows (f32, normalised), then their
  /// LSE (log2 units, the scale folded in).
  static constexpr long long partial_floats = BM * (D + 1);

  decode_items items;
  int seqlen_q = 0, seqlen_k = 0;     // fixed-length batches
  const int* cu_seqlens_q = nullptr;  // varlen: sequence b is rows
  const int* cu_seqlens_k = nullptr;  //   [cu[b], cu[b + 1]) of the packed tensors
  int max_seqlen_q = 0;               // varlen: the longest query sequence allowed
  fast_divmod group;                  // query heads per KV head
  float scale_log2 = 0.0f;            // scale * log2(e)
  int window_left = -1, window_right = -1;
  float* lse = nullptr;
  long long lse_head_stride = 0, lse_batch_stride = 0;  // varlen: the batch's rows start at cu_seqlens_q[b]
  partials_ref partials{};  // with splits > 1: a slot per item, a counter per tile
  // A KV cache with per-sequence lengths (fixed-length queries): sequence b uses the first
  // seqused_k[b] keys. Paged, K and V are [num_pages, page_size, Hkv, D] and key j of
  // sequence b is row j % page_size of page page_table[b * table_stride + j / page_size].
  const int* seqused_k = nullptr;
  const int* page_table = nullptr;
  int table_stride = 0;  // pages per sequence in the table (its row length)
  int page_shift = 0;    // log2(page_size)
  int key_capacity = 0;  // with seqused_k: the most keys a sequence can have (the table's, or Sk)
  // fp8 K and V: dequantised K = k * k_scale and V = v * v_scale, one factor each for the
  // whole cache or one per KV head (scale_per_head); null is 1.
  const float* k_scale = nullptr;
  const float* v_scale = nullptr;
  bool scale_per_head = false;
  bool q_rows_by_tma = false;  // q_slot: the slot's block is the tile's rows (else gathered into it)

  /// n limited to [0, cap].
  TP_HD static int clamp_rows(int n, int cap) { return n < 0 ? 0 : n < cap ? n : cap; }

  /// Where sequence b lives: its batch index in q and o (0 for packed varlen rows), first
  /// row and length there, and its batch index in k and v (its page-table row), first row
  /// and length there.
  struct sequence {
    int batch, q0, sq, kv_batch, k0, sk;
  };
  /// The prefill kernel's policy for varlen offsets (attention_kernel::sequence_of): bad
  /// offsets fail in the interpreter and TILEPIPE_DEBUG GPU builds and are clipped to the
  /// tensors elsewhere. With seqused_k, the same policy for the lengths: one beyond the keys
  /// there are (the table's pages, or Sk) or negative fails where the checks run, else is
  /// clipped.
  TP_HD sequence sequence_of([[maybe_unused]] const kernel_context& ctx, int b, int total_q, int total_k) const {
    int q_batch = b, q0 = 0, sq = seqlen_q;
    if (cu_seqlens_q) {
      const int q_begin = cu_seqlens_q[b], q_end = cu_seqlens_q[b + 1];
      if constexpr (debug_checks) {
        if (q_begin < 0 || q_end < q_begin || q_end > total_q)
          prim::fail(ctx.failure(), "attention: sequence %d is rows [%d, %d) of q, which has %d (cu_seqlens_q must not "
                     "decrease and must stay within q)", b, q_begin, q_end, total_q);
        if (q_end - q_begin > max_seqlen_q)
          prim::fail(ctx.failure(), "attention: sequence %d has %d query rows, more than max_seqlen_q = %d", b,
                     q_end - q_begin, max_seqlen_q);
      }
      q0 = clamp_rows(q_begin, total_q);
      q_batch = 0, sq = clamp_rows(clamp_rows(q_end - q0, total_q - q0), max_seqlen_q);
    }
    if (seqused_k) {
      // (The bound is not k's rows: with Sk = 0 the call hands the kernel one row of q as k.)
      const int keys = seqused_k[b], capacity = key_capacity;
      if constexpr (debug_checks) {
        if (keys < 0 || keys > capacity) {
          if (paged)
            prim::fail(ctx.failure(), "attention: seqused_k[%d] = %d keys, outside [0, %d]: the page table has %d pages "
                       "of %d keys per sequence", b, keys, capacity, table_stride, 1 << page_shift);
          else
            prim::fail(ctx.failure(), "attention: seqused_k[%d] = %d keys, outside [0, %d] (the rows of k)", b, keys,
                       capacity);
        }
      }
      return {q_batch, q0, sq, b, 0, clamp_rows(keys, capacity)};
    }
    if (!cu_seqlens_k) return {q_batch, q0, sq, b, 0, seqlen_k};
    const int k_begin = cu_seqlens_k[b], k_end = cu_seqlens_k[b + 1];
    if constexpr (debug_checks) {
      if (k_begin < 0 || k_end < k_begin || k_end > total_k)
        prim::fail(ctx.failure(), "attention: sequence %d is rows [%d, %d) of k and v, which have %d (cu_seqlens_k must "
                   "not decrease and must stay within k)", b, k_begin, k_end, total_k);
    }
    const int k0 = clamp_rows(k_begin, total_k);
    return {q_batch, q0, sq, 0, k0, clamp_rows(k_end - k0, total_k - k0)};
  }

  TP_HD void operator()(kernel_context& ctx, gmem<T, 4> q, q_rows_param q_rows_g, gmem<KV, 4, kv_tile> k,
                        gmem<KV, 4, kv_tile> v, gmem<T, 4> o) const {
    const int num_pages = static_cast<int>(k.shape[0]);  // paged: the cache's pages
    // The compute warpgroup's state: O, P packed as the A operand of P V, the running row
    // maxima and this thread's share of the row sums (finished once, in the epilogue).
    accumulator<BM, D> acc_o;
    operand_fragment<pv_type, BM, BN> p;
    row_vector<BM> m, l;
    // V is read one step after it lands: the block of the previous step and its release.
    pending_block<smem<KV, kv_tile>> v_prev{};
    consumed_token v_prev_done{};
    q_view q_s;  // the tile's packed query rows (gathered)
    T* q_rows = nullptr;  // its SMEM, or with q_slot BM floats for the combine
    // fp8: this step's K block and the previous step's V block, converted (each block
    // once, by the compute warpgroup that takes it: the slot is released as soon as it is
    // converted); each compute warpgroup has its own two.
    converted_view k_t;
    converted_v_view v_t;
    // Two compute warpgroups: warpgroup 1's O (f32, in its converted blocks once its wgmmas
    // are done) and its row maxima and sums, which warpgroup 0 merges into its own.
    [[maybe_unused]] float* merge_o = nullptr;
    [[maybe_unused]] float* merge_stats = nullptr;
    // The tile's softmax scale in log2 units, k_scale folded in (S = Q (k k_scale)^T), and
    // the factor of the output's normalisation, v_scale (O = P (v v_scale) / l).
    float score_scale = scale_log2, value_scale = 1.0f;
    const int splits = items.splits(), heads_per_kv = group.divisor();
    // Two compute warpgroups: warpgroup ci takes the steps s with s % 2 == ci (its KV blocks).
    const int ci = [&] {
      if constexpr (compute_wgs > 1) return ws.compute_index(ctx);
      else return 0;
    }();

    auto tile_pipeline = [&](decode_item it) {
      const sequence seq = sequence_of(ctx, it.batch, static_cast<int>(q.shape[1]), static_cast<int>(k.shape[1]));
      const int row0 = it.m_block * BM;  // the tile's first packed row
      const int tile_rows = clamp_rows(seq.sq * heads_per_kv - row0, BM);
      // Packed row r of the tile: query position r / G of head kv_head * G + r % G.
      auto position = [=, this](int r) { return group.div(row0 + r); };
      auto head = [=, this](int r) {
        return it.kv_head * heads_per_kv + row0 + r - group.div(row0 + r) * heads_per_kv;
      };
      // The compute warpgroup gathers the packed query rows into q_dst (zero past the tile's
      // rows), 64 columns at a time (a loop, not unrolled: the code stays small enough for
      // the persistent loop to inline). Its loads wait behind the K and V blocks already in
      // flight from the SM (6 us a round trip on an H200 at full rate: q_rows_by_tma avoids it).
      auto gather_q = [&, seq, tile_rows, position, head](auto q_dst) {
        const T* rows = q.data + seq.batch * q.stride[0] + seq.q0 * q.stride[1];
#pragma unroll 1
        for (int c0 = 0; c0 < D; c0 += 64)
          store(cols<64>(q_dst, c0), load_rows<T, BM, 64>(tile_rows, [&](int r) {
                  return rows + position(r) * q.stride[1] + head(r) * q.stride[2] + c0;
                }));
        commit_smem();  // visible to the wgmmas
      };
      // The KV blocks any of the tile's rows sees (prefill's bounds, over query positions),
      // and this item's share of them: blocks [first, top).
      const int shift = seq.sk - seq.sq, pos_first = position(0);
      const int pos_last = position(tile_rows > 0 ? tile_rows - 1 : 0);
      const int key_end = window_right >= 0 ? min(seq.sk, pos_last + shift + window_right + 1) : seq.sk;
      const int key_begin = window_left >= 0 ? max(0, pos_first + shift - window_left) : 0;
      const int n_lo = key_begin / BN, n_hi = key_end > 0 ? (key_end + BN - 1) / BN : 0;
      const long long visible = tile_rows > 0 && n_hi > n_lo ? n_hi - n_lo : 0;
      const int first = n_lo + static_cast<int>(visible * it.split / splits);
      const int top = n_lo + static_cast<int>(visible * (it.split + 1) / splits);
      const int blocks = top - first;
      // Blocks n >= mask_hi cross the sequence's end or the right window edge of one of the
      // tile's rows, blocks n < mask_lo its left window edge: those run with the mask.
      const int visible_end = window_right >= 0 ? min(seq.sk, pos_first + shift + window_right + 1) : seq.sk;
      const int mask_hi = max(visible_end, 0) / BN;
      const int left_edge = window_left >= 0 ? pos_last + shift - window_left : 0;
      const int mask_lo = left_edge > 0 ? (left_edge + BN - 1) / BN : 0;

      // Step s reads KV block top - 1 - s: S = Q K^T of it, and O += P V of the previous one.
      // (q_rows: the tile's query rows; release_q: called once this step's Q K^T is done.)
      auto body = [&, seq, top, shift, mask_hi, mask_lo, position](index<1> at, auto q_rows_s, auto k_s, auto v_s,
                                                                    consumed_token k_done, consumed_token v_done,
                                                                    auto release_q) {
        const int s = at[0];
        if constexpr (compute_wgs > 1) {
          if (s % compute_wgs != ci) {
            // The other compute warpgroup's block, released at once. Its landing is waited
            // for first: a warpgroup that skipped the waits could run a whole ring ahead and
            // count its release of a later block towards this one's. (16-bit K: the pipeline
            // waited for it.) Q's slot counts both warpgroups' releases.
            if constexpr (fp8_kv) k_s.wait();
            v_s.wait();
            k_done.arrive(), v_done.arrive();
            release_q();
            return;
          }
        }
        const int n = top - 1 - s, key0 = n * BN;
        const bool masked = n >= mask_hi || n < mask_lo;
        auto step = [&](auto first_step, auto with_mask) {
          accumulator<BM, BN> acc_s;
          if constexpr (fp8_kv) {
            // The previous step's wgmmas are done: K's converted block is free.
            dequantize(k_s.wait(), k_t);
            commit_smem();
            k_done.arrive();  // K's slot refills from here on
            wgmma(acc_s, q_rows_s, transpose(k_t), false);
            if constexpr (!first_step) wgmma(acc_o, p, v_t);
          } else {
            wgmma(acc_s, q_rows_s, transpose(k_s), false);
            if constexpr (!first_step) wgmma(acc_o, p, v_prev.wait());
          }
          wgmma_wait<first_step ? 0 : 1>(acc_s);  // S is ready; P V still runs
          if constexpr (!fp8_kv) k_done.arrive();  // K's slot refills under the softmax
          release_q();  // (Q's slot after the item's last Q K^T)
          profile_scope softmax_scope(ctx, "softmax");
          if constexpr (with_mask) {
            mask_columns(acc_s, [&](int r) {  // row r sees keys [pos - left, pos + right] of the sequence
              const int row = position(r) + shift - key0;
              const int hi = min(seq.sk - key0, BN);
              return column_range{window_left >= 0 ? row - window_left : 0,
                                  window_right >= 0 ? min(hi, row + window_right + 1) : hi};
            }, -INFINITY);
          }
          // Online softmax in log2 units, the scale folded into one FMA per element; only a
          // masked block can leave a row without keys (m = -inf, which exp2 must not see).
          const float sl2 = fp8_kv ? score_scale : scale_log2;
          const row_vector<BM> m_new = max(m, row_max(acc_s) * sl2);
          row_vector<BM> m_use = m_new;
          if constexpr (with_mask) m_use = map(m_new, [](float x) { return x == -INFINITY ? 0.0f : x; });
          const row_vector<BM> alpha = exp2(m - m_use);
          auto probs = broadcast_rows(acc_s, m_use, [sl2](float x, float mu) { return prim::exp2(x * sl2 - mu); });
          l = l * alpha + partial_row_sum(probs);
          m = m_new;
          if constexpr (!first_step) {
            pin(probs, l, m);  // the softmax runs under P V: before the wait, not after
            wgmma_wait<0>(acc_o, p);
            if constexpr (!fp8_kv) v_prev_done.arrive();
            acc_o = acc_o * alpha;
          }
          p = to_operand<pv_type>(probs);
          if constexpr (fp8_kv) {
            // The P V that read V's converted block is done: this step's V takes its place,
            // its rows past the sequence's keys zeros (a cache may hold anything there, NaN
            // codes too, and P = 0 times NaN is NaN), and V's slot refills.
            dequantize(v_s.wait(), v_t, clamp_rows(seq.sk - key0, BN));
            commit_smem();
            v_done.arrive();
          } else if constexpr (with_mask) {
            // Rows of a cache past a sequence's used keys (the rest of its last page) were
            // never written: V may hold NaN there, and P = 0 times NaN is NaN. They are
            // zeroed in the slot before P V reads it (K's are masked in S).
            if ((paged || seqused_k) && key0 + BN > seq.sk) {
              zero_rows(v_s.wait(), max(seq.sk - key0, 0));
              commit_smem();
            }
          }
          if constexpr (!fp8_kv) v_prev = v_s, v_prev_done = v_done;
        };
        // The first step (no P V yet, and the mask), and the others with and without it.
        if (s == ci) step(std::true_type{}, std::true_type{});  // this warpgroup's first block
        else if (masked) step(std::false_type{}, std::true_type{});
        else step(std::false_type{}, std::false_type{});
      };

      auto context = compute_context([&, seq, it, row0, tile_rows, blocks, position, head](auto pipeline) {
        // Row r of the tile in q and o: sequence position position(r), head head(r).
        auto row_in = [&](const gmem<T, 4>& x, int r) {
          return x.data + seq.batch * x.stride[0] + (seq.q0 + position(r)) * x.stride[1] + head(r) * x.stride[2];
        };
        if constexpr (fp8_kv) {
          const int at = scale_per_head ? it.kv_head : 0;
          const float ks = k_scale ? k_scale[at] : 1.0f, vs = v_scale ? v_scale[at] : 1.0f;
          if constexpr (debug_checks) {
            // The online softmax takes the row maximum of S times the scale: a factor <= 0
            // would turn it into a minimum.
            if (!(ks > 0.0f && ks < INFINITY))
              prim::fail(ctx.failure(), "attention: k_scale[%d] is not a positive finite number (fp8 K scales "
                         "dequantise: K = k * k_scale)", at);
            if (!(vs > -INFINITY && vs < INFINITY))
              prim::fail(ctx.failure(), "attention: v_scale[%d] is not a finite number", at);
          }
          score_scale = scale_log2 * ks, value_scale = vs;
        }
        if (!q_slot && (compute_wgs == 1 || ci == 0)) gather_q(q_s);  // two compute warpgroups: the first
        // Both read Q; and warpgroup 1 writes no merge buffer (fp8: converts no block into
        // it) before warpgroup 0 has read the last tile's merge.
        if constexpr (compute_wgs > 1) ctx.team_sync();
        acc_o = zeros<float, BM, D>();
        m = full<row_vector<BM>>(-INFINITY);
        l = full<row_vector<BM>>(0.0f);
        pipeline();
        if (blocks > ci) {  // the last block's P V (of this warpgroup's blocks)
          if constexpr (fp8_kv) {
            wgmma(acc_o, p, v_t);
            wgmma_wait<0>(acc_o, p);
          } else {
            wgmma(acc_o, p, v_prev.wait());
            wgmma_wait<0>(acc_o, p);
            v_prev_done.arrive();
          }
        }
        if (tile_rows == 0) return;  // every split of such a tile skips the combine alike
        l = finish_row_sum(l);
        if constexpr (compute_wgs > 1) {
          // Warpgroup 1 hands its O and row statistics over and leaves the tile to warpgroup 0,
          // which rescales both to the larger row maximum (a row may have no keys in either).
          if (ci == 1) {
            store_rows(acc_o, BM, [&](int r) { return merge_o + r * D; });
            m.for_each([&](float x, int r) { merge_stats[r] = x; });
            l.for_each([&](float x, int r) { merge_stats[BM + r] = x; });
          }
          ctx.team_sync();
          if (ci == 1) return;
          row_vector<BM> m1, l1;
          m1.for_each([&](float& e, int r) { e = merge_stats[r]; });
          l1.for_each([&](float& e, int r) { e = merge_stats[BM + r]; });
          const row_vector<BM> m_new = max(m, m1);
          const row_vector<BM> m_use = map(m_new, [](float x) { return x == -INFINITY ? 0.0f : x; });
          const row_vector<BM> alpha = exp2(m - m_use), alpha1 = exp2(m1 - m_use);
          acc_o = acc_o * alpha + load_rows<float, BM, D>(BM, [&](int r) { return merge_o + r * D; }) * alpha1;
          l = l * alpha + l1 * alpha1;
          m = m_new;
        }
        const float vs = value_scale;
        acc_o = acc_o * map(l, [vs](float x) { return x > 0.0f ? vs / x : 0.0f; });
        const row_vector<BM> lse2 = zip(m, l, [](float mx, float sum) { return sum > 0.0f ? mx + log2f(sum) : -INFINITY; });
        if (splits > 1) {
          // Leave this split's rows in its slot; the tile's last split combines them all.
          const int tile = items.tile(it);
          auto slot = [&](int i) { return partials.slot(tile * splits + i); };
          store_rows(acc_o, tile_rows, [&](int r) { return slot(it.split) + r * D; });
          lse2.for_each([&](float x, int r) {
            if (r < tile_rows) slot(it.split)[BM * D + r] = x;
          });
          if (!arrive_last(partials, tile, splits)) return;
          profile_scope combine_scope(ctx, "combine");
          // By rows and pieces of 4 columns over the warpgroup's threads (the tile has few
          // rows), the splits in batches of 8 whose loads are all issued before the first is
          // used: a batch's indices are clamped to the last split (its extra entries weigh
          // nothing), so no load waits behind a bounds check and a pass over 16 splits costs
          // two round trips to L2, not 16 (a loop over the split count with a load and its use
          // per iteration compiles to exactly that, unrolled or not). The splits in order: the
          // sums do not depend on which split came last.
          constexpr int batch = 8;
          auto split_lse = [&](int i, int r) { return slot(i)[BM * D + r]; };
          auto in_batch = [splits](int i) { return i < splits ? i : splits - 1; };  // past the last: the last
          const int first = prim::thread_in_warpgroup(), threads = prim::warpgroup_threads();
          // The tile's LSE rows (log2 units), in SMEM where Q's rows were: a batch's largest
          // value joins the running maximum, the sum rescaled when it grows.
          float* const tile_lse = reinterpret_cast<float*>(q_rows);
          for (int r = first; r < tile_rows; r += threads) {
            float top = -INFINITY, sum = 0.0f;
            for (int i0 = 0; i0 < splits; i0 += batch) {
              float x[batch];
#pragma unroll
              for (int j = 0; j < batch; ++j) x[j] = split_lse(in_batch(i0 + j), r);
              float t = top;
#pragma unroll
              for (int j = 0; j < batch; ++j)
                if (i0 + j < splits) t = fmaxf(t, x[j]);
              if (t == -INFINITY) continue;  // no split so far has keys in this row
              sum *= prim::exp2(top - t);    // 0 while top is -inf
#pragma unroll
              for (int j = 0; j < batch; ++j)
                if (i0 + j < splits) sum += prim::exp2(x[j] - t);
              top = t;
            }
            tile_lse[r] = top == -INFINITY ? -INFINITY : top + log2f(sum);
          }
          prim::warpgroup_sync();
          constexpr int pieces = D / 4;  // of a row
          for (int e = first; e < tile_rows * pieces; e += threads) {
            const int r = e / pieces, c = (e - r * pieces) * 4;
            // A row without keys weighs every split exp2(-inf) = 0.
            const float norm = tile_lse[r] == -INFINITY ? 0.0f : tile_lse[r];
            float sum[4] = {0.0f, 0.0f, 0.0f, 0.0f};
            for (int i0 = 0; i0 < splits; i0 += batch) {
              float lse_j[batch];
              detail::partial_quad<float> o_j[batch];  // 16 bytes: a slot and a piece of a row are aligned
#pragma unroll
              for (int j = 0; j < batch; ++j) {
                const int i = in_batch(i0 + j);
                lse_j[j] = split_lse(i, r);
                o_j[j] = *reinterpret_cast<const detail::partial_quad<float>*>(slot(i) + r * D + c);
              }
#pragma unroll
              for (int j = 0; j < batch; ++j) {
                const float w = i0 + j < splits ? prim::exp2(lse_j[j] - norm) : 0.0f;
                for (int q = 0; q < 4; ++q) sum[q] = fmaf(o_j[j].v[q], w, sum[q]);
              }
            }
            T* out = row_in(o, r) + c;
            for (int j = 0; j < 4; ++j) out[j] = from_float<T>(sum[j]);
          }
          if (lse) {
            const long long first_row = cu_seqlens_q ? seq.q0 : it.batch * lse_batch_stride;
            for (int r = first; r < tile_rows; r += threads)
              lse[first_row + head(r) * lse_head_stride + position(r)] = tile_lse[r] * 0.69314718f;
          }
          prim::warpgroup_sync();  // tile_lse read: the next tile's Q may land there
          return;
        }
        store_rows(acc_o, tile_rows, [&](int r) { return row_in(o, r); });
        if (lse) {
          const long long first_row = cu_seqlens_q ? seq.q0 : it.batch * lse_batch_stride;
          lse2.for_each([&](float x, int r) {
            if (r < tile_rows) lse[first_row + head(r) * lse_head_stride + position(r)] = x * 0.69314718f;
          });
        }
      });
      // K and V stream from the split's last block down (affine maps: a new block every step).
      const int kv_head = it.kv_head, batch = seq.kv_batch, k_top = seq.k0 + (top - 1) * BN;
      auto kv_map = [=](auto s) { return idx(batch, k_top - s * BN, kv_head, 0); };
      // q_rows_by_tma: packed row r is row q0 Hq + kv_head G + r of q seen as [B, Sq Hq, D] (one
      // position, or G = Hq); else the slot's block is any rows of q, gathered over.
      const int q_row = q_rows_by_tma ? seq.q0 * heads_per_kv * static_cast<int>(k.shape[2]) + kv_head * heads_per_kv + row0 : 0;
      const int q_batch = seq.batch;
      auto q_map = [=](auto) { return idx(q_batch, q_row, 0); };
      // (The pipeline keeps copies of its body: body by value, not a reference to this call's.)
      auto gathered_q = [body, &q_s](index<1> at, auto k_s, auto v_s, consumed_token k_done, consumed_token v_done) {
        body(at, q_s, k_s, v_s, k_done, v_done, [] {});
      };
      const bool gather_into_slot = !q_rows_by_tma;
      auto q_in_slot = [body, gather_q, gather_into_slot, ci, &ctx](index<1> at, auto q_b, auto k_s, auto v_s,
                                                                     consumed_token q_done, consumed_token k_done,
                                                                     consumed_token v_done) {
        if (gather_into_slot && at[0] == 0) {  // the block has landed: overwrite it
          if (ci == 0) gather_q(q_b);
          if constexpr (compute_wgs > 1) ctx.team_sync();  // warpgroup 1 reads the rows from step 1 on
        }
        body(at, q_b, k_s, v_s, k_done, v_done, [&] { q_done.arrive(); });
      };
      // The specs of K and V (and before them Q's rows, q_slot), then the pipeline.
      auto run = [&](auto k_spec, auto v_spec) {
        if constexpr (q_slot)
          return emit_pipeline_warp_specialized(q_in_slot, grid(blocks),
                                                in_specs(spec<q_rows_tile>(q_map, buffered<q_slots>), k_spec, v_spec),
                                                out_specs(), ws, max_concurrent_steps<stages>, manual_consumed_barriers,
                                                context);
        else
          return emit_pipeline_warp_specialized(gathered_q, grid(blocks), in_specs(k_spec, v_spec), out_specs(), ws,
                                                max_concurrent_steps<stages>, manual_consumed_barriers, context);
      };
      if constexpr (paged) {
        // The block of keys [key0, key0 + BN) that kv_map names is gathered from its pages:
        // the box of rows [key0 + r, key0 + r + PageBoxRows) is on page table[(key0 + r) /
        // page_size]. A box wholly past the sequence's end (the last block's) reads the
        // block's first box again: its keys are masked, and the table past the sequence's
        // pages may hold anything. Table entries outside the cache fail where the checks
        // run, else are clipped to it: a wrong page, never a read outside k and v.
        const int* table_row = page_table + static_cast<long long>(batch) * table_stride;
        const int used = seq.sk, shift = page_shift;
        [[maybe_unused]] const failure_channel failure = ctx.failure();
        auto box_source = [=](index<4> blk, int r) {
          const int key = blk[1] + r < used ? blk[1] + r : blk[1], slot = key >> shift;
          const int page = table_row[slot];
          if constexpr (debug_checks)
            if (page < 0 || page >= num_pages)
              prim::fail(failure, "attention: page_table[%d][%d] = %d, outside the %d pages of k and v", batch, slot,
                         page, num_pages);
          return idx(page < 0 ? 0 : page < num_pages ? page : num_pages - 1, key & ((1 << shift) - 1), kv_head, 0);
        };
        return run(gathered_spec<kv_tile>(kv_map, box_source, option<manual_ready_tag, fp8_kv>{}),
                   gathered_spec<kv_tile>(kv_map, box_source, manual_ready));
      } else {
        if constexpr (fp8_kv)  // each block waited for by the warpgroup that takes it
          return run(spec<kv_tile>(kv_map, manual_ready), spec<kv_tile>(kv_map, manual_ready));
        else
          return run(spec<kv_tile>(kv_map), spec<kv_tile>(kv_map, manual_ready));
      }
    };
    auto loop = [&] {
      if constexpr (q_slot) return persistent_pipelines<decode_item, own_smem>(ws, ctx, tile_pipeline, q_rows_g, k, v);
      else return persistent_pipelines<decode_item, own_smem>(ws, ctx, tile_pipeline, k, v);
    }();
    q_rows = reinterpret_cast<T*>(ctx.allocate(q_bytes, q_slot ? "decode combine rows" : "decode query rows"));
    q_s = q_view{q_rows, 0};
    if constexpr (fp8_kv) {
      // Warpgroup w's K and V blocks side by side: warpgroup 1's two hold its O for the merge.
      T* const converted = reinterpret_cast<T*>(
          ctx.allocate(2 * compute_wgs * converted_view::bytes, "decode K and V converted from fp8"));
      constexpr int elements = converted_view::bytes / sizeof(T);
      k_t = converted_view{converted + 2 * ci * elements, 0};
      v_t = converted_v_view{reinterpret_cast<pv_type*>(converted + (2 * ci + 1) * elements), 0};
      static_assert(compute_wgs == 1 || 2 * converted_view::bytes >= BM * D * sizeof(float),
                    "tilepipe: warpgroup 1's converted blocks hold its O");
      if constexpr (compute_wgs > 1) {
        merge_o = reinterpret_cast<float*>(converted + 2 * elements);
        merge_stats = reinterpret_cast<float*>(ctx.allocate(merge_stats_bytes, "decode merge statistics"));
      }
    } else if constexpr (compute_wgs > 1) {
      merge_o = reinterpret_cast<float*>(ctx.allocate(merge_o_bytes, "decode merge O"));
      merge_stats = reinterpret_cast<float*>(ctx.allocate(merge_stats_bytes, "decode merge statistics"));
    }
    loop.run(ctx.axis_index(0), items.items(), ctx.axis_size(0), [&](int j) { return items.at(j); });
  }
};

/// The split-KV workspace of tp::attention_forward's decode path (attention_options::partials):
/// a tp::partials_buffer of attention_partial_slots(dev) slots of attention_partial_floats(d)
/// floats covers every split count the kernel chooses itself; an explicit num_splits needs
/// batches x KV heads x row tiles x num_splits slots (the row tiles: ceil(Sq Hq / Hkv / 64)).
inline int attention_partial_slots(const device& dev) { return 4 * (dev.is_gpu() ? dev.multiprocessors() : 4); }
inline long long attention_partial_floats(long long head_dim) { return 64 * (head_dim + 1); }

/// What attention_forward hands the decode path besides the tensors (its options, resolved).
struct attention_decode_options {
  float scale;
  int window_left, window_right;  // causal: window_right = 0
  float* lse;
  int num_splits;
  partials_ref partials;
  void* stream;
  profiler* profile;
  const int* seqused_k;   // keys per sequence (fixed-length queries), or null
  const int* page_table;  // paged cache: [B, max_pages_per_seq], or null
  int max_pages_per_seq;
  const float* k_scale;  // fp8 K and V: their scales (null: 1), one, or one per KV head
  const float* v_scale;
  bool scale_per_head;
};

namespace attention_decode_detail {

/// The split count when the caller leaves it to the kernel (FlashAttention's rule, tighter).
/// None when there are as many tiles as SMs; else the fewest splits whose waves of items fill
/// the CTAs at least 95% as well as the best count does (the last wave of equal items is what
/// idles SMs), at most one per KV block, 64, and what the workspace holds. (Decode is bound by
/// the bytes each SM has in flight: an idle SM's share of the bandwidth is lost, where the
/// combine of a few more splits costs little. FlashAttention's 80% and 85% left 12 of 132 SMs
/// idle at batch 1.)
inline int choose_splits(int tiles, int kv_blocks, int sms, int most) {
  if (tiles >= sms) return 1;
  most = std::min({most, kv_blocks, 64});
  auto efficiency = [&](int s) {
    const double waves = static_cast<double>(tiles) * s / sms;
    return waves / std::ceil(waves);
  };
  double best = 0.0;
  for (int s = 1; s <= most; ++s) best = std::max(best, efficiency(s));
  for (int s = 1; s <= most; ++s)
    if (efficiency(s) >= 0.95 * best) return s;
  return 1;
}

/// q as [B, Sq Hq, D] for attention_decode_kernel's Q slot where a tile's packed rows are
/// consecutive rows of it (one query position a sequence, or one KV head); else none.
template <class T>
std::optional<tensor_view<T, 3>> q_rows_view(const tensor_view<T, 4>& q, int max_sq, int hkv) {
  const long long hq = q.shape[2];
  const bool consecutive = max_sq == 1 || hkv == 1;
  const bool sh_merge = q.shape[1] == 1 || q.stride[1] == hq * q.stride[2];  // S and H as one dimension
  if (!consecutive || !sh_merge || q.stride[3] != 1) return std::nullopt;
  return tensor_view<T, 3>{q.data, {q.shape[0], q.shape[1] * hq, q.shape[3]}, {q.stride[0], q.stride[2], 1}, q.on_gpu};
}

template <class T, int D, int PageBoxRows = 0, class KV>
void launch(const device& dev, const tensor_view<T, 4>& q, const tensor_view<KV, 4>& k, const tensor_view<KV, 4>& v,
            const tensor_view<T, 4>& o, int batches, int max_sq, int sq, int sk, const int* cu_q, const int* cu_k,
            const attention_decode_options& opt) {
  using kernel_t = attention_decode_kernel<T, D, attention_decode_block<D>, PageBoxRows, KV>;
  const int hq = static_cast<int>(q.shape[2]), hkv = static_cast<int>(k.shape[2]), group = hq / hkv;
  const int m_blocks = (max_sq * group + kernel_t::BM - 1) / kernel_t::BM;
  const int tiles = batches * hkv * m_blocks;
  const int sms = dev.is_gpu() ? dev.multiprocessors() : 4;
  const bool has_workspace = !opt.partials.empty() && opt.partials.slot_floats >= kernel_t::partial_floats;
  int splits = opt.num_splits;
  if (splits == 0) {
    // Keys per sequence: exact for fixed lengths, the mean for varlen (the offsets are on the
    // device), the most there can be with seqused_k (the table's, or k's rows; FlashAttention-3
    // sizes its splits for a paged cache the same way).
    const long long keys = opt.page_table ? static_cast<long long>(opt.max_pages_per_seq) * k.shape[1]
                           : cu_k         ? (k.shape[1] + batches - 1) / batches
                                          : sk;
    const int kv_blocks = static_cast<int>((keys + kernel_t::block_n - 1) / kernel_t::block_n);
    splits = has_workspace ? choose_splits(tiles, kv_blocks, sms, opt.partials.slots / tiles) : 1;
  } else if (splits > 1 && (!has_workspace || opt.partials.slots / tiles < splits)) {
    detail::throw_formatted("attention: num_splits = %d needs attention_options::partials, a workspace of at least %lld "
                            "slots of %lld floats (tp::partials_buffer); it has %d of %lld",
                            splits, static_cast<long long>(tiles) * splits, kernel_t::partial_floats, opt.partials.slots,
                            opt.partials.slot_floats);
  }
  kernel_t kern;
  kern.items = decode_items(batches, hkv, m_blocks, splits);
  kern.seqlen_q = sq, kern.seqlen_k = sk, kern.cu_seqlens_q = cu_q, kern.cu_seqlens_k = cu_k;
  kern.max_seqlen_q = max_sq;
  kern.group = fast_divmod(group);
  kern.scale_log2 = opt.scale * 1.4426950408889634f;
  kern.window_left = opt.window_left, kern.window_right = opt.window_right;
  kern.lse = opt.lse;
  kern.lse_head_stride = cu_q ? q.shape[1] : sq;
  kern.lse_batch_stride = static_cast<long long>(hq) * sq;
  kern.partials = splits > 1 ? opt.partials : partials_ref{};
  kern.seqused_k = opt.seqused_k, kern.page_table = opt.page_table, kern.table_stride = opt.max_pages_per_seq;
  int shift = 0;
  while ((2LL << shift) <= k.shape[1]) ++shift;
  kern.page_shift = opt.page_table ? shift : 0;
  kern.key_capacity = opt.page_table ? opt.max_pages_per_seq << kern.page_shift : sk;
  kern.k_scale = opt.k_scale, kern.v_scale = opt.v_scale, kern.scale_per_head = opt.scale_per_head;
  const int items = kern.items.items();
  const launch_config config{.grid = {items < sms ? items : sms}, .stream = opt.stream, .profile = opt.profile};
  if constexpr (kernel_t::q_slot) {
    // The slot's block: the tile's rows where they are consecutive, else the rows of q's first
    // position ([B, Hq, D]), any block the compute warpgroup then gathers over.
    const auto rows = q_rows_view(q, max_sq, hkv);
    kern.q_rows_by_tma = rows.has_value();
    const tensor_view<T, 3> first{q.data, {q.shape[0], q.shape[2], q.shape[3]}, {q.stride[0], q.stride[2], 1}, q.on_gpu};
    kernel(kern, config)(dev, q, rows ? *rows : first, k, v, o);
  } else {
    kernel(kern, config)(dev, q, q, k, v, o);
  }
}

/// A paged cache's KV blocks move in one box where a page holds a block, else in boxes of
/// attention_page_box_rows (the shapes were checked: page sizes are powers of two >= 16).
template <class T, int D, class KV>
void launch_paged(const device& dev, const tensor_view<T, 4>& q, const tensor_view<KV, 4>& k, const tensor_view<KV, 4>& v,
                  const tensor_view<T, 4>& o, int batches, int max_sq, int sq, const int* cu_q,
                  const attention_decode_options& opt) {
  constexpr int BN = attention_decode_block<D>;
  if (k.shape[1] >= BN) launch<T, D, BN>(dev, q, k, v, o, batches, max_sq, sq, 0, cu_q, nullptr, opt);
  else launch<T, D, attention_page_box_rows>(dev, q, k, v, o, batches, max_sq, sq, 0, cu_q, nullptr, opt);
}

}  // namespace attention_decode_detail

/// The decode path of tp::attention_forward / attention_forward_varlen (which check the
/// shapes first): q and o [B, Sq, Hq, D] (varlen: [1, total_q, Hq, D] with the offsets),
/// max_sq <= attention_decode_max_seqlen_q, or any Sq over a KV cache (opt.seqused_k; k and v
/// [B, Sk, Hkv, D], or with opt.page_table the pages [num_pages, page_size, Hkv, D]). K and
/// V are T or fp8_e4m3 (with opt.k_scale and opt.v_scale).
template <class T, class KV>
void attention_decode(const device& dev, const tensor_view<T, 4>& q, const tensor_view<KV, 4>& k,
                      const tensor_view<KV, 4>& v, const tensor_view<T, 4>& o, int batches, int max_sq, int sq, int sk,
                      const int* cu_q, const int* cu_k, const attention_decode_options& opt) {
  using namespace attention_decode_detail;
  const long long d = q.shape[3];
  if (opt.page_table) {
    if (d == 64) launch_paged<T, 64>(dev, q, k, v, o, batches, max_sq, sq, cu_q, opt);
    else if (d == 128) launch_paged<T, 128>(dev, q, k, v, o, batches, max_sq, sq, cu_q, opt);
    else launch_paged<T, 256>(dev, q, k, v, o, batches, max_sq, sq, cu_q, opt);
    return;
  }
  if (d == 64) launch<T, 64>(dev, q, k, v, o, batches, max_sq, sq, sk, cu_q, cu_k, opt);
  else if (d == 128) launch<T, 128>(dev, q, k, v, o, batches, max_sq, sq, sk, cu_q, cu_k, opt);
  else launch<T, 256>(dev, q, k, v, o, batches, max_sq, sq, sk, cu_q, cu_k, opt);
}

}  // namespace tilepipe
