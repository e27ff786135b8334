// Errors. Static facts fail at compile time (static_assert with a message, or an
// instantiation of a named diagnostic template whose arguments carry the numbers);
// runtime facts throw tilepipe::error on the host and in the interpreter, and print then
// trap on the GPU. The text always names the problem and the numbers involved.
#pragma once

#include "config.cuh"

#include <cstdarg>
#include <cstdio>
#include <stdexcept>
#include <string>

namespace tilepipe {

/// Every runtime error tilepipe reports on the host or in the interpreter.
class error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

namespace detail {

[[noreturn]] inline void throw_formatted(const char* fmt, ...) {
  char buf[2048];
  va_list args;
  va_start(args, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, args);
  va_end(args);
  throw error(std::string("tilepipe: ") + buf);
}

}  // namespace detail

namespace diagnostic {
// Named diagnostics for static facts: a failed requirement instantiates one of these, so
// the compiler prints the numbers in the template arguments next to the message.
template <std::size_t RequiredBytes, std::size_t CapacityBytes>
struct smem_over_budget {
  static_assert(RequiredBytes <= CapacityBytes,
                "tilepipe: shared memory over budget: RequiredBytes > CapacityBytes (see the "
                "template arguments of smem_over_budget in this diagnostic)");
  static constexpr bool ok = true;
};
}  // namespace diagnostic

}  // namespace tilepipe

/// Fails with a formatted message: throws on the host and in the interpreter; on the GPU
/// traps, printing the message first only in debug builds (TILEPIPE_DEBUG): a printf is
/// a function call, and a call anywhere in a kernel makes ptxas serialise every wgmma.
#if TP_DEVICE_PASS && defined(TILEPIPE_DEBUG)
#  define TP_FAIL(...)                   \
    do {                                 \
      printf("tilepipe: " __VA_ARGS__);  \
      printf("\n");                      \
      __trap();                          \
    } while (0)
#elif TP_DEVICE_PASS
#  define TP_FAIL(...) __trap()
#else
#  define TP_FAIL(...) ::tilepipe::detail::throw_formatted(__VA_ARGS__)
#endif

/// Checks a runtime requirement; the message names what is wrong.
#define TP_REQUIRE(cond, ...) \
  do {                        \
    if (!(cond)) TP_FAIL(__VA_ARGS__); \
  } while (0)
