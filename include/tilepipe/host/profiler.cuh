// The in-kernel profiler's host side: the buffer a launch records into, its decoding, and
// a Chrome-trace / Perfetto JSON writer (open it at ui.perfetto.dev or chrome://tracing;
// scripts/trace-png draws a window of it as a PNG).
//
//     #define TILEPIPE_PROFILE            // before including tilepipe: the kernels record
//     tp::profiler prof(dev);             // events_per_track = 8192 by default
//     tp::kernel(k, {.grid = {...}, .profile = &prof})(dev, a, b);
//     prof.write_trace("matmul.json");    // one process per CTA, one track per warpgroup
//
// A profiler holds the events of the last launch it was bound to. On the GPU, event times
// are SM cycles converted to nanoseconds with the clock rate the tracks' anchors measure
// (cycles and %globaltimer read together at each track's start and end), and placed on the
// GPU-wide timeline by the anchors. The interpreter stamps events with a logical clock of
// the CTA (one tick per event): the trace shows the order of operations, not durations.
#pragma once

#include "../core/error.cuh"
#include "../core/profile_format.cuh"
#include "device.cuh"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

namespace tilepipe {

/// One decoded event; `operand` is the input's position for input events (fetch, wait
/// ready, wait consumed, release) and the output's for output events; `time` in nanoseconds from the launch's first event (GPU) or in
/// ticks of the CTA's logical clock (interpreter).
struct profiled_event {
  double time = 0;
  profile_kind kind{};
  profile_phase phase{};
  int operand = -1;
  long long step = -1;
  std::string name;  // the kind's name, or a user scope's
};

/// The events of one warpgroup of one CTA.
struct profile_track {
  int cta[3] = {};
  int sm = 0;
  int warpgroup = 0;
  profile_role role = profile_role::warpgroup;
  int role_index = 0;
  std::uint32_t records = 0;  // records written (a span recorded whole is one record, two events)
  std::uint32_t dropped = 0;  // records that did not fit
  std::vector<profiled_event> events;

  /// "memory", "compute 1", "warpgroup 0".
  std::string name() const {
    if (role == profile_role::memory) return "memory";
    return (role == profile_role::compute ? "compute " : "warpgroup ") + std::to_string(role_index);
  }
};

class profiler {
 public:
  explicit profiler(const device& dev, std::uint32_t events_per_track = 8192)
      : gpu_(dev.is_gpu()), capacity_(events_per_track) {
    if (events_per_track == 0) throw error("tilepipe: a profiler needs room for at least one event per track");
  }
  ~profiler() { release(); }
  profiler(const profiler&) = delete;
  profiler& operator=(const profiler&) = delete;

  /// Called by the launch: a zeroed buffer for `ctas` CTAs of `warpgroups` warpgroups.
  profile_buffer prepare(bool gpu, long long ctas, int warpgroups, const std::string& kernel) {
    if (gpu != gpu_)
      throw error(std::string("tilepipe: launch option profile: the profiler was made for the ") +
                  (gpu_ ? "GPU" : "interpreter") + " but the launch runs on the " + (gpu ? "GPU" : "interpreter"));
    tracks_ = ctas * warpgroups;
    kernel_ = kernel;
    const std::size_t bytes = static_cast<std::size_t>(tracks_) * profile_track_bytes(capacity_);
    // The buffer is cleared only when it is new or the generation wraps, not per launch: a
    // clear would run on the GPU between the launches being measured.
    if (bytes > bytes_) {
      release();
      allocate(bytes);
      clear();
    }
    if (++generation_ == 0) clear(), generation_ = 1;
    return {data_, capacity_, generation_};
  }

  /// The last launch's tracks, in CTA order then warpgroup order (waits for the GPU).
  std::vector<profile_track> tracks() const {
    std::vector<unsigned char> raw = read_back();
    const std::uint64_t stride = profile_track_bytes(capacity_);
    std::vector<const profile_track_header*> headers;
    for (long long t = 0; t < tracks_; ++t) {
      const auto* h = reinterpret_cast<const profile_track_header*>(raw.data() + t * stride);
      if (h->generation == generation_) headers.push_back(h);
    }
    const double ns_per_cycle = gpu_ ? cycle_period(headers) : 1.0;
    std::uint64_t origin = ~0ull;
    for (const auto* h : headers) origin = std::min(origin, h->start_global);
    std::vector<profile_track> out;
    for (const auto* h : headers) {
      profile_track t;
      for (int a = 0; a < 3; ++a) t.cta[a] = h->cta[a];
      t.sm = h->sm, t.warpgroup = h->warpgroup, t.role = h->role, t.role_index = h->role_index, t.dropped = h->dropped;
      const auto* e = reinterpret_cast<const profile_event*>(h + 1);
      const std::uint32_t n = std::min(h->count, capacity_);
      t.records = n;
      // Clock values: 32 bits on the device, extended from the track's start.
      auto at = [&](std::uint32_t low, std::uint32_t before) {
        const std::uint64_t clock = h->start_clock + static_cast<std::uint32_t>(low - static_cast<std::uint32_t>(h->start_clock));
        return static_cast<double>(h->start_global - origin) +
               (static_cast<double>(clock - h->start_clock) - static_cast<double>(before)) * ns_per_cycle;
      };
      for (std::uint32_t i = 0; i < n; ++i) {
        profiled_event d;
        d.kind = e[i].kind(), d.operand = e[i].operand(), d.step = e[i].step;
        d.name = profile_kind_name(d.kind);
        const bool named = d.kind == profile_kind::scope && e[i].phase() == profile_phase::begin;
        if (named && i + 1 < n) {
          char text[profile_name_chars + 1] = {};
          std::memcpy(text, &e[i + 1], profile_name_chars);
          d.name = text;
        }
        if (e[i].phase() == profile_phase::span) {  // a whole span: its begin and its end
          d.phase = profile_phase::begin, d.time = at(e[i].time, e[i].lead);
          t.events.push_back(d);
          d.phase = profile_phase::end;
        } else {
          d.phase = e[i].phase();
        }
        d.time = at(e[i].time, 0);
        t.events.push_back(std::move(d));
        if (named) ++i;  // the name record
      }
      // A span recorded whole comes after what happened inside it: order by time (stable,
      // so events at the same time keep their order).
      std::stable_sort(t.events.begin(), t.events.end(),
                       [](const profiled_event& a, const profiled_event& b) { return a.time < b.time; });
      out.push_back(std::move(t));
    }
    return out;
  }

  /// Events that did not fit, over all tracks of the last launch.
  long long dropped() const {
    long long n = 0;
    for (const auto& t : tracks()) n += t.dropped;
    return n;
  }

  /// Writes the last launch as Chrome-trace JSON: a process per CTA ("CTA (x, y, z) on SM s"),
  /// a thread per warpgroup named by role; spans as complete events, instants as instants.
  /// max_ctas >= 0 keeps only the first max_ctas CTAs (a persistent kernel's full trace
  /// holds millions of events).
  void write_trace(const std::string& path, int max_ctas = -1) const {
    std::ofstream f(path);
    if (!f) throw error("tilepipe: cannot write the trace file " + path);
    f << "{\"displayTimeUnit\": \"ns\", \"otherData\": {\"kernel\": \"" << escape(kernel_) << "\", \"clock\": \""
      << (gpu_ ? "GPU: microseconds" : "interpreter: logical ticks, shown as microseconds") << "\"},\n\"traceEvents\": [\n";
    bool first = true;
    auto emit = [&](const std::string& s) {
      f << (first ? "" : ",\n") << s;
      first = false;
    };
    int pid = -1, last_cta[3] = {-1, -1, -1};
    for (const auto& t : tracks()) {
      if (!std::equal(t.cta, t.cta + 3, last_cta)) {
        if (max_ctas >= 0 && pid + 1 >= max_ctas) break;
        ++pid;
        std::copy(t.cta, t.cta + 3, last_cta);
        emit(meta(pid, -1, "process_name", "CTA (" + std::to_string(t.cta[0]) + ", " + std::to_string(t.cta[1]) + ", " +
                                               std::to_string(t.cta[2]) + ") on SM " + std::to_string(t.sm)));
        emit("{\"ph\": \"M\", \"name\": \"process_sort_index\", \"pid\": " + std::to_string(pid) +
             ", \"args\": {\"sort_index\": " + std::to_string(pid) + "}}");
      }
      const int tid = t.warpgroup;
      emit(meta(pid, tid, "thread_name", t.name()));
      emit("{\"ph\": \"M\", \"name\": \"thread_sort_index\", \"pid\": " + std::to_string(pid) + ", \"tid\": " +
           std::to_string(tid) + ", \"args\": {\"sort_index\": " + std::to_string(sort_key(t)) + "}}");
      // Spans: an end closes the innermost open begin of its kind (unmatched ones, from a
      // truncated track, are left out).
      std::vector<const profiled_event*> open;
      for (const auto& e : t.events) {
        if (e.phase == profile_phase::begin) {
          open.push_back(&e);
        } else if (e.phase == profile_phase::end) {
          for (auto it = open.rbegin(); it != open.rend(); ++it)
            if ((*it)->kind == e.kind) {
              const profiled_event& b = **it;
              emit("{\"ph\": \"X\", \"name\": \"" + escape(b.name) + "\", \"pid\": " + std::to_string(pid) +
                   ", \"tid\": " + std::to_string(tid) + ", \"ts\": " + micros(b.time) +
                   ", \"dur\": " + micros(e.time - b.time) + args(b) + "}");
              open.erase(std::next(it).base());
              break;
            }
        } else {
          emit("{\"ph\": \"i\", \"s\": \"t\", \"name\": \"" + escape(e.name) + "\", \"pid\": " + std::to_string(pid) +
               ", \"tid\": " + std::to_string(tid) + ", \"ts\": " + micros(e.time) + args(e) + "}");
        }
      }
    }
    f << "\n]}\n";
    if (!f) throw error("tilepipe: writing the trace file " + path + " failed");
  }

  /// Whether event times are logical ticks (the interpreter) rather than nanoseconds.
  bool logical_clock() const { return !gpu_; }

 private:
  /// Nanoseconds per SM cycle, pooled over every track's anchors (the clock rate is the
  /// same on every SM; one track may be too short for %globaltimer's resolution).
  static double cycle_period(const std::vector<const profile_track_header*>& headers) {
    double cycles = 0, ns = 0;
    for (const auto* h : headers)
      if (h->end_global > h->start_global && h->end_clock > h->start_clock)
        cycles += static_cast<double>(h->end_clock - h->start_clock), ns += static_cast<double>(h->end_global - h->start_global);
    return cycles > 0 ? ns / cycles : 1.0;
  }

  static int sort_key(const profile_track& t) {
    return t.role == profile_role::memory ? 0 : 1 + t.warpgroup;  // the memory track first
  }

  /// A trace time: microseconds on the GPU; the interpreter's ticks as they are.
  std::string micros(double t) const {
    char s[32];
    std::snprintf(s, sizeof s, "%.3f", gpu_ ? t / 1000.0 : t);
    return s;
  }

  static std::string args(const profiled_event& e) {
    std::string s;
    if (e.operand >= 0) s += "\"operand\": " + std::to_string(e.operand);
    if (e.step >= 0) s += std::string(s.empty() ? "" : ", ") + (e.kind == profile_kind::tile ? "\"item\": " : "\"step\": ") +
                          std::to_string(e.step);
    return s.empty() ? "" : ", \"args\": {" + s + "}";
  }

  static std::string meta(int pid, int tid, const char* what, const std::string& name) {
    return "{\"ph\": \"M\", \"name\": \"" + std::string(what) + "\", \"pid\": " + std::to_string(pid) +
           (tid >= 0 ? ", \"tid\": " + std::to_string(tid) : "") + ", \"args\": {\"name\": \"" + escape(name) + "\"}}";
  }

  static std::string escape(const std::string& s) {
    std::string o;
    for (char c : s) {
      if (c == '"' || c == '\\') o += '\\', o += c;
      else if (static_cast<unsigned char>(c) < 0x20) o += ' ';
      else o += c;
    }
    return o;
  }

  std::vector<unsigned char> read_back() const {
    const std::size_t bytes = static_cast<std::size_t>(tracks_) * profile_track_bytes(capacity_);
    std::vector<unsigned char> raw(bytes);
    if (bytes == 0) return raw;
    if (gpu_) {
#if TP_HAS_CUDA_COMPILER
      TP_CUDA_CHECK(cudaDeviceSynchronize());
      TP_CUDA_CHECK(cudaMemcpy(raw.data(), data_, bytes, cudaMemcpyDeviceToHost));
#endif
    } else {
      std::memcpy(raw.data(), data_, bytes);
    }
    return raw;
  }

  void allocate(std::size_t bytes) {
    if (gpu_) {
#if TP_HAS_CUDA_COMPILER
      void* p = nullptr;
      TP_CUDA_CHECK(cudaMalloc(&p, bytes));
      data_ = static_cast<unsigned char*>(p);
#endif
    } else {
      data_ = static_cast<unsigned char*>(std::aligned_alloc(64, (bytes + 63) / 64 * 64));
      if (!data_) throw error("tilepipe: the profiler could not allocate its buffer");
    }
    bytes_ = bytes;
  }

  void clear() {
    if (gpu_) {
#if TP_HAS_CUDA_COMPILER
      TP_CUDA_CHECK(cudaMemset(data_, 0, bytes_));
#endif
    } else {
      std::memset(data_, 0, bytes_);
    }
  }

  void release() {
    if (!data_) return;
    if (gpu_) {
#if TP_HAS_CUDA_COMPILER
      cudaFree(data_);
#endif
    } else {
      std::free(data_);
    }
    data_ = nullptr;
    bytes_ = 0;
  }

  bool gpu_;
  std::uint32_t capacity_;
  unsigned char* data_ = nullptr;
  std::size_t bytes_ = 0;
  long long tracks_ = 0;
  std::uint16_t generation_ = 0;  // of the last launch
  std::string kernel_;
};

}  // namespace tilepipe
