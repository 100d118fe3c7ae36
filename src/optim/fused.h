// Internal: the fused per-parameter pass every optimizer's update runs in, and the
// write-back of 16-bit parameters (round to nearest even, or stochastic rounding).
//
// fused_for_each splits one parameter's elements across the intra-op threads and walks
// each share in stack blocks: the gradient block is loaded as the compute type (any
// dtype; multiplied by the AMP inverse scale on the way in), the optimizer's body updates
// its state and the float32/float64 weights in place, and when the parameter is 16-bit the
// block of master weights is rounded into it at once. Each element is touched once and
// nothing is allocated per step.
#pragma once
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>

#include "backend/cpu/loops.h"
#include "tensorcast/convert.h"
#include "tensorcast/half.h"
#include "tensorcast/optim/optimizer.h"
#include "tensorcast/parallel.h"

namespace tc::optim::detail {

struct StepArgs {
  const Tensor* param = nullptr;  // for creating state buffers of its shape
  int64_t numel = 0;
  const char* grad = nullptr;  // contiguous
  DType grad_dtype = kFloat32;
  bool scaled = false;  // multiply gradients by inv_scale while reading them
  float inv_scale = 1.0f;
  void* weight = nullptr;  // float (double for float64) weights updated in place:
                           // the parameter itself, or its float32 master copy
  DType weight_dtype = kFloat32;
  void* param16 = nullptr;  // the 16-bit parameter written back from `weight`, or null
  DType param_dtype = kFloat32;
  Rounding rounding = Rounding::NearestEven;
  uint64_t sr_key = 0;  // stochastic rounding: hash of (seed, step, parameter index)
};

// A strong 64-bit mixer (splitmix64's finalizer); counter-based, so the random bits of an
// element depend only on (key, element index), never on how threads split the work.
constexpr uint64_t mix64(uint64_t z) noexcept {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
constexpr uint64_t rounding_key(uint64_t seed, int64_t step, int64_t param_index) noexcept {
  return mix64(seed ^ mix64(mix64(static_cast<uint64_t>(step)) ^ static_cast<uint64_t>(param_index)));
}
constexpr uint32_t element_bits(uint64_t key, int64_t index) noexcept {
  return static_cast<uint32_t>(mix64(key + static_cast<uint64_t>(index) * 0xd1b54a32d192ed03ull) >> 32);
}

// Rounds x up in magnitude with probability (distance to the value below) / ulp: adding
// 16 random bits below bf16's mantissa and truncating does exactly that. inf/NaN keep the
// nearest-even path (truncation could turn a NaN payload into inf).
inline uint16_t bf16_stochastic(float x, uint32_t r) noexcept {
  const uint32_t u = std::bit_cast<uint32_t>(x);
  if ((u & 0x7fffffffu) >= 0x7f800000u) return ::tc::detail::float_to_bf16_bits(x);
  return static_cast<uint16_t>((u + (r & 0xffffu)) >> 16);
}

// fp16 has a subnormal range whose ulp is not a fixed number of float bits, so pick between
// the two neighbours with the exact probability instead of adding bits.
inline uint16_t half_stochastic(float x, uint32_t r) noexcept {
  const uint16_t h = ::tc::detail::float_to_half_bits(x);
  const float fh = ::tc::detail::half_bits_to_float(h);
  if (fh == x || !std::isfinite(fh) || std::isnan(x)) return h;
  const float ax = std::fabs(x);
  // Sign-magnitude bits: +-1 on the low 15 bits steps the magnitude, never the sign.
  const bool above = std::fabs(fh) > ax;
  const uint16_t lo = above ? static_cast<uint16_t>(h - 1) : h;
  const uint16_t hi = above ? h : static_cast<uint16_t>(h + 1);
  const double flo = std::fabs(::tc::detail::half_bits_to_float(lo));
  const double fhi = (hi & 0x7fffu) == 0x7c00u ? 65536.0 : std::fabs(::tc::detail::half_bits_to_float(hi));
  const double p = (static_cast<double>(ax) - flo) / (fhi - flo);
  return static_cast<double>(r) * 0x1p-32 < p ? hi : lo;
}

// Writes n master values back into the 16-bit parameter starting at element `offset`.
inline void write_back(const float* w, const StepArgs& a, int64_t offset, int64_t n) {
  if (a.param_dtype == kBFloat16) {
    auto* dst = static_cast<BFloat16*>(a.param16) + offset;
    if (a.rounding == Rounding::NearestEven) {
      float_to_bf16(w, dst, n);
    } else {
      for (int64_t i = 0; i < n; ++i)
        dst[i] = BFloat16::from_bits(bf16_stochastic(w[i], element_bits(a.sr_key, offset + i)));
    }
  } else {
    auto* dst = static_cast<Half*>(a.param16) + offset;
    if (a.rounding == Rounding::NearestEven) {
      float_to_half(w, dst, n);
    } else {
      for (int64_t i = 0; i < n; ++i)
        dst[i] = Half::from_bits(half_stochastic(w[i], element_bits(a.sr_key, offset + i)));
    }
  }
}

inline constexpr int64_t kFusedGrain = 16384;  // elements; below this one thread is faster

// body(int64_t offset, int64_t n, const C* g, C* w): updates elements [offset, offset + n)
// of the state (indexed by offset) and of w (already offset), from gradients g[0..n).
template <class C, class Body>
void fused_for_each(const StepArgs& a, Body body) {
  constexpr DType cdt = dtype_of<C>;
  const int64_t gsize = static_cast<int64_t>(element_size(a.grad_dtype));
  parallel_for(0, a.numel, kFusedGrain, [&](int64_t begin, int64_t end) {
    alignas(64) C gbuf[cpu::kBlock];
    C* w = static_cast<C*>(a.weight);
    const C scale = static_cast<C>(a.inv_scale);
    for (int64_t j = begin; j < end; j += cpu::kBlock) {
      const int64_t n = std::min(cpu::kBlock, end - j);
      const C* g;
      if (a.grad_dtype == cdt && !a.scaled) {
        g = reinterpret_cast<const C*>(a.grad) + j;
      } else {
        if (a.grad_dtype == cdt) {
          const C* src = reinterpret_cast<const C*>(a.grad) + j;
          for (int64_t i = 0; i < n; ++i) gbuf[i] = src[i] * scale;
        } else {
          cpu::load_block<C>(a.grad + j * gsize, gsize, a.grad_dtype, gbuf, n);
          if (a.scaled)
            for (int64_t i = 0; i < n; ++i) gbuf[i] *= scale;
        }
        g = gbuf;
      }
      body(j, n, g, w + j);
      if constexpr (std::is_same_v<C, float>) {
        if (a.param16 != nullptr) write_back(w + j, a, j, n);
      }
    }
  });
}

// Runs fused_for_each with C = double for float64 parameters, else float; `body` is a
// generic lambda taking (offset, n, const C* g, C* w).
template <class Body>
void dispatch_fused(const StepArgs& a, Body body) {
  if (a.weight_dtype == kFloat64)
    fused_for_each<double>(a, body);
  else
    fused_for_each<float>(a, body);
}

}  // namespace tc::optim::detail
