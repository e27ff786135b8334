// Compile-time checks that a warp-specialised kernel's register split adds up.
//
// setmaxnreg moves registers between the warpgroups of a CTA: each warpgroup asks for a
// per-thread count that must be a multiple of 8 in 24..256, and the counts of all
// warpgroups together (128 threads each) must fit in the SM's 65536 registers, or the
// increasing warpgroups wait forever for registers nobody frees: a hang, not an error.
// Other libraries shipped such splits; tilepipe rejects them when the kernel is compiled:
//     static_assert(tp::register_budget<40, 232, 232>::ok);   // memory WG + 2 compute WGs
// A failed check instantiates a named diagnostic whose template arguments carry the
// numbers (the warpgroup and its count, or the total), next to a message saying the rule.
#pragma once

#include "config.cuh"

#include <utility>

namespace tilepipe {

/// Registers of one SM (and the most one CTA may hold); 512 per thread of a warpgroup.
inline constexpr int sm_registers = 65536;
inline constexpr int min_warpgroup_registers = 24;   // setmaxnreg's range
inline constexpr int max_warpgroup_registers = 256;

enum class register_budget_error { none, not_multiple_of_8, out_of_range, over_budget };

/// What is wrong with per-thread register counts `regs[0..n)` (one per warpgroup), if anything.
TP_HD constexpr register_budget_error check_register_budget(const int* regs, int n) {
  long long total = 0;
  for (int i = 0; i < n; ++i) {
    if (regs[i] % 8 != 0) return register_budget_error::not_multiple_of_8;
    if (regs[i] < min_warpgroup_registers || regs[i] > max_warpgroup_registers) return register_budget_error::out_of_range;
    total += regs[i];
  }
  return static_cast<long long>(warpgroup_size) * total <= sm_registers ? register_budget_error::none
                                                                        : register_budget_error::over_budget;
}

/// The count each of `compute` compute warpgroups can raise itself to when the memory
/// warpgroup lowers itself to `memory` registers: the rest of the 512 per-thread registers,
/// shared equally, rounded down to a multiple of 8, at most 256 (40 with 2 compute
/// warpgroups gives 232; 24 with 2 gives 240; 56 with 1 gives 256).
TP_HD constexpr int compute_registers(int memory, int compute) {
  const int share = (sm_registers / warpgroup_size - memory) / compute / 8 * 8;
  return share < max_warpgroup_registers ? share : max_warpgroup_registers;
}

namespace diagnostic {
template <int Warpgroup, int Registers>
struct register_count_not_multiple_of_8 {
  static_assert(Registers % 8 == 0,
                "tilepipe: register budget: the register count of warpgroup Warpgroup (setmaxnreg) must be a multiple "
                "of 8 (see the template arguments of register_count_not_multiple_of_8)");
  static constexpr bool ok = true;
};
template <int Warpgroup, int Registers>
struct register_count_out_of_range {
  static_assert(Registers >= min_warpgroup_registers && Registers <= max_warpgroup_registers,
                "tilepipe: register budget: the register count of warpgroup Warpgroup must be in 24..256, the range "
                "of setmaxnreg (see the template arguments of register_count_out_of_range)");
  static constexpr bool ok = true;
};
template <int RegistersPerThreadSummed, int Total>
struct register_budget_over_sm {
  static_assert(Total <= sm_registers,
                "tilepipe: register budget: 128 threads x the sum of the warpgroups' register counts exceeds the 65536 "
                "registers of an SM; the warpgroups that raise their count would wait forever (see the template "
                "arguments of register_budget_over_sm: the summed per-thread counts and their total)");
  static constexpr bool ok = true;
};
}  // namespace diagnostic

/// Per-warpgroup register counts (in warpgroup order) that must add up; ::ok is true, or
/// compilation stops with a diagnostic naming the rule and the numbers.
template <int... Regs>
struct register_budget {
  static_assert(sizeof...(Regs) >= 1, "tilepipe: register budget: give one register count per warpgroup");
  static constexpr int warpgroups = sizeof...(Regs);
  static constexpr int per_thread_sum = (0 + ... + Regs);

 private:
  template <int... I>
  static constexpr bool each_ok(std::integer_sequence<int, I...>) {
    return ((diagnostic::register_count_not_multiple_of_8<I, Regs>::ok &&
             diagnostic::register_count_out_of_range<I, Regs>::ok) && ...);
  }

 public:
  static constexpr bool ok =
      each_ok(std::make_integer_sequence<int, sizeof...(Regs)>{}) &&
      diagnostic::register_budget_over_sm<per_thread_sum, warpgroup_size * per_thread_sum>::ok;
};

}  // namespace tilepipe
