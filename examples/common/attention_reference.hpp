// A float64 attention forward for checking: packed sequences (rows [cu_q[b], cu_q[b + 1])
// of q, [cu_k[b], cu_k[b + 1]) of k and v, each row H x D), masks aligned to the bottom
// right as FlashAttention defines them. Rows that see no key get O = 0 and LSE = -inf.
#pragma once

#include <tilepipe/tilepipe.cuh>

#include <cmath>
#include <vector>

namespace reference {

struct attention_mask {
  bool causal = false;
  int window_left = -1, window_right = -1;  // -1: unbounded
};

/// o: [total_q, hq, d]; lse: [hq, total_q] (natural log). With check_heads > 0 only heads
/// below it are computed (a sample of a large problem; the rest stay 0 and -inf).
template <class T>
void attention(const std::vector<T>& q, const std::vector<T>& k, const std::vector<T>& v, int hq, int hkv, int d,
               const std::vector<int>& cu_q, const std::vector<int>& cu_k, double scale, attention_mask mask,
               std::vector<double>& o, std::vector<double>& lse, int check_heads = 0) {
  const long long total_q = cu_q.back();
  o.assign(static_cast<std::size_t>(total_q * hq * d), 0.0);
  lse.assign(static_cast<std::size_t>(total_q * hq), -INFINITY);
  const int right = mask.causal ? 0 : mask.window_right;
  std::vector<double> s;
  for (std::size_t b = 0; b + 1 < cu_q.size(); ++b) {
    const int q0 = cu_q[b], sq = cu_q[b + 1] - q0, k0 = cu_k[b], sk = cu_k[b + 1] - k0;
    for (int h = 0; h < (check_heads > 0 ? std::min(check_heads, hq) : hq); ++h) {
      const int hk = h / (hq / hkv);
      for (int i = 0; i < sq; ++i) {
        const int lo = mask.window_left >= 0 ? i + sk - sq - mask.window_left : 0;
        const int hi = right >= 0 ? i + sk - sq + right : sk - 1;
        s.assign(static_cast<std::size_t>(sk), -INFINITY);
        double mx = -INFINITY;
        for (int j = std::max(lo, 0); j <= std::min(hi, sk - 1); ++j) {
          double dot = 0;
          for (int c = 0; c < d; ++c)
            dot += static_cast<double>(tp::to_float(q[((q0 + i) * static_cast<long long>(hq) + h) * d + c])) *
                   tp::to_float(k[((k0 + j) * static_cast<long long>(hkv) + hk) * d + c]);
          s[j] = dot * scale;
          mx = std::max(mx, s[j]);
        }
        if (mx == -INFINITY) continue;
        double sum = 0;
        for (int j = 0; j < sk; ++j) sum += s[j] == -INFINITY ? 0.0 : std::exp(s[j] - mx);
        double* out = &o[((q0 + i) * static_cast<long long>(hq) + h) * d];
        for (int j = 0; j < sk; ++j) {
          if (s[j] == -INFINITY) continue;
          const double p = std::exp(s[j] - mx) / sum;
          for (int c = 0; c < d; ++c) out[c] += p * tp::to_float(v[((k0 + j) * static_cast<long long>(hkv) + hk) * d + c]);
        }
        lse[static_cast<std::size_t>(h * total_q + q0 + i)] = mx + std::log(sum);
      }
    }
  }
}

}  // namespace reference
