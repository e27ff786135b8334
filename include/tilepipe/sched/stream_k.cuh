// Stream-K for the last, partial wave of a persistent loop over tiles.
//
// A persistent kernel with W workers (CTAs, or clusters) and U tiles of S steps each runs
// U / W full waves and then a partial one: U % W tiles while the other workers idle for a
// whole tile. Stream-K (Osama et al., 2023) spreads the partial wave's U % W * S steps
// evenly over all W workers instead (with the full wave before it when it is under half a
// wave: stream_k_plan); a tile split between workers is finished by the worker that runs
// its last step (its owner), after adding the partial sums the others left in global memory.
//
// Each worker runs its full tiles first, then its range of the stream-K steps, which
// covers the end of one tile, whole tiles, and the start of another. It runs those pieces
// from the last to the first: the start of a tile it does not own comes first, so the
// partial sum its owner will need is published early; the end of the tile it owns comes
// last, when the lower workers that hold that tile's other pieces are long done. So an
// owner waits only for lower-numbered workers, never the reverse: no cycle on the GPU, and
// the interpreter, which runs CTAs one at a time in index order, meets every partial sum
// before it is needed.
#pragma once

#include "../core/config.cuh"
#include "../core/error.cuh"

namespace tilepipe {

/// One piece of a worker's work: steps [k_begin, k_end) of the tile-th tile of the loop.
struct work_unit {
  int tile;
  int k_begin, k_end;
  /// The piece does not reach the tile's last step: leave its partial sum in the
  /// worker's slot for the owner, and publish it.
  bool publishes;
  /// The owner adds the partial sums of workers first_contributor .. (its own index - 1);
  /// equal to its own index when the tile is not split.
  int first_contributor;
};

/// A min_saving no split reaches: the plain persistent loop, whole tiles only.
inline constexpr int stream_k_off = 0x7fffffff;

/// The min_saving of the matmuls on 128 x 256 tiles of 64-deep k-steps (matmul_ws, the
/// collective ring): handing a partial sum over costs about 8 steps, and a split wave
/// realises only part of its nominal saving (measured on an H100; docs/design.md, "Stream-K
/// for the last wave").
inline constexpr int stream_k_min_steps_128x256 = 24;

/// Which pieces each worker runs. Stream-K is used when it shortens every worker's time by
/// at least `min_saving` steps (the cost of writing and reading back a partial sum) and
/// every worker gets at least one step; otherwise the loop is the plain persistent one.
/// The split covers the partial wave alone when it is at least half a wave. A smaller one
/// would cut each of its tiles into many pieces (4 tiles on 132 workers: 33 each) whose
/// owner waits for the slowest and reads them all back; the full wave before it is split
/// with it instead, every share is then at least a tile and a tile has at most two pieces
/// (CUTLASS's stream-K heuristic also takes two waves). `split_within`: the split may cover
/// only the loop's last split_within tiles (a ring step's): the partial wave alone where
/// two waves do not fit, nothing where that does not either.
class stream_k_plan {
 public:
  class share;

  stream_k_plan() = default;
  TP_HD stream_k_plan(int tiles, int steps_per_tile, int workers, int min_saving, int split_within = 0x7fffffff)
      : steps_(steps_per_tile), workers_(workers), dp_tiles_(tiles) {
    TP_REQUIRE(tiles >= 1 && steps_per_tile >= 1 && workers >= 1,
               "stream_k_plan: %d tiles of %d steps on %d workers; all three must be positive", tiles, steps_per_tile,
               workers);
    const int rest = tiles % workers;
    const long long saving = static_cast<long long>(workers - rest) * steps_per_tile / workers;
    if (rest == 0 || saving < min_saving) return;
    const bool two_waves = 2 * rest < workers && tiles >= rest + workers && rest + workers <= split_within;
    const int split = two_waves ? rest + workers : rest;
    if (split > split_within || static_cast<long long>(split) * steps_per_tile < workers) return;
    dp_tiles_ = tiles - split;
    sk_steps_ = static_cast<long long>(split) * steps_per_tile;
  }

  /// Whether the last wave is split (and partial sums are exchanged).
  TP_HD bool streams() const { return sk_steps_ > 0; }
  /// Tiles 0 .. data_parallel_tiles() - 1 run whole, tile t on worker t % workers.
  TP_HD int data_parallel_tiles() const { return dp_tiles_; }
  /// Worker w's pieces.
  TP_HD share worker(int w) const;

 private:
  // Worker w's stream-K steps [begin(w), end(w)), numbered across the split tiles.
  TP_HD long long begin(int w) const { return w * sk_steps_ / workers_; }
  TP_HD long long end(int w) const { return (w + 1) * sk_steps_ / workers_; }
  // The worker whose range holds stream-K step i: the largest w with begin(w) <= i.
  TP_HD int worker_of(long long i) const { return static_cast<int>(((i + 1) * workers_ - 1) / sk_steps_); }

  int steps_ = 1, workers_ = 1, dp_tiles_ = 0;
  long long sk_steps_ = 0;
};

/// One worker's pieces, its divisions done once: a persistent loop asks for a piece
/// between two tiles, while the tensor cores wait, and a whole tile then costs no division.
class stream_k_plan::share {
 public:
  /// How many pieces the worker runs.
  TP_HD int units() const { return units_; }
  /// Whether the plan splits the last wave (and partial sums are exchanged).
  TP_HD bool streams() const { return plan_.streams(); }
  /// The j-th piece, in the order the worker runs them (0 <= j < units()).
  TP_HD work_unit unit(int j) const {
    const stream_k_plan& p = plan_;
    if (j < whole_) return {w_ + j * p.workers_, 0, p.steps_, false, w_};
    const long long t = last_tile_ - (j - whole_);  // the pieces from the last to the first
    const long long first = t * p.steps_;
    const int k_begin = static_cast<int>((b_ > first ? b_ : first) - first);
    const int k_end = static_cast<int>((e_ < first + p.steps_ ? e_ : first + p.steps_) - first);
    return {p.dp_tiles_ + static_cast<int>(t), k_begin, k_end, k_end < p.steps_, k_begin > 0 ? p.worker_of(first) : w_};
  }

 private:
  friend class stream_k_plan;
  TP_HD share(const stream_k_plan& p, int w)
      : plan_(p), w_(w), whole_(w < p.dp_tiles_ ? (p.dp_tiles_ - w + p.workers_ - 1) / p.workers_ : 0), units_(whole_) {
    if (!p.streams()) return;
    b_ = p.begin(w), e_ = p.end(w);
    last_tile_ = (e_ - 1) / p.steps_;
    units_ += static_cast<int>(last_tile_ - b_ / p.steps_) + 1;
  }
  stream_k_plan plan_;
  int w_, whole_, units_;
  long long b_ = 0, e_ = 0, last_tile_ = 0;
};

TP_HD inline stream_k_plan::share stream_k_plan::worker(int w) const { return share(*this, w); }

}  // namespace tilepipe
