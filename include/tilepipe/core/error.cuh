// Errors. Static facts fail at compile time (static_assert with a message, or an
// instantiation of a named diagnostic template whose arguments carry the numbers);
// runtime facts throw tilepipe::error on the host and in the interpreter, and print then
// trap on the GPU. The text always names the problem and the numbers involved.
#pragma once

#include "config.cuh"

#include <cstdarg>
#include <cstdio>
#include <cstring>
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

/// A device-side check that failed on the GPU, as the failing thread wrote it into host
/// memory the launch mapped (the trap that follows leaves the device unusable, so the host
/// reads it there): the message's printf format, its one string argument and its integer
/// arguments in order.
struct device_failure {
  static constexpr int max_values = 8;
  char format[320];
  char text[96];
  long long values[max_values];
};

/// Where a launch's device-side checks report on the GPU: the record in mapped host memory
/// and a word in device memory that the first failing thread claims (1) and marks written
/// (2); empty in the interpreter, which throws instead.
struct failure_channel {
  device_failure* record = nullptr;
  unsigned* claim = nullptr;
};

namespace detail {
/// The message of a device_failure: its format with %s taking the text and every other
/// conversion an integer argument.
inline std::string describe(const device_failure& f) {
  std::string out;
  int v = 0;
  for (const char* p = f.format; *p && p < f.format + sizeof f.format; ++p) {
    if (*p != '%') {
      out += *p;
      continue;
    }
    const char* q = p + 1;
    while (*q && std::strchr("0123456789.-+ #lhzjt", *q)) ++q;
    if (*q == '%') out += '%';
    else if (*q == 's') out += std::string(f.text, strnlen(f.text, sizeof f.text));
    else if (*q) out += std::to_string(v < device_failure::max_values ? f.values[v++] : 0);
    if (!*q) break;
    p = q;
  }
  return out;
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

// TP_FAIL(format, args...) fails with a formatted message; core/config.cuh defines it with
// the other choices that differ between the device pass and the host.

/// Checks a runtime requirement; the message names what is wrong.
#define TP_REQUIRE(cond, ...) \
  do {                        \
    if (!(cond)) TP_FAIL(__VA_ARGS__); \
  } while (0)
