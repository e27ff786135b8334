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

/// Relative error of C = post(A * B, column) against a float64 reference: every entry for
/// small problems, 4096 random entries otherwise. A is M x K row-major; B is K x N
/// row-major (b_row) or N x K (column-major B).
template <class T, class Post>
double matmul_error(const std::vector<T>& a, const std::vector<T>& b, const std::vector<T>& c, long long M, long long N,
                    long long K, bool b_row, Post post) {
  rel_error err;
  std::mt19937_64 rng(7);
  const bool all = M * N <= 1 << 16;
  for (long long s = 0; s < (all ? M * N : 4096); ++s) {
    const long long i = all ? s / N : static_cast<long long>(rng() % M), j = all ? s % N : static_cast<long long>(rng() % N);
    double ref = 0;
    for (long long kk = 0; kk < K; ++kk)
      ref += double(tilepipe::to_float(a[i * K + kk])) * tilepipe::to_float(b[b_row ? kk * N + j : j * K + kk]);
    err.add(tilepipe::to_float(c[i * N + j]), post(ref, j));
  }
  return err.value();
}

inline int report(const char* what, double err, double tol) {
  const bool ok = err <= tol;  // false for NaN
  std::printf("check: %s relative error %.3e (tolerance %.0e): %s\n", what, err, tol, ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}

}  // namespace example
