// The in-kernel profiler (built with TILEPIPE_PROFILE): each warpgroup's track holds the
// events of the documented schedules in program order, event for event (the same on the
// GPU, where only the times differ): emit_pipeline with and without delay_release, the
// warp-specialised pipeline with its memory and compute tracks, a chain of pipelines in a
// persistent loop with a compute context and a user scope; truncation; the trace JSON;
// a profiled matmul_ws. Built twice: with every step's events, and coarse (tiles,
// epilogues and scopes only: TILEPIPE_PROFILE_COARSE), where the same schedules filtered to
// the coarse kinds must come out.
#include "test_util.hpp"

#include "examples/matmul_ws/matmul_ws_kernel.cuh"

#include <cctype>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

namespace {

static_assert(tp::profiling, "test_profile is built with TILEPIPE_PROFILE");

using tile = tp::tile<tp::block<8, 32>>;
using K = tp::profile_kind;

/// An event as the tests compare them: kind, phase, operand, step (times are checked apart).
struct ev {
  K kind;
  tp::profile_phase phase;
  int operand = -1;
  long long step = -1;
  bool operator==(const ev&) const = default;
};

std::string show(const ev& e) {
  const char* ph[] = {"", " begin", " end"};
  return std::string(tp::profile_kind_name(e.kind)) + ph[static_cast<int>(e.phase)] + " (operand " +
         std::to_string(e.operand) + ", step " + std::to_string(e.step) + ")";
}

ev instant(K k, int operand = -1, long long step = -1) { return {k, tp::profile_phase::instant, operand, step}; }
void span(std::vector<ev>& v, K k, int operand = -1, long long step = -1) {
  v.push_back({k, tp::profile_phase::begin, operand, step});
  v.push_back({k, tp::profile_phase::end, operand, step});
}

std::vector<ev> events_of(const tp::profile_track& t) {
  std::vector<ev> v;
  for (const auto& e : t.events) v.push_back({e.kind, e.phase, e.operand, e.step});
  return v;
}

/// `want` is the schedule's full sequence; a TILEPIPE_PROFILE_COARSE build records only its
/// coarse kinds.
void expect_sequence(const tp::profile_track& t, const std::vector<ev>& schedule) {
  std::vector<ev> want;
  for (const ev& e : schedule)
    if (tp::profile_records(e.kind)) want.push_back(e);
  const auto got = events_of(t);
  const std::size_t n = std::min(got.size(), want.size());
  for (std::size_t i = 0; i < n; ++i)
    ASSERT_EQ(got[i], want[i]) << "track " << t.name() << ", event " << i << ": got " << show(got[i]) << ", want "
                               << show(want[i]);
  ASSERT_EQ(got.size(), want.size()) << "track " << t.name();
  EXPECT_EQ(t.dropped, 0u);
}

/// Times never go back on a track, and a track spans the time of its events.
void expect_monotonic(const tp::profile_track& t) {
  for (std::size_t i = 1; i < t.events.size(); ++i)
    ASSERT_GE(t.events[i].time, t.events[i - 1].time) << t.name() << ", event " << i;
  if (!t.events.empty()) EXPECT_GE(t.events.front().time, 0.0);
}

// ---- emit_pipeline ---------------------------------------------------------------------

/// y = 2 x + 1, one block per step: one input and one output operand.
template <int Slots, int Delay>
struct map_kernel {
  int steps;
  TP_HD void operator()(tp::kernel_context& k, tp::gmem<float, 2, tile> x, tp::gmem<float, 2, tile> y) const {
    auto body = [](auto, auto xs, auto ys) { tp::map([](float v) { return 2 * v + 1; }, ys, xs); };
    auto s = tp::spec<tile>([](auto i) { return tp::idx(i, 0); });
    tp::emit_pipeline(body, tp::grid(steps), tp::in_specs(s), tp::out_specs(s), tp::max_concurrent_steps<Slots>,
                      tp::delay_release<Delay>)(k, x, y);
  }
};

/// The schedule of emit_pipeline's header for that kernel: prologue fetches of the first
/// `slots` steps; per step the ready wait, the wait for the output slot's last store, the
/// body, the refill of step s + slots - delay (from s = delay on), the store; at the end
/// the wait for the stores (and for the wgmmas a delayed release may leave in flight).
std::vector<ev> emit_pipeline_schedule(int steps, int slots, int delay) {
  std::vector<ev> v;
  for (int t = 0; t < slots && t < steps; ++t) v.push_back(instant(K::fetch, 0, t));
  for (int s = 0; s < steps; ++s) {
    span(v, K::wait_ready, 0, s);
    span(v, K::wait_output, 0, s);
    span(v, K::body, -1, s);
    if (s >= delay && s + slots - delay < steps) v.push_back(instant(K::fetch, 0, s + slots - delay));
    v.push_back(instant(K::store, 0, s));
  }
  span(v, K::wait_store);
  if (delay > 0) span(v, K::wgmma_wait);
  return v;
}

template <int Slots, int Delay>
std::vector<tp::profile_track> run_map(int steps, tp::profiler& prof) {
  const long long n = steps * 8LL * 32;
  const auto hx = test::random_values<float>(n);
  auto x = tp::tensor<float, 2>::from_host(test::dev(), {steps * 8LL, 32}, hx);
  auto y = tp::tensor<float, 2>::from_host(test::dev(), {steps * 8LL, 32}, std::vector<float>(n, 0.0f));
  tp::kernel(map_kernel<Slots, Delay>{steps}, {.profile = &prof})(test::dev(), x, y);
  const auto hy = y.to_host();
  for (long long e = 0; e < n; ++e) EXPECT_EQ(hy[e], 2 * hx[e] + 1) << "element " << e;  // exact in float
  return prof.tracks();
}

}  // namespace

TEST(Profile, EmitPipelineSchedule) {
  tp::profiler prof(test::dev());
  const auto tracks = run_map<2, 0>(5, prof);
  ASSERT_EQ(tracks.size(), 1u);
  EXPECT_EQ(tracks[0].name(), "warpgroup 0");
  expect_sequence(tracks[0], emit_pipeline_schedule(5, 2, 0));
  expect_monotonic(tracks[0]);
}

TEST(Profile, EmitPipelineDelayRelease) {
  tp::profiler prof(test::dev());
  const auto tracks = run_map<3, 1>(6, prof);
  ASSERT_EQ(tracks.size(), 1u);
  expect_sequence(tracks[0], emit_pipeline_schedule(6, 3, 1));
}

TEST(Profile, TruncatedNotCorrupted) {
  if (!tp::profiling_steps) GTEST_SKIP() << "a coarse profile of this pipeline is empty";
  tp::profiler full(test::dev()), small(test::dev(), 7);
  const auto whole = run_map<2, 0>(5, full)[0];
  const auto cut = run_map<2, 0>(5, small)[0];
  // The first 7 records (a wait or a body is one record, two events), then nothing.
  EXPECT_EQ(cut.records, 7u);
  EXPECT_EQ(cut.dropped, whole.records - 7);
  EXPECT_EQ(small.dropped(), static_cast<long long>(whole.records - 7));
  const auto a = events_of(whole), b = events_of(cut);
  ASSERT_LT(b.size(), a.size());
  ASSERT_GE(b.size(), 7u);
  for (std::size_t i = 0; i < b.size(); ++i) EXPECT_EQ(a[i], b[i]) << "event " << i;
}

// ---- the warp-specialised pipeline --------------------------------------------------------

namespace {

/// y = 2 x + 1 with 2 compute warpgroups (4 rows each) and the memory warpgroup last.
template <int Slots, int Delay>
struct ws_map_kernel {
  static constexpr tp::warp_specialization<2, 40> ws{};
  static constexpr int num_threads = ws.num_threads;
  int steps;
  TP_HD void operator()(tp::kernel_context& k, tp::gmem<float, 2, tile> x, tp::gmem<float, 2, tile> y) const {
    const int c = ws.compute_index(k);
    auto body = [c](auto, auto xs, auto ys) {
      tp::map([](float v) { return 2 * v + 1; }, tp::rows<4>(ys, 4 * c), tp::rows<4>(xs, 4 * c));
    };
    auto s = tp::spec<tile>([](auto i) { return tp::idx(i, 0); });
    tp::emit_pipeline_warp_specialized(body, tp::grid(steps), tp::in_specs(s), tp::out_specs(s), ws,
                                       tp::max_concurrent_steps<Slots>, tp::delay_release<Delay>)(k, x, y);
  }
};

/// The memory warpgroup's schedule (warp_specialized.cuh): prologue fetches; per step the
/// refill of step s + slots - delay after waiting for its slot's release, then the store of
/// the step's output block after waiting until it is written, and (from the second store
/// on, with several output slots) the wait for the previous store's reads; at the stop the
/// waits for every input slot's release and for the last store.
std::vector<ev> ws_memory_schedule(int steps, int slots, int delay) {
  std::vector<ev> v;
  int fill = 0;
  for (; fill < slots && fill < steps; ++fill) v.push_back(instant(K::fetch, 0, fill));
  for (int s = 0; s < steps; ++s) {
    if (s >= delay && s + slots - delay < steps) {
      span(v, K::wait_consumed, 0, fill);
      v.push_back(instant(K::fetch, 0, fill++));
    }
    span(v, K::wait_written, 0, s);
    v.push_back(instant(K::store, 0, s));
    if (s > 0) span(v, K::wait_store, 0);
  }
  for (int t = 0; t < slots && t < steps; ++t) span(v, K::wait_consumed, 0);
  if (steps > 0) span(v, K::wait_store, 0);
  return v;
}

/// A compute warpgroup's: per step the ready wait, the wait for a reused output slot, the
/// body, the hand-over of the output block, the release of step s - delay's input block;
/// then the wait for delayed wgmmas and the last releases.
std::vector<ev> ws_compute_schedule(int steps, int slots, int delay) {
  std::vector<ev> v;
  for (int s = 0; s < steps; ++s) {
    span(v, K::wait_ready, 0, s);
    if (s >= slots) span(v, K::wait_output, 0);
    span(v, K::body, -1, s);
    v.push_back(instant(K::written, 0));
    if (s >= delay) v.push_back(instant(K::release, 0, s - delay));
  }
  if (delay > 0) span(v, K::wgmma_wait);
  for (int s = steps - delay; s < steps; ++s)
    if (s >= 0) v.push_back(instant(K::release, 0, s));
  return v;
}

}  // namespace

TEST(Profile, WarpSpecializedSchedule) {
  for (auto [steps, delay] : {std::pair{6, 1}, std::pair{7, 0}}) {
    constexpr int slots = 3;
    tp::profiler prof(test::dev());
    const long long n = steps * 8LL * 32;
    const auto hx = test::random_values<float>(n);
    auto x = tp::tensor<float, 2>::from_host(test::dev(), {steps * 8LL, 32}, hx);
    auto y = tp::tensor<float, 2>::from_host(test::dev(), {steps * 8LL, 32}, std::vector<float>(n, 0.0f));
    if (delay) tp::kernel(ws_map_kernel<slots, 1>{steps}, {.profile = &prof})(test::dev(), x, y);
    else tp::kernel(ws_map_kernel<slots, 0>{steps}, {.profile = &prof})(test::dev(), x, y);
    const auto hy = y.to_host();
    for (long long e = 0; e < n; ++e) ASSERT_EQ(hy[e], 2 * hx[e] + 1) << "element " << e;
    const auto tracks = prof.tracks();
    ASSERT_EQ(tracks.size(), 3u);
    EXPECT_EQ(tracks[0].name(), "compute 0");
    EXPECT_EQ(tracks[1].name(), "compute 1");
    EXPECT_EQ(tracks[2].name(), "memory");
    expect_sequence(tracks[0], ws_compute_schedule(steps, slots, delay));
    expect_sequence(tracks[1], ws_compute_schedule(steps, slots, delay));
    expect_sequence(tracks[2], ws_memory_schedule(steps, slots, delay));
    for (const auto& t : tracks) expect_monotonic(t);
  }
}

// ---- a chain of pipelines in a persistent loop -----------------------------------------------

namespace {

/// Per item i: out block i = sum of x blocks (i, 0) and (i, 1), one pipeline of 2 steps per
/// item chained over the loop; the compute context stores its block itself, in a user scope.
struct chain_kernel {
  static constexpr tp::warp_specialization<1, 40> ws{};
  static constexpr int num_threads = ws.num_threads;
  int items;
  TP_HD void operator()(tp::kernel_context& k, tp::gmem<float, 2, tile> x, tp::gmem<float, 2, tile> out) const {
    using view = tp::smem<float, tile>;
    view sum = k.alloc<view>();
    auto pipeline_of = [&](int item) {
      auto body = [&](auto at, auto xs) {
        if (at[0] == 0) tp::map([](float v) { return v; }, sum, xs);
        else tp::map([](float a, float b) { return a + b; }, sum, sum, xs);
      };
      auto context = tp::compute_context([&, item](auto pipeline) {
        pipeline();
        tp::profile_scope scope(k, "store the sum of an item");
        tp::commit_smem();
        tp::copy_smem_to_gmem(sum, out, tp::idx(item, 0));
        tp::wait_smem_to_gmem<0>();
      });
      return tp::emit_pipeline_warp_specialized(body, tp::grid(2),
                                                tp::in_specs(tp::spec<tile>([item](auto s) { return tp::idx(item, s); })),
                                                tp::out_specs(), ws, tp::max_concurrent_steps<2>, context);
    };
    auto alloc = pipeline_of(0).get_allocations(k, x);
    tp::warp_specialized_for(ws, k, 0, items, 1, [&](int item, tp::pipeline_state state, auto role) {
      pipeline_of(item)(k, alloc, state, role, x);
    });
  }
};

}  // namespace

TEST(Profile, ChainedPipelinesTilesAndScopes) {
  constexpr int items = 3;
  tp::profiler prof(test::dev());
  const auto hx = test::random_values<float>(items * 2 * 8 * 32);
  auto x = tp::tensor<float, 2>::from_host(test::dev(), {items * 8, 64}, hx);
  auto out = tp::tensor<float, 2>::from_host(test::dev(), {items * 8, 32}, std::vector<float>(items * 8 * 32, 0.0f));
  tp::kernel(chain_kernel{items}, {.profile = &prof})(test::dev(), x, out);
  const auto ho = out.to_host();
  for (int r = 0; r < items * 8; ++r)
    for (int c = 0; c < 32; ++c)
      ASSERT_EQ(ho[r * 32 + c], hx[r * 64 + c] + hx[r * 64 + 32 + c]) << "row " << r << ", column " << c;

  // Memory: each item's pipeline fetches its 2 blocks (after the previous item released
  // the slots); the last one then waits until both slots were released.
  std::vector<ev> memory, compute;
  for (int i = 0; i < items; ++i) {
    memory.push_back({K::tile, tp::profile_phase::begin, -1, i});
    for (int t = 0; t < 2; ++t) {
      if (i > 0) span(memory, K::wait_consumed, 0, t);
      memory.push_back(instant(K::fetch, 0, t));
    }
    if (i == items - 1) span(memory, K::wait_consumed, 0), span(memory, K::wait_consumed, 0);
    memory.push_back({K::tile, tp::profile_phase::end, -1, i});
    // Compute: two steps, then the context's epilogue with the user scope and its store.
    compute.push_back({K::tile, tp::profile_phase::begin, -1, i});
    for (int s = 0; s < 2; ++s) {
      span(compute, K::wait_ready, 0, s);
      span(compute, K::body, -1, s);
      compute.push_back(instant(K::release, 0, s));
    }
    compute.push_back({K::epilogue, tp::profile_phase::begin});
    span(compute, K::scope);
    compute.push_back({K::epilogue, tp::profile_phase::end});
    compute.push_back({K::tile, tp::profile_phase::end, -1, i});
  }
  const auto tracks = prof.tracks();
  ASSERT_EQ(tracks.size(), 2u);
  EXPECT_EQ(tracks[0].name(), "compute 0");
  EXPECT_EQ(tracks[1].name(), "memory");
  expect_sequence(tracks[0], compute);
  expect_sequence(tracks[1], memory);
  for (const auto& e : tracks[0].events)
    if (e.kind == K::scope && e.phase == tp::profile_phase::begin) EXPECT_EQ(e.name, "store the sum of") << "16 characters";
}

// ---- the trace file ----------------------------------------------------------------------------

namespace {

/// A strict JSON syntax check (RFC 8259 values), enough to know a trace viewer can load it.
class json_checker {
 public:
  explicit json_checker(const std::string& s) : s_(s) {}
  bool valid() {
    ws();
    if (!value()) return false;
    ws();
    return i_ == s_.size();
  }

 private:
  void ws() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\n' || s_[i_] == '\t' || s_[i_] == '\r')) ++i_;
  }
  bool lit(const char* w) {
    const std::size_t n = std::strlen(w);
    if (s_.compare(i_, n, w) != 0) return false;
    i_ += n;
    return true;
  }
  bool string() {
    if (s_[i_] != '"') return false;
    for (++i_; i_ < s_.size(); ++i_) {
      if (s_[i_] == '\\') ++i_;
      else if (s_[i_] == '"') return ++i_, true;
      else if (static_cast<unsigned char>(s_[i_]) < 0x20) return false;
    }
    return false;
  }
  bool number() {
    const std::size_t start = i_;
    if (s_[i_] == '-') ++i_;
    while (i_ < s_.size() && (std::isdigit(static_cast<unsigned char>(s_[i_])) || s_[i_] == '.' || s_[i_] == 'e' ||
                              s_[i_] == 'E' || s_[i_] == '+' || s_[i_] == '-'))
      ++i_;
    return i_ > start && std::isdigit(static_cast<unsigned char>(s_[i_ - 1]));
  }
  template <class F>
  bool list(char close, F&& item) {
    ++i_;
    ws();
    if (s_[i_] == close) return ++i_, true;
    while (true) {
      ws();
      if (!item()) return false;
      ws();
      if (s_[i_] == close) return ++i_, true;
      if (s_[i_] != ',') return false;
      ++i_;
    }
  }
  bool value() {
    if (i_ >= s_.size()) return false;
    switch (s_[i_]) {
      case '{':
        return list('}', [&] {
          if (!string()) return false;
          ws();
          if (s_[i_] != ':') return false;
          ++i_;
          ws();
          return value();
        });
      case '[': return list(']', [&] { return value(); });
      case '"': return string();
      case 't': return lit("true");
      case 'f': return lit("false");
      case 'n': return lit("null");
      default: return number();
    }
  }
  const std::string& s_;
  std::size_t i_ = 0;
};

std::size_t count(const std::string& s, const std::string& what) {
  std::size_t n = 0;
  for (std::size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
  return n;
}

}  // namespace

TEST(Profile, TraceIsJsonWithNamedTracks) {
  tp::profiler prof(test::dev());
  constexpr int steps = 6;
  const long long n = steps * 8LL * 32;
  auto x = tp::tensor<float, 2>::from_host(test::dev(), {steps * 8LL, 32}, test::random_values<float>(n));
  auto y = tp::tensor<float, 2>::from_host(test::dev(), {steps * 8LL, 32}, std::vector<float>(n, 0.0f));
  tp::kernel(ws_map_kernel<3, 1>{steps}, {.grid = {2}, .profile = &prof})(test::dev(), x, y);
  const std::string path = ::testing::TempDir() + "tilepipe_profile_trace.json";
  prof.write_trace(path);
  std::ifstream f(path);
  std::stringstream text;
  text << f.rdbuf();
  const std::string s = text.str();
  EXPECT_TRUE(json_checker(s).valid()) << s.substr(0, 2000);
  // Two CTAs (processes) of three named tracks; every span closed: as many complete events
  // as begin events recorded.
  EXPECT_EQ(count(s, "\"process_name\""), 2u);
  EXPECT_EQ(count(s, "\"name\": \"memory\""), 2u);
  EXPECT_EQ(count(s, "\"name\": \"compute 0\""), 2u);
  EXPECT_EQ(count(s, "\"name\": \"compute 1\""), 2u);
  std::size_t begins = 0, instants = 0;
  for (const auto& t : prof.tracks())
    for (const auto& e : t.events) begins += e.phase == tp::profile_phase::begin, instants += e.phase == tp::profile_phase::instant;
  EXPECT_EQ(count(s, "\"ph\": \"X\""), begins);
  EXPECT_EQ(count(s, "\"ph\": \"i\""), instants);
  std::remove(path.c_str());
}

// ---- a profiled matmul_ws -------------------------------------------------------------------------

TEST(Profile, MatmulWsTracks) {
  using T = tp::bf16;
  using kernel = matmul_ws_kernel<T, T, 128, 256, 3, b_layout::row_major>;
  const long long M = test::on_gpu() ? 4096 : 256, N = test::on_gpu() ? 4096 : 512, K = test::on_gpu() ? 4096 : 192;
  const auto ha = test::random_values<T>(M * K), hb = test::random_values<T>(K * N);
  auto a = tp::tensor<T, 2>::from_host(test::dev(), {M, K}, ha);
  auto b = tp::tensor<T, 2>::from_host(test::dev(), {K, N}, hb);
  const int sms = test::on_gpu() ? test::dev().multiprocessors() : 2;
  const auto kern = kernel::make(M, N, K);
  tp::profiler prof(test::dev());
  const auto c = tp::kernel(kern, kern.config(sms), tp::out_type<T>(M, N))(test::dev(), a, b);
  // Check a sample of rows against float64 (all of them in the interpreter).
  const auto hc = c.to_host();
  const long long row_step = test::on_gpu() ? 97 : 1;
  std::vector<T> got;
  std::vector<double> ref;
  for (long long i = 0; i < M; i += row_step)
    for (long long j = 0; j < N; ++j) {
      double r = 0;
      for (long long kk = 0; kk < K; ++kk) r += double(tp::to_float(ha[i * K + kk])) * tp::to_float(hb[kk * N + j]);
      ref.push_back(r), got.push_back(hc[i * N + j]);
    }
  EXPECT_LT(test::rel_error(got, ref), 1e-2);

  auto cfg = kern.config(sms);
  cfg.profile = &prof;
  (void)tp::kernel(kern, cfg, tp::out_type<T>(M, N))(test::dev(), a, b);
  const auto tracks = prof.tracks();
  const int ctas = cfg.grid[0];
  ASSERT_EQ(tracks.size(), static_cast<std::size_t>(3 * ctas));
  const long long tiles = ((M + 127) / 128) * ((N + 255) / 256), k_steps = (K + 63) / 64;
  long long tile_spans = 0, bodies = 0, fetches = 0;
  for (int i = 0; i < ctas; ++i) {
    EXPECT_EQ(tracks[3 * i].name(), "compute 0");
    EXPECT_EQ(tracks[3 * i + 1].name(), "compute 1");
    EXPECT_EQ(tracks[3 * i + 2].name(), "memory");
    for (int w = 0; w < 3; ++w) {
      const auto& t = tracks[3 * i + w];
      EXPECT_EQ(t.dropped, 0u);
      expect_monotonic(t);
      for (const auto& e : t.events) {
        if (e.kind == K::tile && e.phase == tp::profile_phase::begin && w == 0) ++tile_spans;
        if (e.kind == K::body && e.phase == tp::profile_phase::begin) ++bodies;
        if (e.kind == K::fetch) ++fetches;
      }
    }
  }
  EXPECT_EQ(tile_spans, tiles);  // every tile once (no stream-K workspace)
  // Every step in both compute warpgroups, an A and a B block fetched per step (none coarse).
  EXPECT_EQ(bodies, tp::profiling_steps ? 2 * tiles * k_steps : 0);
  EXPECT_EQ(fetches, tp::profiling_steps ? 2 * tiles * k_steps : 0);
}
