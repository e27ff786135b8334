// Where a persistent warp-specialised kernel's time goes, from the profiler's tracks of one
// launch (tp::profiler::tracks()): for each warpgroup track the time in its tiles, split on
// compute tracks into the mainloop (a tile's begin to its epilogue's begin) and the
// epilogue; the time in every other span, by kind ("wait ready", "wait consumed", ...) or
// by a scope's name; and the idle time outside the track's tiles (before the first, between
// tiles, after the last). Then, over the tracks of each role (compute, memory), the median,
// least, most and mean of each as a fraction of the kernel's time on this device (the first
// event of any track to the last). bench_collective_matmul_on writes it for the collective
// matmuls (issue 33: where their time beyond cuBLAS's goes); the interpreter test of their
// scopes checks it (tests/test_profile_collective.cu).
#pragma once

#include <tilepipe/host/profiler.cuh>

#include <algorithm>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

namespace bench {

/// One track's time per quantity, in the trace's unit (ns on the GPU, ticks in the interpreter).
using track_times = std::map<std::string, double>;

/// A quantity over the tracks of a role, as fractions of the kernel's time.
struct spread {
  double median = 0, min = 0, max = 0, mean = 0;
};

struct profile_summary {
  double kernel_time = 0;                    // the first event of any track to the last
  std::vector<track_times> compute, memory;  // one per track

  /// The quantity over the tracks (0 where a track has none of it).
  spread over(const std::vector<track_times>& tracks, const std::string& key) const {
    std::vector<double> v;
    for (const auto& t : tracks) {
      const auto it = t.find(key);
      v.push_back((it == t.end() ? 0.0 : it->second) / kernel_time);
    }
    spread s;
    if (v.empty() || kernel_time <= 0) return s;
    std::sort(v.begin(), v.end());
    s.median = v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
    s.min = v.front(), s.max = v.back();
    for (double x : v) s.mean += x / static_cast<double>(v.size());
    return s;
  }

  /// The quantities some track of the role has: the tile split and the idle time first,
  /// then the spans in name order.
  static std::vector<std::string> keys(const std::vector<track_times>& tracks) {
    const std::vector<std::string> first = {"tiles", "mainloop", "epilogue", "idle", "idle: before the first tile",
                                            "idle: between tiles", "idle: after the last tile"};
    std::vector<std::string> out;
    auto present = [&](const std::string& k) {
      return std::any_of(tracks.begin(), tracks.end(), [&](const track_times& t) { return t.count(k) != 0; });
    };
    for (const auto& k : first)
      if (present(k)) out.push_back(k);
    std::map<std::string, int> rest;
    for (const auto& t : tracks)
      for (const auto& [k, v] : t)
        if (std::find(first.begin(), first.end(), k) == first.end()) rest[k] = 0;
    for (const auto& [k, v] : rest) out.push_back(k);
    return out;
  }
};

/// The times of one track in a kernel that ran from `begin` to `end`.
inline track_times time_track(const tp::profile_track& t, double begin, double end) {
  track_times out;
  const bool compute = t.role != tp::profile_role::memory;
  std::vector<const tp::profiled_event*> open;  // begins not yet ended
  double tiles = 0, first_tile = end, last_tile = begin, epilogue_begin = -1;
  if (compute) out["mainloop"] = 0, out["epilogue"] = 0;
  for (const auto& e : t.events) {
    if (e.phase == tp::profile_phase::begin) {
      open.push_back(&e);
      if (e.kind == tp::profile_kind::epilogue && epilogue_begin < 0) epilogue_begin = e.time;
      continue;
    }
    if (e.phase != tp::profile_phase::end) continue;
    // An end closes the innermost open begin of its kind (as in profiler::write_trace).
    auto it = std::find_if(open.rbegin(), open.rend(), [&](const tp::profiled_event* b) { return b->kind == e.kind; });
    if (it == open.rend()) continue;  // its begin was dropped (a full track)
    const tp::profiled_event& b = **it;
    open.erase(std::next(it).base());
    const double d = e.time - b.time;
    if (e.kind == tp::profile_kind::tile) {
      tiles += d;
      first_tile = std::min(first_tile, b.time), last_tile = std::max(last_tile, e.time);
      if (compute) out["mainloop"] += (epilogue_begin >= 0 ? epilogue_begin : e.time) - b.time;
      epilogue_begin = -1;
    } else {
      out[b.name] += d;  // the kind's name, or the scope's
    }
  }
  out["tiles"] = tiles;
  if (tiles > 0) {
    out["idle"] = (end - begin) - tiles;
    out["idle: before the first tile"] = first_tile - begin;
    out["idle: after the last tile"] = end - last_tile;
    out["idle: between tiles"] = (last_tile - first_tile) - tiles;
  } else {
    out["idle"] = end - begin;
  }
  return out;
}

inline profile_summary summarize(const std::vector<tp::profile_track>& tracks) {
  double begin = 0, end = 0;
  bool any = false;
  for (const auto& t : tracks)
    for (const auto& e : t.events) {
      begin = any ? std::min(begin, e.time) : e.time, end = any ? std::max(end, e.time) : e.time;
      any = true;
    }
  profile_summary s;
  s.kernel_time = end - begin;
  for (const auto& t : tracks) (t.role == tp::profile_role::memory ? s.memory : s.compute).push_back(time_track(t, begin, end));
  return s;
}

/// The summary as a table: per role, each quantity's median [least, most] and mean over
/// the tracks in % of the kernel's time, and the median in microseconds (unit_per_us: the
/// trace's units per microsecond, 1000 on the GPU).
inline std::string format_summary(const profile_summary& s, double unit_per_us) {
  std::string out;
  char line[256];
  std::snprintf(line, sizeof line, "  %% of the kernel's %.1f us per warpgroup track: median [least, most] and mean over the tracks; median us\n",
                s.kernel_time / unit_per_us);
  out += line;
  for (const auto* role : {&s.compute, &s.memory}) {
    if (role->empty()) continue;
    std::snprintf(line, sizeof line, "  %s (%zu tracks)\n", role == &s.compute ? "compute warpgroups" : "memory warpgroups",
                  role->size());
    out += line;
    for (const auto& k : profile_summary::keys(*role)) {
      const spread v = s.over(*role, k);
      std::snprintf(line, sizeof line, "    %-30s %6.1f%% [%5.1f, %5.1f] mean %5.1f%%  %9.1f us\n", k.c_str(), 100 * v.median,
                    100 * v.min, 100 * v.max, 100 * v.mean, v.median * s.kernel_time / unit_per_us);
      out += line;
    }
  }
  return out;
}

/// The summary as JSON: {"kernel_us", "compute": {quantity: {median, min, max, mean}}, "memory": ...}.
inline std::string summary_json(const profile_summary& s, double unit_per_us) {
  std::string out = "{\"kernel_us\": " + std::to_string(s.kernel_time / unit_per_us);
  for (const auto* role : {&s.compute, &s.memory}) {
    out += std::string(", \"") + (role == &s.compute ? "compute" : "memory") + "\": {";
    bool first = true;
    for (const auto& k : profile_summary::keys(*role)) {
      const spread v = s.over(*role, k);
      char buf[160];
      std::snprintf(buf, sizeof buf, "\"median\": %.5f, \"min\": %.5f, \"max\": %.5f, \"mean\": %.5f", v.median, v.min, v.max,
                    v.mean);
      out += (first ? "\"" : ", \"") + k + "\": {" + buf + "}";
      first = false;
    }
    out += "}";
  }
  return out + "}";
}

/// Writes a profiled launch's timeline (its first 4 CTAs) and summary to
/// dir/name.{json,summary.txt}, and prints the summary.
inline void write_profile(const tp::profiler& prof, const std::string& dir, const std::string& name, double profiled_ms) {
  const auto tracks = prof.tracks();
  long long records = 0, dropped = 0;
  for (const auto& t : tracks) records += t.records, dropped += t.dropped;
  prof.write_trace(dir + "/" + name + ".json", 4);
  char head[300];
  std::snprintf(head, sizeof head, "%s: profiled (%s), %.3f ms with the profiler; %zu tracks, %lld records, %lld dropped\n",
                name.c_str(), tp::profiling_steps ? "every step" : "coarse", profiled_ms, tracks.size(), records, dropped);
  const std::string text = head + format_summary(summarize(tracks), 1000.0);
  if (FILE* f = std::fopen((dir + "/" + name + ".summary.txt").c_str(), "w")) std::fputs(text.c_str(), f), std::fclose(f);
  std::printf("%s", text.c_str());
}

}  // namespace bench
