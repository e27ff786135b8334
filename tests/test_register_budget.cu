// The compile-time register budget check (core/register_budget.cuh). Splits that do not add
// up must not compile: tests/check_compile_fail.cmake compiles such snippets and checks the
// diagnostics (ctest interp.register_budget_compile_fail).
#include "test_util.hpp"

#include <tilepipe/core/register_budget.cuh>

namespace {

constexpr tp::register_budget_error check(std::initializer_list<int> regs) {
  return tp::check_register_budget(regs.begin(), static_cast<int>(regs.size()));
}

// Splits known to work (REFERENCE.md): memory warpgroup first here, compute ones after.
static_assert(tp::register_budget<40, 232, 232>::ok);
static_assert(tp::register_budget<24, 240, 240>::ok);
static_assert(tp::register_budget<32, 160, 160, 160>::ok);
static_assert(tp::register_budget<56, 256>::ok);
static_assert(tp::register_budget<128>::ok);
static_assert(tp::register_budget<40, 232, 232>::per_thread_sum == 504);

static_assert(check({40, 232, 232}) == tp::register_budget_error::none);
static_assert(check({40, 236, 232}) == tp::register_budget_error::not_multiple_of_8);
static_assert(check({16, 240, 240}) == tp::register_budget_error::out_of_range);
static_assert(check({40, 264}) == tp::register_budget_error::out_of_range);
static_assert(check({40, 240, 240}) == tp::register_budget_error::over_budget);  // 128 * 520 > 65536
static_assert(check({128, 128, 128, 128}) == tp::register_budget_error::none);  // exactly 65536
static_assert(check({128, 128, 128, 136}) == tp::register_budget_error::over_budget);

static_assert(tp::compute_registers(40, 2) == 232);
static_assert(tp::compute_registers(24, 2) == 240);
static_assert(tp::compute_registers(32, 3) == 160);
static_assert(tp::compute_registers(56, 1) == 256);

// Every split compute_registers proposes passes the check.
constexpr bool all_proposed_splits_fit() {
  for (int compute = 1; compute <= 3; ++compute)
    for (int memory = 24; memory <= 256; memory += 8) {
      const int c = tp::compute_registers(memory, compute);
      int regs[4] = {memory, c, c, c};
      if (c >= 24 && tp::check_register_budget(regs, compute + 1) != tp::register_budget_error::none) return false;
    }
  return true;
}
static_assert(all_proposed_splits_fit());

TEST(RegisterBudget, ChecksAreCompileTime) {
  // Everything above is a static_assert; this test exists so the file shows in the test list.
  EXPECT_EQ(check({40, 240, 240}), tp::register_budget_error::over_budget);
}

}  // namespace
