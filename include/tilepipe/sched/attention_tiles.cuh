// The tiles of an attention forward, (batch, head, block of query rows), in the order a
// persistent kernel's workers take them round robin (tile w, w + workers, ...).
//
// Without a mask every tile costs the same: the order walks the row blocks of one head,
// then the next head, so the tiles that run side by side read the same K and V from L2.
// With a causal or local mask, row block m of a causal head reads m + 1 KV blocks: the
// order then runs the heaviest row blocks first (descending m; all heads and batches of a
// row block together, the query heads of one KV head next to each other), so that the
// last wave holds the lightest tiles — longest-processing-time-first scheduling. Taken
// round robin, wave after wave, such an order would give worker 0 the heaviest tile of every
// wave and the last worker the lightest (16 heads of 128 causal row blocks on 132 workers:
// 6% apart); the workers therefore take the waves in alternating directions (the second
// wave's heaviest tile goes to the worker that had the first wave's lightest), which leaves
// them within one tile of each other.
#pragma once

#include "../core/config.cuh"
#include "fast_divmod.cuh"

namespace tilepipe {

struct attention_tile {
  int batch;
  int head;     // query head
  int m_block;  // block of query rows
};

class attention_tile_order {
 public:
  attention_tile_order() = default;
  /// m_blocks: row blocks of the longest query sequence; workers: how many take the tiles
  /// round robin (worker w takes w, w + workers, ...).
  TP_HD attention_tile_order(int batches, int heads, int m_blocks, bool heaviest_first, int workers = 1)
      : tiles_(batches * heads * m_blocks), m_blocks_(m_blocks), heads_(heads), heads_x_batches_(heads * batches),
        workers_(workers > 0 ? workers : 1), heaviest_first_(heaviest_first) {}

  TP_HD int tiles() const { return tiles_; }
  /// The tile that round-robin position j (worker j % workers, its wave j / workers) runs.
  TP_HD attention_tile at(int j) const {
    if (!heaviest_first_) return tile(j);
    const int wave = workers_.div(j), pos = j - wave * workers_.divisor();
    if ((wave & 1) == 0) return tile(j);
    const int first = wave * workers_.divisor(), rest = tiles_ - first;
    const int in_wave = rest < workers_.divisor() ? rest : workers_.divisor();
    return tile(first + in_wave - 1 - pos);
  }

  /// The id-th tile of the order (0 <= id < tiles()).
  TP_HD attention_tile tile(int id) const {
    int m, rest;
    if (heaviest_first_) {
      const int round = heads_x_batches_.div(id);  // one row block of every head and batch
      m = m_blocks_.divisor() - 1 - round;
      rest = id - round * heads_x_batches_.divisor();
    } else {
      rest = m_blocks_.div(id);
      m = id - rest * m_blocks_.divisor();
    }
    const int batch = heads_.div(rest);
    return {batch, rest - batch * heads_.divisor(), m};
  }

 private:
  int tiles_ = 0;
  fast_divmod m_blocks_, heads_, heads_x_batches_, workers_;
  bool heaviest_first_ = false;
};

}  // namespace tilepipe
