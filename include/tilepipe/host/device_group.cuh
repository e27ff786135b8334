// The devices of a collective launch and the memory they share.
//
//     auto group = tp::device_group::simulated(3);          // the interpreter: 3 devices in this process
//     const auto& group = nccl.devices();                   // the GPU: this process's rank (host/nccl.cuh)
//     tp::symmetric_tensor<bf16, 2> slots(group, {rows, k}, "received shards");
//     for (const tp::device& dev : group.local())            // every device here, or this process's GPU
//       tp::kernel(k, cfg)(dev, a[dev.index()], slots);       // slots binds to a tp::symmetric<...> parameter
//
// A group's device has an index and a count (the device axis, kernel_context::device_index).
// A symmetric_tensor has one copy of the same shape on every device; a kernel reaches a
// peer's copy with tp::remote. In the interpreter, a launch on a device of a group runs when
// every device of the group has launched (backend/interpret/devices.hpp); on the GPU each
// process launches on its own GPU and the kernels meet through the symmetric memory.
#pragma once

#include "../core/error.cuh"
#include "../core/refs.cuh"
#include "device.cuh"
#include "tensor.cuh"

#include <array>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace tilepipe {

/// Memory of the same size on every device of a group: each device's base address as this
/// process addresses it, and what frees it.
struct symmetric_allocation {
  std::vector<void*> bases;
  std::shared_ptr<void> owner;
};

class device_group {
 public:
  using allocator = std::function<symmetric_allocation(std::size_t bytes, const std::string& name)>;
  /// Every process's values, process after process (collective; values of equal length).
  using gatherer = std::function<std::vector<long long>(const std::vector<long long>& values)>;
  /// A named value that every process of a group must pass alike (require_same).
  struct setting {
    std::string name;
    long long value;
  };

  /// `count` simulated devices in this process (1 to max_devices), launched on in turn; each
  /// keeps the interpreter options of `prototype`.
  static device_group simulated(int count, const device& prototype = device::open(backend::interpret)) {
    if (count < 1 || count > max_devices)
      detail::throw_formatted("device_group::simulated(%d): a group has 1 to %d devices", count, max_devices);
    if (prototype.is_gpu()) throw error("tilepipe: device_group::simulated needs an interpreter device");
    auto sim = std::make_shared<interpret::simulated_devices>(count);
    std::vector<device> devs;
    for (int r = 0; r < count; ++r) devs.push_back(prototype.in_group(r, count, sim));
    return device_group(count, std::move(devs), [sim, count](std::size_t bytes, const std::string& name) {
      symmetric_allocation a;
      for (int r = 0; r < count; ++r) {
        void* p = std::aligned_alloc(4096, (bytes + 4095) / 4096 * 4096);
        std::memset(p, 0, bytes);
        sim->memory().add_window(r, p, bytes, name);
        a.bases.push_back(p);
      }
      a.owner = std::shared_ptr<void>(nullptr, [sim, bases = a.bases](void*) {
        for (void* p : bases) sim->memory().remove_window(p), std::free(p);
      });
      return a;
    });
  }

  /// A group whose devices `local` (those this process launches on) belong to `count`
  /// devices in all; `allocate` makes symmetric memory and `gather` exchanges values
  /// (collective: every process calls them in the same order; a group of one process needs
  /// no `gather`).
  device_group(int count, std::vector<device> local, allocator allocate, gatherer gather = {})
      : count_(count), local_(std::move(local)), allocate_(std::move(allocate)), gather_(std::move(gather)) {}

  int size() const { return count_; }
  /// The devices this process launches on: every device of a simulated group, this
  /// process's GPU in a GPU group.
  const std::vector<device>& local() const { return local_; }
  /// Symmetric memory of `bytes` on every device, zeroed.
  symmetric_allocation allocate(std::size_t bytes, const std::string& name) const { return allocate_(bytes, name); }

  /// Throws, on every process alike, unless every process of the group passed the same
  /// settings (collective). A collective kernel's plan must be the same everywhere: one
  /// process with another shape or CTA count would leave its peers waiting for signals
  /// that never come. In one process (a simulated group) there is one plan: nothing to do.
  void require_same(const std::string& what, const std::vector<setting>& settings) const {
    if (!gather_) return;
    constexpr std::size_t slots = 64;  // a count, then the values
    if (settings.size() >= slots)
      detail::throw_formatted("%s: %zu settings to compare; at most %zu", what.c_str(), settings.size(), slots - 1);
    std::vector<long long> mine(slots, 0);
    mine[0] = static_cast<long long>(settings.size());
    for (std::size_t i = 0; i < settings.size(); ++i) mine[i + 1] = settings[i].value;
    const std::vector<long long> all = gather_(mine);
    for (int r = 1; r < count_; ++r) {
      const long long* theirs = all.data() + static_cast<std::size_t>(r) * slots;
      if (theirs[0] != all[0])
        detail::throw_formatted("%s: device %d passed %lld settings, device 0 %lld", what.c_str(), r, theirs[0], all[0]);
      for (std::size_t i = 0; i < settings.size(); ++i)
        if (theirs[i + 1] != all[i + 1])
          detail::throw_formatted("%s: the devices disagree: %s is %lld on device %d and %lld on device 0 (every "
                                  "process must make it alike)",
                                  what.c_str(), settings[i].name.c_str(), theirs[i + 1], r, all[i + 1]);
    }
  }

 private:
  int count_;
  std::vector<device> local_;
  allocator allocate_;
  gatherer gather_;
};

/// A row-major tensor with one copy on every device of a group (a symmetric buffer: on the
/// GPU an NCCL window), zeroed. Binds to a kernel's tp::symmetric<T, R, tiles...> parameter.
template <class T, int R>
class symmetric_tensor {
 public:
  symmetric_tensor(const device_group& group, std::array<long long, R> shape, const std::string& name)
      : shape_(shape), gpu_(group.local().at(0).is_gpu()) {
    long long n = 1;
    for (int d = 0; d < R; ++d) {
      TP_REQUIRE(shape[d] >= 0, "symmetric tensor '%s': dimension %d has negative extent %lld", name.c_str(), d,
                 shape[d]);
      n *= shape[d];
    }
    alloc_ = group.allocate(static_cast<std::size_t>(n) * sizeof(T), name);
  }

  int devices() const { return static_cast<int>(alloc_.bases.size()); }
  /// Device d's copy (as this process addresses it: on the GPU, through NVLink).
  tensor_view<T, R> on(int d) const { return tensor_view<T, R>::wrap(static_cast<T*>(alloc_.bases.at(d)), shape_, gpu_); }

 private:
  std::array<long long, R> shape_;
  bool gpu_;
  symmetric_allocation alloc_;
};

}  // namespace tilepipe
