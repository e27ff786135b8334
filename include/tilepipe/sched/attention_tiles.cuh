// The tiles of an attention forward, (batch, head, block of query rows), in the order a
// persistent kernel's workers take them round robin (tile at(w), at(w + workers), ...).
//
// Without a mask every tile costs the same: the order walks the row blocks of one head,
// then the next head, so the tiles that run side by side read the same K and V from L2.
// With a causal mask row block m reads m + 1 KV blocks, and row blocks m and M - 1 - m of
// one head together read M + 1. The order deals such pairs ("units"), head after head: a
// worker runs a unit's heavier row block in one wave and its lighter one in the next, so
// every worker's two waves cost the same, the workers end within one unit of each other,
// and the units that run side by side belong to few heads, whose K and V stay in L2. (The
// order this replaced ran one row block of every head at a time, heaviest first: as well
// balanced, but with the K and V of all heads in flight, more than L2 holds.) With an odd
// M the middle row blocks of two heads make a unit. The waves left after the last whole
// pair of waves hold the remaining units' first tiles, then their second tiles in reverse
// order (so that round robin gives a worker both tiles of one unit). A local window costs
// about the same in every row block but the first few: the units suit it too.
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
  /// m_blocks: row blocks of the longest query sequence; paired: the causal / local order
  /// above; workers: how many take the tiles round robin (worker w takes w, w + workers, ...).
  TP_HD attention_tile_order(int batches, int heads, int m_blocks, bool paired, int workers = 1)
      : tiles_(batches * heads * m_blocks), m_blocks_(m_blocks > 0 ? m_blocks : 1), heads_(heads > 0 ? heads : 1),
        workers_(workers > 0 ? workers : 1), units_per_head_(m_blocks / 2 > 0 ? m_blocks / 2 : 1), paired_(paired) {
    const int heads_total = batches * heads;
    row_units_ = m_blocks / 2 * heads_total;
    const int middles = m_blocks % 2 ? heads_total : 0;
    units_ = row_units_ + middles / 2;
    const int w = workers_.divisor(), by_waves = tiles_ / (2 * w), by_units = units_ / w;
    paired_waves_ = 2 * (by_waves < by_units ? by_waves : by_units);
    tail_units_ = units_ - paired_waves_ / 2 * w;
  }

  TP_HD int tiles() const { return tiles_; }

  /// The tile that round-robin position j (worker j % workers, its wave j / workers) runs.
  TP_HD attention_tile at(int j) const {
    if (!paired_) {
      const int head = m_blocks_.div(j);
      return on(head, j - head * m_blocks_.divisor());
    }
    const int w = workers_.divisor(), wave = workers_.div(j), pos = j - wave * w;
    if (wave < paired_waves_) return unit_tile((wave >> 1) * w + pos, wave & 1);
    // The tail: the remaining units' first tiles, a lone middle row block, their second tiles reversed.
    const int t = j - paired_waves_ * w, rest = tiles_ - paired_waves_ * w;
    const int x = t < w ? t : rest - 1 - (t - w), first_unit = units_ - tail_units_;
    if (x < tail_units_) return unit_tile(first_unit + x, 0);
    if (x >= rest - tail_units_) return unit_tile(first_unit + rest - 1 - x, 1);
    return on(heads_total() - 1, m_blocks_.divisor() / 2);
  }

 private:
  TP_HD int heads_total() const { return tiles_ / m_blocks_.divisor(); }
  /// Unit u's first (second = 0) or second tile: row blocks M - 1 - k and k of one head, or
  /// the middle row blocks of two heads.
  TP_HD attention_tile unit_tile(int u, int second) const {
    if (u < row_units_) {
      const int head = units_per_head_.div(u), k = u - head * units_per_head_.divisor();
      return on(head, second ? k : m_blocks_.divisor() - 1 - k);
    }
    return on(2 * (u - row_units_) + second, m_blocks_.divisor() / 2);
  }
  /// Row block m of (batch, head) number `head` (the heads of a batch side by side, so the
  /// query heads of one KV head are neighbours).
  TP_HD attention_tile on(int head, int m) const {
    const int batch = heads_.div(head);
    return {batch, head - batch * heads_.divisor(), m};
  }

  int tiles_ = 0, row_units_ = 0, units_ = 0, paired_waves_ = 0, tail_units_ = 0;
  fast_divmod m_blocks_, heads_, workers_, units_per_head_;
  bool paired_ = false;
};

}  // namespace tilepipe
