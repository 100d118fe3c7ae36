// Defines the counting passes of the numerics report (see numerics.h).
#include "backend/cpu/loops/numerics.h"

#include <algorithm>
#include <cmath>
#include <mutex>

#include "backend/cpu/loops/elementwise.h"
#include "tensorcast/parallel.h"

namespace tc::cpu {
namespace {

constexpr float kFlushMax = 0x1p-25f;               // ties to even: 2^-25 itself rounds to 0
constexpr float kNormalFrom = 0x1p-14f - 0x1p-25f;  // rounds up to fp16's smallest normal, 2^-14
constexpr float kOverflowMin = 65520.0f;            // halfway between 65504 and 2^16: rounds to inf

// Runs fn(begin, end, float* buffers...) over [0, n) in kBlock pieces of each tensor
// loaded as float32, split across the threads.
template <int N, class Fn>
void for_blocks(const Tensor* const (&ts)[N], Fn fn) {
  Tensor c[N];
  for (int k = 0; k < N; ++k) c[k] = as_contiguous(*ts[k]);
  const int64_t n = c[0].numel();
  parallel_for(0, n, kGrainElements, [&](int64_t begin, int64_t end) {
    alignas(64) float buf[N][kBlock];
    for (int64_t j = begin; j < end; j += kBlock) {
      const int64_t m = std::min(kBlock, end - j);
      for (int k = 0; k < N; ++k) {
        const auto es = static_cast<int64_t>(element_size(c[k].dtype()));
        load_block<float>(static_cast<const char*>(c[k].raw_data()) + j * es, es, c[k].dtype(), buf[k], m);
      }
      fn(m, buf);
    }
  });
}

}  // namespace

Fp16RangeCounts count_fp16_range(const Tensor& t) {
  Fp16RangeCounts total;
  std::mutex mu;
  const Tensor* ts[1] = {&t};
  for_blocks<1>(ts, [&](int64_t m, float(*buf)[kBlock]) {
    Fp16RangeCounts c;
    c.total = m;
    float amax = 0;
    for (int64_t i = 0; i < m; ++i) {
      const float a = std::fabs(buf[0][i]);
      if (!std::isfinite(a)) {
        ++c.nonfinite;
        continue;
      }
      amax = std::max(amax, a);
      c.zero += a == 0.0f;
      c.flush += a > 0.0f && a <= kFlushMax;
      c.subnormal += a > kFlushMax && a < kNormalFrom;
      c.overflow += a >= kOverflowMin;
    }
    c.amax = amax;
    const std::lock_guard<std::mutex> lock(mu);  // a few merges per call: one per block run
    accumulate(total, c);
  });
  return total;
}

LostUpdates count_lost_bf16_updates(const Tensor& before, const Tensor& after, const Tensor& grad) {
  TC_CHECK(before.numel() == after.numel() && before.numel() == grad.numel(), "numerics",
           "weights before/after and gradient differ in size: ", before.numel(), ", ", after.numel(), ", ",
           grad.numel());
  LostUpdates total;
  std::mutex mu;
  const Tensor* ts[3] = {&before, &after, &grad};
  for_blocks<3>(ts, [&](int64_t m, float(*buf)[kBlock]) {
    int64_t lost = 0, with_grad = 0;
    for (int64_t i = 0; i < m; ++i) {
      if (buf[2][i] == 0.0f) continue;
      ++with_grad;
      const float w = buf[0][i];
      // Half an ulp of w rounded to bf16 (8 significant bits): 2^(e - 8) for w in [2^e, 2^(e+1)).
      int e = 0;
      std::frexp(w, &e);  // w = f * 2^e, f in [0.5, 1): w in [2^(e-1), 2^e)
      const float half_ulp = w == 0.0f ? 0x1p-134f : std::ldexp(1.0f, e - 1 - 8);
      lost += std::fabs(buf[1][i] - w) < half_ulp;
    }
    const std::lock_guard<std::mutex> lock(mu);
    total.with_grad += with_grad;
    total.lost += lost;
  });
  return total;
}

}  // namespace tc::cpu
