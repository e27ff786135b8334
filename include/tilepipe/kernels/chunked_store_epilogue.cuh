// The epilogue store of the warp-specialised matmul kernels (CUTLASS's epilogue): each
// compute warpgroup converts its accumulator chunk by chunk into SMEM buffers in turn (two,
// one where SMEM is short, up to four where it is not) and stores each chunk with TMA, without
// waiting for the stores: they drain while the next tile computes.
#pragma once

#include "../context.cuh"
#include "../core/static_for.cuh"
#include "../ops/copy.cuh"
#include "../ops/fragment.cuh"
#include "../ops/store.cuh"

#include <cstdint>

namespace tilepipe {

/// Buffers SMEM chunk buffers (View: one chunk, e.g. tp::smem<T, tile<block<64, 64>, ...>>)
/// per compute warpgroup, and the store through them. A chunk waits until the store that
/// last read its buffer has read it: with one buffer, the store of the chunk before
/// (DeepGEMM's epilogue); with as many buffers as chunks, a store of the tile before.
template <class View, int ComputeWgs, int Buffers = 2>
class chunked_store_epilogue {
 public:
  static_assert(Buffers >= 1 && Buffers <= 4, "tilepipe: chunked_store_epilogue: one to four buffers per warpgroup");
  /// The shared memory allocate() takes.
  static constexpr std::uint32_t smem_bytes = Buffers * ComputeWgs * View::bytes;

  /// Allocates the buffers of every compute warpgroup (all warpgroups, collectively) and
  /// keeps compute warpgroup ci's.
  TP_HD void allocate(kernel_context& ctx, int ci) {
    unsigned char* bufs = ctx.allocate(smem_bytes, "epilogue buffers");
    for (int i = 0; i < Buffers; ++i)
      buf_[i] = View{reinterpret_cast<typename View::value_type*>(bufs + (Buffers * ci + i) * View::bytes), 0};
  }

  /// Stores the accumulator chunk by chunk: chunk (rb, cb), View::rows x View::cols at row
  /// rb * View::rows and column cb * View::cols of acc, goes to c at index block_of(rb, cb).
  /// A buffer is rewritten once the store that last read it is done reading.
  template <int WM, int BN, class C, class BlockOf>
  TP_HD void store(const accumulator<WM, BN>& acc, const C& c, BlockOf&& block_of) const {
    constexpr int EM = View::rows, EN = View::cols;
    static_for<(WM / EM) * (BN / EN)>([&](auto chunk) {
      constexpr int rb = chunk.value / (BN / EN), cb = chunk.value % (BN / EN);
      const View& buf = buf_[chunk.value % Buffers];
      wait_smem_to_gmem<Buffers - 1>(reads_done);
      store_block<rb * EM, cb * EN>(buf, acc);
      commit_smem();
      copy_smem_to_gmem(buf, c, block_of(rb, cb));
    });
  }

 private:
  View buf_[Buffers];
};

}  // namespace tilepipe
