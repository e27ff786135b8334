// Collective matmuls of a tensor-parallel layer, with the communication inside the kernel:
//     all-gather + matmul:      c[M, N] = all_gather(a)[M, K] . b[K, N]      a: this device's rows
//     matmul + reduce-scatter:  c[Md, N] = reduce_scatter(a[M, Kd] . b[Kd, N])  c: this device's rows
// M is split into row shards, one per device (uneven sizes allowed); Kd is this device's
// slice of K. On every device of a tp::device_group:
//     tp::all_gather_matmul<bf16> ag(group, shard_rows, K, N);          // collective: every process
//     ag(dev, a_shard, b, c);                                            // every device
//     tp::matmul_reduce_scatter<bf16> rs(group, shard_rows, K_local, N);
//     rs(dev, a, b, c_shard);
//
// Both are rings of D steps over the D shards, each step the persistent warp-specialised
// matmul of examples/matmul_ws over one shard's tiles (two compute warpgroups of 64 rows,
// 128 x 256 tiles, 4 stages of 64-deep K, c stored by TMA through SMEM chunks), chained
// across steps in one warp_specialized_for:
//   all-gather:      step s multiplies shard (d + s) % D. Step 0 reads this device's a; while
//                    a CTA multiplies a tile of the shard's first column of tiles, compute
//                    warpgroup 0 TMA-stores each A block it already holds in SMEM into the left
//                    neighbour's slot for that shard (Pallas' collective matmul), then signals
//                    the row block's counter there; at step s > 0 the memory warpgroup waits for
//                    a tile's row block to be signalled before loading it from the slot.
//   reduce-scatter:  step s multiplies the rows of shard (d + s + 1) % D by this device's K
//                    slice, adds the partial sum the right neighbour sent for the tile (once its
//                    counter is signalled), and sends the sum on to the left neighbour with
//                    ordinary stores (each compute warpgroup its 64 x 256 in the partial-sum
//                    layout of sched/partials.cuh) and a signal; at the last step the shard is
//                    this device's: stored to c. The partial sums cross in T, as NCCL's
//                    reduce-scatter of T values sums them (half f32's bytes on the link; each
//                    hop rounds the running sum once, which the f32 accumulator then extends).
// Signals are per piece (a row block, a tile's partial sum), not per step: every device takes
// the tiles in the same order, so a piece is sent about a step before its receiver needs it
// and no CTA waits for the slowest CTA of the neighbour's previous step. The CTAs deal the
// ring's tiles out round robin over all its steps, not step by step (where the CTAs that take
// one step's extra tiles would take every step's), and the all-gather splits the last wave by
// stream-K (sched/stream_k.cuh) when it lies within the last step, whose tiles forward
// nothing. Every shard has its own slot in the receiving buffer, so a step never waits for a
// slot to be freed; between launches a device writes its neighbour's slots only after the
// neighbour said it is done with them (a "drained" counter signalled at the end of each launch).
//
// On the profiler's timeline (TILEPIPE_PROFILE builds; docs/guide.md) every tile of every
// warpgroup lies in a scope "ring step s", and the ring's own work has scopes of its own:
// "wait drained" (the launch's first wait), "wait A block" (memory warpgroup: the forwarded
// row block not yet signalled), "forward A" (in a step's body: the TMA store of the A block
// to the left neighbour), "signal A block", "wait partial", "add partial", "send partial"
// and "store c" (in the epilogue). bench_collective_matmul_on sums them per CTA.
#pragma once

#include "../tilepipe.cuh"
#include "chunked_store_epilogue.cuh"

#include <algorithm>
#include <array>
#include <string>
#include <type_traits>
#include <vector>

namespace tilepipe {

enum class collective { all_gather, reduce_scatter };

template <class T, collective Op, int BM = 128, int BN = 256, int Stages = 4, int BK = 64>
struct ring_matmul_kernel {
  // Two compute warpgroups, the memory one last with 56 registers: at matmul_ws' 40 ptxas
  // spilled 16 bytes in the reduce-scatter (the ring's tile lookup per step); at 56 neither
  // kernel spills and the compute warpgroups keep 224.
  static constexpr warp_specialization<2, 56> ws{};
  static constexpr int num_threads = ws.num_threads;
  static constexpr int compute_wgs = ws.compute_wgs;
  static constexpr int block_m = BM, block_n = BN, block_k = BK;
  static constexpr int SK = BK * static_cast<int>(sizeof(T));  // swizzle of K-major tiles: one row of K
  static constexpr int WM = BM / compute_wgs;                  // rows per compute warpgroup
  static constexpr long long partial_elements = WM * BN;       // one compute warpgroup's partial sum
  // Split the last wave only when that saves each CTA this many steps (the same tiles and
  // k-steps as matmul_ws).
  static constexpr int stream_k_min_steps = stream_k_min_steps_128x256;
  static constexpr bool gathers = Op == collective::all_gather;
  // A tile starts at a shard's first row, anywhere: the row index is an element offset.
  using a_tile = tile<block<element(BM), BK>, swizzle<SK>>;
  using b_tile = tile<block<BK, BN>, swizzle<128>>;
  // c's tiles go out as matmul_ws' do, by TMA in 64 x 64 chunks through two SMEM buffers a
  // compute warpgroup (a shard's rows start anywhere: the row index is an element offset).
  static constexpr int EM = 64, EN = 64;
  using c_tile = tile<block<element(EM), EN>, swizzle<EN * static_cast<int>(sizeof(T))>>;
  using c_view = smem<T, c_tile>;
  /// What the left neighbour writes into: all-gather, A's row shards [D * slot_rows, K]
  /// (moved by TMA); reduce-scatter, partial sums in T [D shards x max_tiles x compute_wgs slots].
  using received_ref = std::conditional_t<gathers, symmetric<T, 2, a_tile>, symmetric<T, 1>>;

  int shard_rows[max_devices] = {};   // each device's shard: rows
  int shard_start[max_devices] = {};  // and first row in the whole matrix
  int slot_rows = 0;            // all-gather: rows of a shard's slot (the largest shard, whole tiles)
  int max_tiles = 0;            // reduce-scatter: tiles of the largest shard (a shard's slots)
  int tiles_n = 1;
  unsigned launch = 1;          // this launch's number on this device: counters grow by a launch's signals
  tile_order_plan shard_tiles[max_devices];  // each shard's tiles in an L2-friendly order
  int k_steps = 1;                           // of a tile
  int ring_start[max_devices + 1] = {};      // set_ring
  int stream_k_min_saving = stream_k_off;    // all-gather: split the last wave when it saves each CTA this many steps
  partials_ref partials{};                   // the split tiles' partial sums: a slot per compute warpgroup of the grid

  /// The shard of ring step s on device d of D.
  TP_HD static int shard_of(int s, int d, int D) { return gathers ? (d + s) % D : (d + s + 1) % D; }

  /// "ring step s": the profiler scope around each tile of step s (s < max_devices <= 10).
  struct step_name {
    char text[12] = "ring step 0";
    TP_HD explicit step_name(int s) { text[10] = static_cast<char>('0' + s); }
  };

  /// Rows [row0, row_end) of c from a compute warpgroup's accumulator, columns from col0:
  /// through the chunk buffers by TMA where all its WM rows are the shard's (TMA clips the
  /// columns at c's edge), else with plain stores clipped to the shard's rows (a tile of a
  /// shard whose rows end inside it; TMA would write the next shard's).
  TP_HD static void store_rows(const gmem_ref<T, 2, c_tile>& c, long long row0, long long row_end, long long col0,
                               const accumulator<WM, BN>& acc, const chunked_store_epilogue<c_view, compute_wgs>& chunks) {
    if (row0 >= row_end) return;
    if (row_end - row0 >= WM) {
      chunks.store(acc, c, [&](int rb, int cb) { return idx(row0 + rb * EM, static_cast<int>(col0 / EN) + cb); });
      return;
    }
    gmem_ref<T, 2> dst;
    dst.data = c.data + row0 * c.stride[0] + col0;
    dst.shape[0] = row_end - row0 < WM ? row_end - row0 : WM;
    dst.shape[1] = c.shape[1] - col0 < BN ? c.shape[1] - col0 : BN;
    dst.stride[0] = c.stride[0], dst.stride[1] = 1;
    store(dst, acc);
  }

  /// Semaphore counters: one per piece a device receives, each signalled once per launch by
  /// the one warpgroup that sends it (all-gather: a 128-row block of a shard; reduce-scatter:
  /// a compute warpgroup's partial sum of a tile), then the "drained" counter.
  TP_HD int row_blocks() const { return slot_rows / BM; }
  TP_HD int pieces(int D) const { return gathers ? D * row_blocks() : D * max_tiles * compute_wgs; }
  TP_HD long long piece(int shard, tile_coord t, int ci) const {
    return gathers ? static_cast<long long>(shard) * row_blocks() + t.m
                   : (static_cast<long long>(shard) * max_tiles + t.m * tiles_n + t.n) * compute_wgs + ci;
  }

  /// This device's ring: step s multiplies shard_of(s)'s tiles, the ring's tiles
  /// ring_start[s] .. ring_start[s + 1] - 1 (set on the host per device: in the parameters,
  /// the kernel indexes it without local memory).
  TP_HD void set_ring(int d, int D) {
    ring_start[0] = 0;
    for (int s = 0; s < D; ++s) ring_start[s + 1] = ring_start[s] + shard_tiles[shard_of(s, d, D)].tiles();
  }
  TP_HD int step_of(int i) const {
    int s = 0;
    while (i >= ring_start[s + 1]) ++s;
    return s;
  }
  /// Which of the ring's tiles and k-steps each of `ctas` CTAs runs: round robin, and the
  /// last wave split where stream_k_min_saving allows and the split tiles are the last step's.
  TP_HD stream_k_plan plan(int D, int ctas) const {
    const int tiles = ring_start[D];
    return {tiles, k_steps, ctas, stream_k_min_saving, tiles - ring_start[D - 1]};
  }

  /// One item of the persistent loop: k-steps [k_begin, k_end) of a tile of a shard at a step
  /// of the ring; publishes and first_contributor as in a stream-K work_unit.
  struct ring_tile {
    int step, shard;
    tile_coord tile;
    int k_begin, k_end;
    bool publishes;
    int first_contributor;
  };

  TP_HD void operator()(kernel_context& ctx, gmem<T, 2, a_tile> a, gmem<T, 2, b_tile> b, gmem<T, 2, c_tile> c,
                        received_ref received, symmetric<u32, 1> sems) const {
    const int ci = ws.compute_index(ctx);
    const int d = ctx.device_index(), D = ctx.device_count();
    const int left = (d + D - 1) % D, right = (d + 1) % D;
    const int cta = ctx.axis_index(0), ctas = ctx.axis_size(0);
    // The warpgroups that write into the left neighbour, and how many of them signal the
    // drained counter in a launch.
    const bool sends = !ws.is_memory(ctx) && (!gathers || ci == 0);
    const int drained = pieces(D);
    const unsigned senders = static_cast<unsigned>(ctas * (gathers ? 1 : compute_wgs));

    const stream_k_plan::share work = plan(D, ctas).worker(cta);
    if (work.streams()) partials.require(ctas * compute_wgs, partial_elements);

    accumulator<WM, BN> acc;  // lives in the compute warpgroups only
    chunked_store_epilogue<c_view, compute_wgs> c_chunks;
    // The profiler track, captured by value where the closures below record.
    const profile_recorder_ref track = ctx.profiler();

    // k-steps [k_begin, k_end) of c's tile t of shard `shard` at ring step s.
    auto tile_pipeline = [&, track](ring_tile r) {
      const int s = r.step, shard = r.shard;
      const tile_coord t = r.tile;
      const long long row0 = static_cast<long long>(t.m) * BM;  // within the shard
      // A forwarding tile is whole (the plan splits only the last step's): `at` is its k-block.
      const bool forwards = gathers && s + 1 < D && t.n == 0 && ci == 0;
      const long long my_piece = piece(shard, t, ci);
      // The body's closure holds the track as an empty member without TILEPIPE_PROFILE: one
      // more capture would change the pipeline's layout, and the kernel's code, also there.
      struct forwarding {
        bool on;
        [[no_unique_address]] profile_recorder_ref track;
      };
      auto step = [&acc, ci, fwd = forwarding{forwards, track}, row0, shard, left, this, &received](auto at, auto a_smem,
                                                                                                  auto b_smem) {
        wgmma(acc, rows<WM>(a_smem, ci * WM), b_smem);
        if constexpr (gathers) {
          if (fwd.on) {  // the A block is in SMEM already: on to the left neighbour's slot
            profile_scope forward(fwd.track, "forward A");
            copy_smem_to_gmem(a_smem, remote(received, left), idx(shard * slot_rows + row0, at[0]));
            // The previous block's slot is released after this step: its store must have read
            // it; this block's stays in flight a step longer (the last's slot is released now).
            if (at[0] == k_steps - 1) wait_smem_to_gmem<0>(reads_done);
            else wait_smem_to_gmem<1>(reads_done);
          }
        }
        wgmma_wait<1>();  // one group stays in flight: delay_release<1>
      };
      auto context = compute_context([&, track, s, shard, t, row0, forwards, my_piece, publishes = r.publishes,
                                      first = r.first_contributor](auto pipeline) {
        acc = zeros<float, WM, BN>();
        pipeline();
        wgmma_wait<0>(acc);
        const long long my_row = row0 + ci * WM, col0 = static_cast<long long>(t.n) * BN;
        if constexpr (gathers) {
          if (publishes || first < cta) {  // a tile stream-K split
            profile_scope split(track, "stream-K partial");
            if (publishes) return publish_partial(acc, partials, cta * compute_wgs + ci);
            for (int w = first; w < cta; ++w) accumulate_partial(acc, partials, w * compute_wgs + ci);
          }
          if (forwards) {
            profile_scope signals(track, "signal A block");
            wait_smem_to_gmem<0>();  // the forwarded row block is written, not only read
            semaphore_signal(sems, static_cast<int>(my_piece), left);
          }
          profile_scope stores(track, "store c");
          store_rows(c, shard_start[shard] + my_row, shard_start[shard] + shard_rows[shard], col0, acc, c_chunks);
        } else {
          const long long slot = my_piece * partial_elements;  // this warpgroup's partial sum of the tile
          if (s > 0) {
            {
              profile_scope waits(track, "wait partial");
              semaphore_wait(sems, static_cast<int>(my_piece), launch);
            }
            profile_scope adds(track, "add partial");
            add_partial(acc, received.local.data + slot);
          }
          if (s + 1 < D) {
            profile_scope sending(track, "send partial");
            store_partial(acc, remote(received, left).data + slot);
            semaphore_signal(sems, static_cast<int>(my_piece), left);
          } else {
            profile_scope stores(track, "store c");
            store_rows(c, my_row, shard_rows[shard], col0, acc, c_chunks);
          }
        }
      });
      // Rows of this shard in the matrix the pipeline reads (a, or the shard's slot).
      const long long a_row = gathers ? (s == 0 ? row0 : static_cast<long long>(shard) * slot_rows + row0)
                                      : shard_start[shard] + row0;
      auto a_map = [a_row, k0 = r.k_begin](auto k) { return idx(a_row, k0 + k); };
      auto b_map = [n = t.n, k0 = r.k_begin](auto k) { return idx(k0 + k, n); };
      return emit_pipeline_warp_specialized(
          step, grid(r.k_end - r.k_begin),
          in_specs(spec<a_tile>(a_map, delay_release<1>), spec<b_tile>(b_map, delay_release<1>)), out_specs(), ws,
          max_concurrent_steps<Stages>, context);
    };
    auto loop = persistent_pipelines<ring_tile, c_chunks.smem_bytes>(ws, ctx, tile_pipeline, a, b);
    c_chunks.allocate(ctx, ci);
    // The left neighbour has read what this device wrote into it in the previous launch. (After
    // the allocation: compute-sanitizer's racecheck reports the pipeline's barrier
    // initialisation as racing with their first arrivals when a warpgroup barrier precedes it.)
    if (sends) {
      profile_scope waits(ctx, "wait drained");
      semaphore_wait(sems, drained, (launch - 1) * senders);
    }
    loop.each(0, work.units(), 1, [&](int j, pipeline_state state, auto role, auto& alloc) {
      const work_unit u = work.unit(j);
      const int s = step_of(u.tile);
      profile_scope ring_step(ctx, step_name(s).text);
      const int shard = shard_of(s, d, D);
      const tile_coord t = shard_tiles[shard].at(u.tile - ring_start[s]);
      gmem_ref<T, 2, a_tile> a_src = a;
      if constexpr (gathers) {
        if (s > 0) a_src = received.local;
        // The tile's row block is in its slot: the right neighbour forwarded it.
        if (std::is_same_v<decltype(role), memory_role_t> && s > 0) {
          profile_scope waits(ctx, "wait A block");
          semaphore_wait(sems, static_cast<int>(piece(shard, t, 0)), launch);
        }
      }
      tile_pipeline({s, shard, t, u.k_begin, u.k_end, u.publishes, u.first_contributor})(ctx, alloc, state, role, a_src, b);
    });
    if (!ws.is_memory(ctx)) wait_smem_to_gmem<0>();
    // This device's slots are read: its right neighbour may write them in the next launch.
    if (sends) semaphore_signal(sems, drained, right);
  }
};

/// The plan of a collective matmul over the devices of a group: the kernel's shapes, the
/// symmetric buffers the devices write into each other and each device's launch count.
/// Made collectively (every process of a GPU group, in the same order, with the same
/// arguments: checked, an error on every process otherwise); then called on every device of
/// the group for each product.
template <class T, collective Op>
class ring_matmul {
  using kernel_t = ring_matmul_kernel<T, Op>;
  using received_tensor =
      std::conditional_t<Op == collective::all_gather, symmetric_tensor<T, 2>, symmetric_tensor<T, 1>>;
  static constexpr const char* name = Op == collective::all_gather ? "all_gather_matmul" : "matmul_reduce_scatter";

 public:
  /// shard_rows: each device's rows of M (all-gather: of a, reduce-scatter: of c), at least
  /// one each; K: a's columns on each device (all-gather: all of K, reduce-scatter: the
  /// device's slice); N: columns of b and c. ctas: CTAs per device (0: one per SM on the GPU,
  /// 3 in the interpreter). stream_k_min_steps (all-gather): split the last wave by stream-K
  /// when that saves each CTA this many k-steps (stream_k_off: never); it takes a workspace
  /// of partial sums on each device (f32, 64 KB a compute warpgroup of the grid).
  ring_matmul(const device_group& group, const std::vector<long long>& shard_rows, long long K, long long N, int ctas = 0,
              int stream_k_min_steps = kernel_t::stream_k_min_steps)
      : K_(K), N_(N), launches_(agreed_launch_counts(group, shard_rows, K, N, ctas, stream_k_min_steps)),
        received_(make_received(group, shard_rows, K, N)),
        sems_(group, {kern_.pieces(group.size()) + 1}, std::string(name) + " semaphores") {
    const device& dev = group.local().at(0);
    const int sms = ctas > 0 ? ctas : dev.is_gpu() ? dev.multiprocessors() : 3;
    int tiles = 0;
    for (int r = 0; r < group.size(); ++r) {
      const int tiles_m = (kern_.shard_rows[r] + kernel_t::block_m - 1) / kernel_t::block_m;
      kern_.shard_tiles[r] = tile_order_plan(tiles_m, kern_.tiles_n, 8);
      tiles += tiles_m * kern_.tiles_n;
    }
    kern_.k_steps = static_cast<int>((K + kernel_t::block_k - 1) / kernel_t::block_k);
    ctas_ = std::min(sms, tiles);
    if (Op == collective::all_gather && stream_k_min_steps != stream_k_off) {
      kern_.stream_k_min_saving = stream_k_min_steps;
      partials_.resize(static_cast<std::size_t>(group.size()));
      for (const device& local : group.local())
        partials_[static_cast<std::size_t>(local.index())] =
            partials_buffer(local, ctas_ * kernel_t::compute_wgs, kernel_t::partial_elements);
    }
  }

  /// all-gather: c[M, N] = all_gather(a)[M, K] . b[K, N], a this device's [rows, K].
  /// reduce-scatter: c[rows, N] = this device's rows of the sum over devices of a[M, K] . b[K, N].
  /// Every device of the group must call it (in the interpreter the last call runs them all).
  /// profile: records this device's launch (TILEPIPE_PROFILE builds; host/profiler.cuh).
  void operator()(const device& dev, const tensor_view<T, 2>& a, const tensor_view<T, 2>& b, const tensor_view<T, 2>& c,
                  void* stream = nullptr, profiler* profile = nullptr) {
    check(dev, a, b, c);
    kernel_t k = kern_;
    k.launch = ++launches_.at(static_cast<std::size_t>(dev.index()));
    k.set_ring(dev.index(), dev.count());
    if (!partials_.empty()) k.partials = partials_.at(static_cast<std::size_t>(dev.index())).ref();
    kernel(k, {.grid = {ctas_}, .stream = stream, .profile = profile})(dev, a, b, c, received_, sems_);
  }

  int ctas() const { return ctas_; }
  /// Whether device `device`'s launches split their last wave by stream-K.
  bool splits_last_wave(int device) const {
    const int D = static_cast<int>(launches_.size());
    kernel_t k = kern_;
    k.set_ring(device, D);
    return !partials_.empty() && k.plan(D, ctas_).streams();
  }

 private:
  /// Every process's plan must be this one (checked before any symmetric memory exists: a
  /// peer with another shape or CTA count would wait forever for this one's signals); the
  /// launch counts start at 0.
  static std::vector<unsigned> agreed_launch_counts(const device_group& group, const std::vector<long long>& shard_rows,
                                                    long long K, long long N, int ctas, int stream_k_min_steps) {
    const device& dev = group.local().at(0);
    std::vector<device_group::setting> plan = {{"the operation", static_cast<long long>(Op)},
                                               {"the devices", group.size()},
                                               {"K", K},
                                               {"N", N},
                                               {"ctas", ctas},
                                               {"the SM count", dev.is_gpu() ? dev.multiprocessors() : 0},
                                               {"stream_k_min_steps", stream_k_min_steps}};
    for (std::size_t r = 0; r < shard_rows.size() && r < static_cast<std::size_t>(max_devices); ++r)
      plan.push_back({"shard_rows[" + std::to_string(r) + "]", shard_rows[r]});
    group.require_same(name, plan);
    return std::vector<unsigned>(static_cast<std::size_t>(group.size()), 0);
  }

  received_tensor make_received(const device_group& group, const std::vector<long long>& shard_rows, long long K,
                                long long N) {
    const int D = group.size();
    if (static_cast<int>(shard_rows.size()) != D)
      detail::throw_formatted("%s: %zu shard sizes for a group of %d devices", name, shard_rows.size(), D);
    if (K < 1 || N < 1 || K % 8 || N % 8)
      detail::throw_formatted("%s: K = %lld and N = %lld must be positive multiples of 8 (16-byte rows for TMA)", name, K,
                              N);
    long long start = 0, largest = 0;
    for (int r = 0; r < D; ++r) {
      if (shard_rows[r] < 1) detail::throw_formatted("%s: device %d's shard has %lld rows; every shard needs one", name, r, shard_rows[r]);
      kern_.shard_rows[r] = static_cast<int>(shard_rows[r]);
      kern_.shard_start[r] = static_cast<int>(start);
      start += shard_rows[r];
      largest = std::max(largest, shard_rows[r]);
    }
    if (start > 0x7fffffffLL - kernel_t::block_m) detail::throw_formatted("%s: %lld rows exceed 32-bit row indices", name, start);
    M_ = start;
    kern_.tiles_n = static_cast<int>((N + kernel_t::block_n - 1) / kernel_t::block_n);
    const long long tiles_m = (largest + kernel_t::block_m - 1) / kernel_t::block_m;
    kern_.slot_rows = static_cast<int>(tiles_m * kernel_t::block_m);
    kern_.max_tiles = static_cast<int>(tiles_m * kern_.tiles_n);
    if constexpr (Op == collective::all_gather)
      return received_tensor(group, {D * tiles_m * kernel_t::block_m, K}, "all_gather_matmul received shards");
    else
      return received_tensor(group, {D * tiles_m * kern_.tiles_n * kernel_t::compute_wgs * kernel_t::partial_elements},
                             "matmul_reduce_scatter received partial sums");
  }

  void check(const device& dev, const tensor_view<T, 2>& a, const tensor_view<T, 2>& b, const tensor_view<T, 2>& c) const {
    const int D = static_cast<int>(launches_.size());
    if (dev.count() != D)
      detail::throw_formatted("%s: the device is one of %d, the plan's group has %d", name, dev.count(), D);
    const long long mine = kern_.shard_rows[dev.index()];
    const long long a_rows = Op == collective::all_gather ? mine : M_, c_rows = Op == collective::all_gather ? M_ : mine;
    if (a.shape[0] != a_rows || a.shape[1] != K_)
      detail::throw_formatted("%s: device %d's a is %lld x %lld, expected %lld x %lld", name, dev.index(), a.shape[0],
                              a.shape[1], a_rows, K_);
    if (b.shape[0] != K_ || b.shape[1] != N_)
      detail::throw_formatted("%s: b is %lld x %lld, expected %lld x %lld", name, b.shape[0], b.shape[1], K_, N_);
    if (c.shape[0] != c_rows || c.shape[1] != N_)
      detail::throw_formatted("%s: device %d's c is %lld x %lld, expected %lld x %lld", name, dev.index(), c.shape[0],
                              c.shape[1], c_rows, N_);
    host::require_tma_rows(a, name, "a"), host::require_tma_rows(b, name, "b");
    if (c.stride[1] != 1) detail::throw_formatted("%s: c's rows must be contiguous", name);
  }

  kernel_t kern_{};
  long long M_ = 0, K_, N_;
  int ctas_ = 1;
  std::vector<unsigned> launches_;  // per device index
  received_tensor received_;
  symmetric_tensor<u32, 1> sems_;
  std::vector<partials_buffer> partials_;  // per device index, where local (all-gather with stream-K)
};

/// c = all_gather(a) . b over a device group (see the top of this file).
template <class T>
using all_gather_matmul = ring_matmul<T, collective::all_gather>;
/// c = this device's rows of reduce_scatter(a . b) over a device group.
template <class T>
using matmul_reduce_scatter = ring_matmul<T, collective::reduce_scatter>;

}  // namespace tilepipe
