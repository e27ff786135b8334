// Division by a divisor fixed at run time, with a multiplier prepared once.
//
// A persistent kernel maps each of its tiles' indices to a (row, column) of the output
// between two tiles, while the tensor cores wait. An integer division is some twenty
// dependent instructions on the GPU, about 200 cycles; the tile orders need two. With the
// multiplier prepared on the host (Granlund and Montgomery's method, as in CUTLASS's
// FastDivmod) a division is one multiply-high, an add and a shift.
#pragma once

#include "../core/config.cuh"
#include "../core/error.cuh"

namespace tilepipe {

/// n / d and n % d for 0 <= n < 2^31 and a divisor 1 <= d < 2^31 given at construction:
/// q = (umulhi(n, m) + n) >> s with s = ceil(log2 d), m = floor(2^32 (2^s - d) / d) + 1.
class fast_divmod {
 public:
  fast_divmod() = default;
  TP_HD explicit fast_divmod(int d) : d_(d) {
    TP_REQUIRE(d >= 1, "fast_divmod: the divisor must be positive, got %d", d);
    while ((std::uint64_t{1} << s_) < static_cast<std::uint64_t>(d)) ++s_;
    m_ = static_cast<std::uint32_t>((((std::uint64_t{1} << s_) - d) << 32) / static_cast<std::uint64_t>(d) + 1);
  }
  TP_HD int divisor() const { return d_; }
  TP_HD int div(int n) const {
    const auto u = static_cast<std::uint32_t>(n);
    const auto hi = static_cast<std::uint32_t>((static_cast<std::uint64_t>(u) * m_) >> 32);
    return static_cast<int>((static_cast<std::uint64_t>(hi) + u) >> s_);
  }
  TP_HD int mod(int n) const { return n - div(n) * d_; }

 private:
  int d_ = 1;
  int s_ = 0;
  std::uint32_t m_ = 1;
};

}  // namespace tilepipe
