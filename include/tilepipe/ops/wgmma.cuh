// Warpgroup matrix multiply-accumulate: acc (M x N, f32) += A (M x K) * B (K x N).
//
// A and B are SMEM views of 16-bit or fp8 tiles with a swizzled layout; a 16-bit A may also be
// a register tile packed as an operand (tp::to_operand). Each operand is read K-major or
// MN-major as it is stored:
//   A stored (M rows, K cols): K-major;   transposed view of a (K, M) tile: MN-major;
//   B stored (K rows, N cols): MN-major;  transposed view of an (N, K) tile: K-major.
// fp8 operands (e4m3 or e5m2, A's and B's types chosen independently) must both be K-major:
// the k32 instructions have no transposed forms. Their products are exact in f32, but the
// tensor core adds them into an accumulator of about 14 significant bits (DeepGEMM's
// finding), so long sums are promoted to f32 registers every 128 of K by the kernels that
// need full precision (kernels/scaled_matmul.cuh); the interpreter adds in f32.
// tp::wgmma issues the instructions and commits them as one group; they run
// asynchronously until tp::wgmma_wait<n>() (Pallas' wgmma / wgmma_wait).
#pragma once

#include "../backend/primitives.cuh"
#include "../core/refs.cuh"
#include "../core/wgmma_desc.cuh"
#include "fragment.cuh"

namespace tilepipe {

namespace detail {

/// Descriptor of the 64 (or N) x 16 operand block starting at logical (mn0, k0) of a view
/// whose MN dimension is stored as rows (K-major) or as columns (MN-major): the view's base
/// descriptor (one address conversion per wgmma call) plus the block's compile-time byte
/// offset in the 16-byte address field, which cannot carry out of it inside one tile.
/// A column slice of an operand starts at a column panel: descriptors step through a panel
/// in 16-byte units and to the next panel by LBO, so a start inside a panel would carry
/// across its edge.
template <bool MnIsStoredCols, class Ref>
TP_HD TP_FORCEINLINE std::uint64_t base_desc(const Ref& r) {
  using L = typename Ref::layout;
  std::uint32_t addr = prim::smem_address(r.base) + static_cast<std::uint32_t>(r.row0 * L::row_bytes);
  if constexpr (!Ref::full_width) {
    TP_REQUIRE(r.col0 % L::panel == 0,
               "wgmma operand: a column slice starting at column %d; slices of wgmma operands start at a multiple "
               "of the swizzle width (%d columns)",
               r.col0, L::panel);
    addr += static_cast<std::uint32_t>(r.col0 / L::panel * L::panel_bytes);
  }
  return make_wgmma_desc(addr, MnIsStoredCols ? L::panel_bytes : 16, 8 * L::row_bytes, L::swizzle);
}

template <bool MnIsStoredCols, class Ref>
TP_HD TP_FORCEINLINE constexpr std::uint64_t desc_offset(int mn0, int k0) {
  using L = typename Ref::layout;
  constexpr int e = static_cast<int>(sizeof(typename Ref::value_type));
  const int row = MnIsStoredCols ? k0 : mn0;  // stored coordinates of the block's start
  const int col = MnIsStoredCols ? mn0 : k0;
  return static_cast<std::uint64_t>(((col / L::panel) * L::panel_bytes + row * L::row_bytes + (col % L::panel) * e) >> 4);
}

template <class Ref>
TP_HD constexpr void check_operand() {
  using L = typename Ref::layout;
  static_assert(wgmma_operand_type<typename Ref::value_type> || wgmma_fp8_type<typename Ref::value_type>,
                "tilepipe: wgmma operands are bf16, f16, fp8_e4m3 or fp8_e5m2");
  static_assert(L::swizzle != 0,
                "tilepipe: wgmma reads swizzled SMEM tiles: give the operand's tile tp::swizzle<32|64|128>");
}

}  // namespace detail

/// acc (+)= a * b with A and B in shared memory; `accumulate = false` overwrites acc.
template <int M, int N, class A, class B>
TP_HD TP_FORCEINLINE void wgmma(accumulator<M, N>& acc, const A& a, const B& b, bool accumulate = true) {
  static_assert(is_smem_ref_v<A> && is_smem_ref_v<B>, "tilepipe: wgmma(acc, a, b) takes SMEM views (or a fragment as a)");
  detail::check_operand<A>();
  detail::check_operand<B>();
  using T = typename A::value_type;
  using TB = typename B::value_type;
  constexpr bool fp8 = wgmma_fp8_type<T>;
  static_assert(std::is_same_v<T, TB> || (fp8 && wgmma_fp8_type<TB>),
                "tilepipe: wgmma operands must have the same type (or be fp8 both)");
  static_assert(A::rows == M, "tilepipe: wgmma: A has M rows (the accumulator's rows)");
  static_assert(B::cols == N, "tilepipe: wgmma: B has N columns (the accumulator's columns)");
  static_assert(A::cols == B::rows, "tilepipe: wgmma: A's columns and B's rows (K) differ");
  constexpr int KI = 32 / static_cast<int>(sizeof(T));  // K of one instruction: 32 bytes of operand
  static_assert(A::cols % KI == 0, "tilepipe: wgmma: K must be a multiple of 16 (32 for fp8)");
  static_assert(N % 8 == 0 && N >= 8 && N <= 256, "tilepipe: wgmma: N must be a multiple of 8 in 8..256");
  constexpr int K = A::cols;
  constexpr bool a_mn_major = A::transposed;   // stored (K, M)
  constexpr bool b_mn_major = !B::transposed;  // stored (K, N)
  static_assert(!fp8 || (!a_mn_major && !b_mn_major),
                "tilepipe: fp8 wgmma reads both operands K-major: store A as (M, K) and B as (N, K), and pass "
                "tp::transpose(b)");

  const std::uint64_t a0 = detail::base_desc<a_mn_major>(a), b0 = detail::base_desc<b_mn_major>(b);
  prim::wgmma_fence();
#pragma unroll
  for (int ks = 0; ks < K / KI; ++ks) {
    const std::uint64_t db = b0 + detail::desc_offset<b_mn_major, B>(0, KI * ks);
#pragma unroll
    for (int mb = 0; mb < M / 64; ++mb) {
      const std::uint64_t da = a0 + detail::desc_offset<a_mn_major, A>(64 * mb, KI * ks);
      const int scale_d = (accumulate || ks > 0) ? 1 : 0;
      if constexpr (fp8) prim::wgmma_ss_fp8<N, T, TB>(acc.block(mb), N, da, db, scale_d);
      else prim::wgmma_ss<N, T, a_mn_major, b_mn_major>(acc.block(mb), N, da, db, scale_d);
    }
  }
  prim::wgmma_commit();
}

/// A register tile packed as wgmma's A operand in type T (bf16 or f16): softmax
/// probabilities converted from the f32 accumulator once (one cvt per pair of values),
/// then multiplied from registers with no SMEM round trip. The f32 accumulator's layout is
/// the A operand's, so the conversion moves nothing between threads.
template <class T, int M, int K>
struct operand_fragment {
  static_assert(wgmma_operand_type<T>,
                "tilepipe: a register A operand is bf16 or f16 (fp8 wgmma takes A from shared memory)");
  static_assert(M % 64 == 0 && K % 16 == 0, "tilepipe: an A operand has 64-row blocks and 16-column k-blocks");
  static constexpr int rows = M;
  static constexpr int cols = K;
  prim::rs_operand<T> ops[M / 64][K / 16];
};

/// Packs a fragment (f32 or 16-bit) as an A operand of type T.
template <class T, class U, int M, int K>
TP_HD TP_FORCEINLINE operand_fragment<T, M, K> to_operand(const fragment<U, M, K>& f) {
  operand_fragment<T, M, K> a;
#pragma unroll
  for (int mb = 0; mb < M / 64; ++mb)
#pragma unroll
    for (int ks = 0; ks < K / 16; ++ks) a.ops[mb][ks] = prim::rs_pack<K, T>(f.v, mb, ks);
  return a;
}

namespace detail {
template <class V>
TP_HD TP_FORCEINLINE void pin_one(V& x) {
  V::registers::pin(x.v);
}
template <class T, int M, int K>
TP_HD TP_FORCEINLINE void pin_one(operand_fragment<T, M, K>& a) {
#pragma unroll
  for (int mb = 0; mb < M / 64; ++mb)
#pragma unroll
    for (int ks = 0; ks < K / 16; ++ks) prim::rs_pin(a.ops[mb][ks]);
}
}  // namespace detail

/// Keeps the computation of these values (fragments, row vectors) before whatever wgmma
/// operation follows: register arithmetic moves freely across a wgmma_wait, so the softmax
/// meant to run under a wgmma may otherwise be scheduled after the wait for it.
template <class... V>
TP_HD TP_FORCEINLINE void pin(V&... values) {
  (detail::pin_one(values), ...);
}

/// acc (+)= a * b with A in registers, packed by to_operand. The tensor cores read a's
/// registers until the wgmma completes: keep it (a named variable, not a temporary) and
/// unchanged until the wgmma_wait that covers it.
template <int M, int N, class T, int K, class B>
TP_HD TP_FORCEINLINE void wgmma(accumulator<M, N>& acc, operand_fragment<T, M, K>& a, const B& b, bool accumulate = true) {
  static_assert(is_smem_ref_v<B>, "tilepipe: wgmma(acc, a_fragment, b): b is an SMEM view");
  detail::check_operand<B>();
  static_assert(std::is_same_v<T, typename B::value_type>, "tilepipe: wgmma operands must have the same type");
  static_assert(B::cols == N && B::rows == K, "tilepipe: wgmma: B must be K x N");
  static_assert(N % 8 == 0 && N <= 256, "tilepipe: wgmma: N must be a multiple of 8 up to 256");
  constexpr bool b_mn_major = !B::transposed;

  const std::uint64_t b0 = detail::base_desc<b_mn_major>(b);
  // Every operand register is final before the fence (see prim::rs_operand): a rescale of
  // the accumulator or a conversion of A may not sink past it.
  pin(a, acc);
  prim::wgmma_fence();
#pragma unroll
  for (int ks = 0; ks < K / 16; ++ks) {
    const std::uint64_t db = b0 + detail::desc_offset<b_mn_major, B>(0, 16 * ks);
#pragma unroll
    for (int mb = 0; mb < M / 64; ++mb)
      prim::wgmma_rs<N, T, b_mn_major>(acc.block(mb), a.ops[mb][ks], db, (accumulate || ks > 0) ? 1 : 0);
  }
  prim::wgmma_commit();
}

/// Waits until at most N wgmma groups are in flight. Pass the accumulators you will read
/// next, and the register A operands the finished wgmmas read: they are pinned, so the
/// compiler neither reads the accumulators before the wait nor reuses the operands'
/// registers (which the tensor cores read until then) for values computed before it.
template <int N, class... Frags>
TP_HD TP_FORCEINLINE void wgmma_wait(Frags&... frags) {
  prim::wgmma_wait<N>();
  (detail::pin_one(frags), ...);
}

}  // namespace tilepipe
