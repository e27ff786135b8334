// The work of a persistent kernel: which output tiles, and which of their k-steps, each
// worker (a CTA, or a cluster of CTAs) runs, and in which order.
//
// A persistent kernel launches as many workers as the GPU holds at once, and each loops
// over its share:
//
//     for (const tp::work_tile u : sched.worker(w, workers)) { ... tile u.tile, steps [u.k_begin, u.k_end) ... }
//
// A worker runs whole tiles round robin in the order's sequence (tiles w, w + workers, ...),
// then its part of the last wave, which stream-K splits by steps when that pays
// (stream_k.cuh; a unit that does not finish its tile hands a partial sum to the one that
// does, partials.cuh). The scheduler is made on the host, where the order's divisions are
// prepared (fast_divmod), and a worker's share does its own divisions once: moving from one
// tile to the next costs a few instructions while the tensor cores wait.
//
// `Order` maps the loop's i-th tile to its coordinates, prepared on the host: `tiles()` and
// `at(i)`. tile_order_plan (bands of tile rows, grouped or snake) is the one there is; a
// heaviest-first order for causal attention would be another. Tiles of different step
// counts (causal attention, the ragged groups of a grouped matmul) would add a per-tile step
// count to the Order and a split that follows it; not built yet.
#pragma once

#include "stream_k.cuh"
#include "tile_order.cuh"

namespace tilepipe {

/// One unit of a worker's work: k-steps [k_begin, k_end) of the output tile `tile`.
struct work_tile {
  tile_coord tile;
  int k_begin, k_end;
  /// The unit does not reach the tile's last step: it publishes its partial sum (in the
  /// worker's slot) for the worker that finishes the tile, and stores nothing.
  bool publishes;
  /// The unit finishes its tile after adding the partial sums of workers
  /// first_contributor .. (its own worker index - 1); its own index when the tile is whole.
  int first_contributor;
};

template <class Order = tile_order_plan>
struct tile_scheduler {
  class worker_tiles;

  Order order;                             // the loop's i-th tile -> its coordinates
  int steps = 1;                           // k-steps per tile
  int stream_k_min_saving = stream_k_off;  // split the last wave when it saves each worker this many steps

  /// Which tiles and steps `workers` workers run: whether the last wave is split, ...
  TP_HD stream_k_plan plan(int workers) const { return {order.tiles(), steps, workers, stream_k_min_saving}; }
  /// Worker w's units in the order it runs them (valid while the scheduler is).
  TP_HD worker_tiles worker(int w, int workers) const { return {order, plan(workers).worker(w)}; }
};

/// One worker's units: `size()` of them, `[j]` the j-th (0 <= j < size()), or a range.
template <class Order>
class tile_scheduler<Order>::worker_tiles {
 public:
  TP_HD worker_tiles(const Order& order, stream_k_plan::share share) : order_(&order), share_(share) {}

  TP_HD int size() const { return share_.units(); }
  /// Whether the plan splits the last wave: partial sums are exchanged.
  TP_HD bool streams() const { return share_.streams(); }
  TP_HD work_tile operator[](int j) const {
    const work_unit u = share_.unit(j);
    return {order_->at(u.tile), u.k_begin, u.k_end, u.publishes, u.first_contributor};
  }

  class iterator {
   public:
    TP_HD work_tile operator*() const { return (*units_)[j_]; }
    TP_HD iterator& operator++() { return ++j_, *this; }
    TP_HD bool operator!=(const iterator& o) const { return j_ != o.j_; }

   private:
    friend class worker_tiles;
    TP_HD iterator(const worker_tiles* units, int j) : units_(units), j_(j) {}
    const worker_tiles* units_;
    int j_;
  };
  TP_HD iterator begin() const { return {this, 0}; }
  TP_HD iterator end() const { return {this, size()}; }

 private:
  const Order* order_;  // the scheduler's, which lives in the kernel's parameters
  stream_k_plan::share share_;
};

}  // namespace tilepipe
