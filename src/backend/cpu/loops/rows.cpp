// Row math for softmax and the losses: max, sum, dot and a vectorizable exp, on contiguous
// float/double buffers. The float loops are cloned for AVX-512 and AVX2 (GCC target_clones,
// resolved once at load time), so the library still runs on any x86-64.
//
#include "backend/cpu/loops/rows.h"

#include <cmath>
#include <cstdint>
#include <limits>

#include "backend/cpu/loops/fast_math.h"

#define TC_ROW_CLONES TC_SIMD_CLONES

namespace tc::cpu {

namespace {

constexpr int kLanes = 16;     // independent accumulators: vector lanes without -ffast-math
constexpr int64_t kTile = 64;  // exp block kept on the stack between compute and sum

inline float exp_poly(float v) { return fast_exp(v); }

template <class C>
C lanes_sum(const C* acc) {
  C s = 0;
  for (int k = 0; k < kLanes; ++k) s += acc[k];
  return s;
}

}  // namespace

TC_ROW_CLONES float row_max(const float* x, int64_t n) {
  float m[kLanes];
  for (int k = 0; k < kLanes; ++k) m[k] = -std::numeric_limits<float>::infinity();
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int k = 0; k < kLanes; ++k) m[k] = x[i + k] > m[k] ? x[i + k] : m[k];
  for (; i < n; ++i) m[0] = x[i] > m[0] ? x[i] : m[0];
  float r = m[0];
  for (int k = 1; k < kLanes; ++k) r = m[k] > r ? m[k] : r;
  return r;
}

TC_ROW_CLONES float row_sum(const float* x, int64_t n) {
  float acc[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int k = 0; k < kLanes; ++k) acc[k] += x[i + k];
  for (; i < n; ++i) acc[0] += x[i];
  return lanes_sum(acc);
}

TC_ROW_CLONES float row_dot(const float* x, const float* y, int64_t n) {
  float acc[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int k = 0; k < kLanes; ++k) acc[k] += x[i + k] * y[i + k];
  for (; i < n; ++i) acc[0] += x[i] * y[i];
  return lanes_sum(acc);
}

TC_ROW_CLONES float exp_shifted(const float* x, float* y, int64_t n, float m, float l, float scale) {
  float acc[kLanes] = {};
  alignas(64) float e[kTile];
  for (int64_t j = 0; j < n; j += kTile) {
    const int64_t b = std::min(kTile, n - j);
    for (int64_t i = 0; i < b; ++i) e[i] = exp_poly((x[j + i] - m) - l);
    if (b == kTile) {
      for (int64_t i = 0; i < kTile; i += kLanes)
        for (int k = 0; k < kLanes; ++k) acc[k] += e[i + k];
    } else {
      for (int64_t i = 0; i < b; ++i) acc[0] += e[i];
    }
    for (int64_t i = 0; i < b; ++i) y[j + i] = e[i] * scale;
  }
  return lanes_sum(acc);
}

TC_ROW_CLONES float sum_exp_shifted(const float* x, int64_t n, float m) {
  float acc[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int k = 0; k < kLanes; ++k) acc[k] += exp_poly(x[i + k] - m);
  for (; i < n; ++i) acc[0] += exp_poly(x[i] - m);
  return lanes_sum(acc);
}

double row_max(const double* x, int64_t n) {
  double m = -std::numeric_limits<double>::infinity();
  for (int64_t i = 0; i < n; ++i) m = x[i] > m ? x[i] : m;
  return m;
}

double row_sum(const double* x, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += x[i];
  return s;
}

double row_dot(const double* x, const double* y, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += x[i] * y[i];
  return s;
}

double exp_shifted(const double* x, double* y, int64_t n, double m, double l, double scale) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double e = std::exp((x[i] - m) - l);
    s += e;
    y[i] = e * scale;
  }
  return s;
}

double sum_exp_shifted(const double* x, int64_t n, double m) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += std::exp(x[i] - m);
  return s;
}

}  // namespace tc::cpu
