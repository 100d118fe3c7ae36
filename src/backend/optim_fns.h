// Internal: the optimizers' per-element updates (torch.optim's single-tensor formulas, each
// intermediate rounded where PyTorch's separate ops round), shared by both backends: the
// CPU's fused pass (src/optim/fused.h) runs them over blocks of elements, the CUDA fused
// step (backend/cuda/optim.cu) on one element per thread. body(n, g, w, s) updates n
// weights w and the state blocks s = {buffer 0, 1, 2} (null where unused) from the
// gradients g. The option flags are template parameters, so each variant is branch-free.
#pragma once
#include <cmath>
#include <cstdint>

#include "backend/pointwise_fns.h"  // TC_HD

namespace tc::optim::detail {

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

}  // namespace tc::optim::detail
