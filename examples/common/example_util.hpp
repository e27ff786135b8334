// Small host helpers shared by the examples: command-line flags, random inputs and
// float64 reference checks. Nothing here is part of the library.
#pragma once

#include <tilepipe/tilepipe.cuh>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace example {

/// --name value, or the default.
inline long long flag(int argc, char** argv, const char* name, long long dflt) {
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], name) == 0) return std::atoll(argv[i + 1]);
  return dflt;
}
inline std::string flag_str(int argc, char** argv, const char* name, const char* dflt) {
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], name) == 0) return argv[i + 1];
  return dflt;
}

/// Normal(0, 1) values rounded to T, from a fresh seed unless one is given.
template <class T>
std::vector<T> random_values(std::size_t n, std::uint64_t seed = std::random_device{}()) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<T> v(n);
  for (auto& x : v) x = tilepipe::from_float<T>(dist(rng));
  return v;
}

/// ||out - ref|| / ||ref|| over the entries ref_at(i) is given for; NaN if any output is NaN.
struct rel_error {
  double num = 0, den = 0;
  bool nan = false;
  void add(double out, double ref) {
    if (std::isnan(out)) nan = true;
    num += (out - ref) * (out - ref);
    den += ref * ref;
  }
  double value() const { return nan ? NAN : std::sqrt(num / (den > 0 ? den : 1)); }
};

inline int report(const char* what, double err, double tol) {
  const bool ok = err <= tol;  // false for NaN
  std::printf("check: %s relative error %.3e (tolerance %.0e): %s\n", what, err, tol, ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}

}  // namespace example
