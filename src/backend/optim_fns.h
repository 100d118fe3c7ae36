// Internal: the optimizers' per-element updates (torch.optim's single-tensor formulas, each
// intermediate rounded where PyTorch's separate ops round), shared by both backends: the
// CPU's fused pass (src/optim/fused.h) runs them over blocks of elements, the CUDA fused
// step (backend/cuda/optim.cu) on one element per thread. body(n, g, w, s) updates n
// weights w and the state blocks s = {buffer 0, 1, 2} (null where unused) from the
// gradients g. The option flags are template parameters, so each variant is branch-free.
#pragma once
#include <bit>
#include <cmath>
#include <cstdint>

#include "backend/pointwise_fns.h"  // TC_HD
#include "tensorcast/device.h"
#include "tensorcast/dtype.h"
#include "tensorcast/half.h"

namespace tc::optim::detail {

// Stochastic rounding of 16-bit parameters, the same bits on both devices.
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
TC_HD uint16_t bf16_stochastic(float x, uint32_t r) noexcept {
  const uint32_t u = std::bit_cast<uint32_t>(x);
  if ((u & 0x7fffffffu) >= 0x7f800000u) return ::tc::detail::float_to_bf16_bits(x);
  return static_cast<uint16_t>((u + (r & 0xffffu)) >> 16);
}

// fp16 has a subnormal range whose ulp is not a fixed number of float bits, so pick between
// the two neighbours with the exact probability instead of adding bits.
TC_HD uint16_t half_stochastic(float x, uint32_t r) noexcept {
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

template <class C>
struct SGDScalars {
  C neg_lr, wd, momentum, one_minus_dampening;
};

// The option flags are template parameters so each variant's loop is branch-free and
// vectorizes. kFirst: the buffer is created by this step and starts as the gradient.
// s[0] is the block of the momentum buffer (itself, or a float copy of a 16-bit block).
template <class C, bool kWd, bool kMomentum, bool kFirst, bool kNesterov>
struct SGDKernel {
  SGDScalars<C> k;
  TC_HD void operator()(int64_t n, const C* __restrict g, C* __restrict w, C* const* s) const {
    C* __restrict b = kMomentum ? s[0] : nullptr;
    for (int64_t i = 0; i < n; ++i) {
      C d = g[i];
      if constexpr (kWd) d = d + k.wd * w[i];  // d_p.add(param, alpha=weight_decay)
      if constexpr (kMomentum) {
        C m;
        if constexpr (kFirst)
          m = d;  // torch.clone(d_p)
        else
          m = b[i] * k.momentum + k.one_minus_dampening * d;  // buf.mul_(momentum).add_(d_p, alpha=1 - dampening)
        b[i] = m;
        if constexpr (kNesterov)
          d = d + k.momentum * m;
        else
          d = m;
      }
      w[i] = w[i] + k.neg_lr * d;  // param.add_(d_p, alpha=-lr)
    }
  }
};

// The single-tensor, non-capturable path of torch.optim.Adam/AdamW, one pass per element.
// Each intermediate is rounded to the compute type where PyTorch's separate ops round.
// The option flags are template parameters so that each variant's loop is branch-free and
// vectorizes. The state arrives as block pointers s = {m, v, v_max (amsgrad)}: the buffers
// themselves, or float copies of 16-bit blocks (fused.h), so one kernel serves both.
template <class C>
struct AdamScalars {
  C lerp_w, lerp_w1, beta2, one_minus_beta2, bc2_sqrt, eps, neg_step_size, wd, decay;
};

template <class C, bool kL2, bool kDecoupled, bool kAmsgrad, bool kLerpHigh>
struct AdamKernel {
  AdamScalars<C> k;
  TC_HD void operator()(int64_t n, const C* __restrict g, C* __restrict w, C* const* s) const {
    C* __restrict mo = s[0];
    C* __restrict vo = s[1];
    C* __restrict xo = kAmsgrad ? s[2] : nullptr;
    for (int64_t i = 0; i < n; ++i) {
      C p = w[i];
      if constexpr (kDecoupled) p = p * k.decay;  // param.mul_(1 - lr * weight_decay)
      C gi = g[i];
      if constexpr (kL2) gi = gi + k.wd * p;  // grad.add(param, alpha=weight_decay)
      // exp_avg.lerp_(grad, 1 - beta1), with ATen's two formulas either side of weight 0.5.
      C mi;
      if constexpr (kLerpHigh)
        mi = gi - (gi - mo[i]) * k.lerp_w1;
      else
        mi = mo[i] + k.lerp_w * (gi - mo[i]);
      const C vi = vo[i] * k.beta2 + k.one_minus_beta2 * gi * gi;  // mul_(beta2).addcmul_(g, g, 1 - beta2)
      mo[i] = mi;
      vo[i] = vi;
      C vd = vi;
      if constexpr (kAmsgrad) {
        vd = xo[i] > vi ? xo[i] : vi;  // torch.maximum (v >= 0, NaN only from NaN gradients)
        xo[i] = vd;
      }
      const C denom = std::sqrt(vd) / k.bc2_sqrt + k.eps;
      w[i] = p + k.neg_step_size * mi / denom;  // param.addcdiv_(exp_avg, denom, value=-step_size)
    }
  }
};

// One parameter's step on a device, as raw device pointers (src/optim fills it from its
// StepArgs): what a backend's fused_sgd_step / fused_adam_step kernels take.
struct FusedStep {
  Device device;
  int64_t numel = 0;
  const void* grad = nullptr;  // contiguous, any floating dtype
  DType grad_dtype = kFloat32;
  bool scaled = false;  // multiply gradients by the inverse scale while reading them (AMP)
  float inv_scale = 1.0f;
  // AMP without a host read: the inverse scale and found_inf (nonzero: skip, write nothing)
  // on the device, read by the kernel; null when not used.
  const float* inv_scale_ptr = nullptr;
  const float* found_inf = nullptr;
  float* weight = nullptr;  // float32 weights updated in place: the parameter or its master copy
  void* param16 = nullptr;  // the 16-bit parameter written back from weight, or null
  DType param_dtype = kFloat32;
  bool stochastic = false;  // write param16 back rounded stochastically (else to nearest even)
  uint64_t sr_key = 0;      // stochastic rounding: hash of (seed, step, parameter index)
  float* state[3] = {};     // float32 state buffers (null: unused)
  // What the optimizer keeps, for the kernels to refuse what they do not support.
  DType weight_dtype = kFloat32;
  DType state_dtype = kFloat32;
  bool pure = false;        // a Pure weight-update mode (16-bit weights, no master)
  bool has_copy16 = false;  // a 16-bit copy of the weights to write as well
};

}  // namespace tc::optim::detail
