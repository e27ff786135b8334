// Helpers for the interpreter's checking tests: run a launch on the interpreter with a
// chosen copy mode and return the error it reports, if any.
#pragma once

#include "test_util.hpp"

#include <string>

namespace test {

using copy_mode = tp::interpret::copy_mode;
inline constexpr copy_mode all_copy_modes[] = {copy_mode::at_wait, copy_mode::eager, copy_mode::shuffled};

inline const char* mode_name(copy_mode m) {
  return m == copy_mode::at_wait ? "at_wait" : m == copy_mode::eager ? "eager" : "shuffled";
}

/// An interpreter device with the given copy mode (race detection on, the default).
inline tp::device interpreter(copy_mode m = copy_mode::at_wait, std::uint64_t seed = 7) {
  auto d = tp::device::open(tp::backend::interpret);
  d.interpreter.copies = m;
  d.interpreter.seed = seed;
  return d;
}

}  // namespace test

/// The planted bugs are interpreter tests: on the GPU they would hang or corrupt memory.
#define TP_INTERPRETER_ONLY() \
  if (test::on_gpu()) GTEST_SKIP() << "interpreter-only test"
