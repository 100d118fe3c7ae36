// Internal: the fused per-parameter pass every optimizer's update runs in, and the
// write-back of 16-bit parameters (round to nearest even, stochastic rounding, or the
// Kahan-compensated update of WeightUpdate::PureKahan) and of float32 parameters' 16-bit
// copies (the autocast cache's).
//
// fused_for_each splits one parameter's elements across the intra-op threads and walks
// each share in stack blocks of cpu::kBlock elements: the gradient block is loaded as the
// compute type (any dtype; multiplied by the AMP inverse scale on the way in), 16-bit state
// blocks are widened into float stack buffers, the optimizer's body updates the state and
// the float weights in place, and then the 16-bit blocks are written back: state rounded to
// nearest even, the parameter per the WeightUpdate mode. Float32 state and weights (float32
// and float64 parameters, master copies) are updated where they lie. Each element is touched
// once and nothing is allocated per step.
#pragma once
#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>

#include "backend/cpu/loops/elementwise.h"
#include "backend/cpu/loops/fast_math.h"
#include "backend/kernels.h"
#include "tensorcast/convert.h"
#include "tensorcast/half.h"
#include "tensorcast/optim/optimizer.h"
#include "tensorcast/parallel.h"

namespace tc::optim::detail {

inline constexpr int kMaxState = 3;  // per-element state buffers of one parameter (Adam's m, v, v_max)

// One parameter's per-element state buffers (null: unused), of StepArgs::state_dtype,
// indexed by element; fused_for_each hands the body pointers to the current block.
using StateBuffers = std::array<void*, kMaxState>;

struct StepArgs {
  const Tensor* param = nullptr;  // for creating state buffers of its shape
  Device device;                  // the parameter's: a CUDA one takes the device kernels
  int64_t numel = 0;
  const char* grad = nullptr;  // contiguous
  DType grad_dtype = kFloat32;
  bool scaled = false;  // multiply gradients by the inverse scale while reading them
  float inv_scale = 1.0f;
  // AMP with the scalars where they lie (the parameter's device), read by the kernel:
  // the inverse scale, and found_inf (nonzero: the step writes nothing). Null: unused.
  const float* inv_scale_ptr = nullptr;
  const float* found_inf = nullptr;
  void* weight = nullptr;  // float (double for float64) weights updated in place: the
                           // parameter itself, or its float32 master copy; null in Pure modes
  DType weight_dtype = kFloat32;
  void* param16 = nullptr;  // the 16-bit parameter (written back from `weight`, or updated in
                            // a Pure mode), or null
  DType param_dtype = kFloat32;
  DType state_dtype = kFloat32;                              // the state buffers' dtype: param_dtype in Pure modes
  WeightUpdate weight_update = WeightUpdate::MasterFloat32;  // of a 16-bit parameter
  void* compensation = nullptr;                              // PureKahan: the parameter-dtype compensation buffer
  // A float32 parameter's 16-bit copy (the autocast cache's) written with it, rounded to
  // nearest even as the cast rounds; null: none. CPU only.
  void* copy16 = nullptr;
  DType copy_dtype = kBFloat16;
  Rounding rounding = Rounding::NearestEven;
  uint64_t sr_key = 0;  // stochastic rounding: hash of (seed, step, parameter index)

  bool pure() const { return param16 != nullptr && weight_update != WeightUpdate::MasterFloat32; }
};

// n 16-bit values (bf16 or fp16, element `offset` on) to float and back (nearest even).
inline void load16(const void* src, DType dt, int64_t offset, float* dst, int64_t n) {
  if (dt == kBFloat16)
    bf16_to_float(static_cast<const BFloat16*>(src) + offset, dst, n);
  else
    half_to_float(static_cast<const Half*>(src) + offset, dst, n);
}
inline void store16(const float* src, void* dst, DType dt, int64_t offset, int64_t n) {
  if (dt == kBFloat16)
    float_to_bf16(src, static_cast<BFloat16*>(dst) + offset, n);
  else
    float_to_half(src, static_cast<Half*>(dst) + offset, n);
}

// Writes n float weights into the 16-bit parameter starting at element `offset`, rounded
// per a.rounding (the master copy's write-back, and the Pure mode's update).
inline void write_back(const float* w, const StepArgs& a, int64_t offset, int64_t n) {
  if (a.rounding == Rounding::NearestEven) {
    store16(w, a.param16, a.param_dtype, offset, n);
  } else if (a.param_dtype == kBFloat16) {
    auto* dst = static_cast<BFloat16*>(a.param16) + offset;
    for (int64_t i = 0; i < n; ++i)
      dst[i] = BFloat16::from_bits(bf16_stochastic(w[i], element_bits(a.sr_key, offset + i)));
  } else {
    auto* dst = static_cast<Half*>(a.param16) + offset;
    for (int64_t i = 0; i < n; ++i) dst[i] = Half::from_bits(half_stochastic(w[i], element_bits(a.sr_key, offset + i)));
  }
}

// WeightUpdate::PureKahan (torchdistx AnyPrecisionAdamW's compensation): with p_old the
// 16-bit weight (not yet overwritten) and w the optimizer's float result from it,
//   y = c + (w - p_old);  p_new = round16(p_old + y);  c = round16(y - (p_new - p_old))
// so the part of each update the 16-bit weight cannot hold is carried to the next step.
inline void kahan_write(const float* w, const StepArgs& a, int64_t offset, int64_t n) {
  alignas(64) float pold[cpu::kBlock], c[cpu::kBlock], y[cpu::kBlock], t[cpu::kBlock];
  load16(a.param16, a.param_dtype, offset, pold, n);
  load16(a.compensation, a.param_dtype, offset, c, n);
  for (int64_t i = 0; i < n; ++i) {
    y[i] = c[i] + (w[i] - pold[i]);
    t[i] = pold[i] + y[i];
  }
  store16(t, a.param16, a.param_dtype, offset, n);
  load16(a.param16, a.param_dtype, offset, t, n);  // p_new as float
  for (int64_t i = 0; i < n; ++i) c[i] = y[i] - (t[i] - pold[i]);
  store16(c, a.compensation, a.param_dtype, offset, n);
}

// The step of a parameter in device memory as the device kernels take it: the weights
// (the parameter, or a 16-bit parameter's master) and state, the 16-bit parameter rounded
// to nearest even or stochastically (the CPU's bits). Each device's kernel checks what it
// supports (CUDA: float32 weights and state, no Pure modes).
inline FusedStep device_step(const StepArgs& a, const StateBuffers& state) {
  FusedStep f;
  f.weight_dtype = a.weight_dtype;
  f.state_dtype = a.state_dtype;
  f.pure = a.pure();
  f.has_copy16 = a.copy16 != nullptr;
  f.device = a.device;
  f.numel = a.numel;
  f.grad = a.grad;
  f.grad_dtype = a.grad_dtype;
  f.scaled = a.scaled;
  f.inv_scale = a.inv_scale;
  f.inv_scale_ptr = a.inv_scale_ptr;
  f.found_inf = a.found_inf;
  f.weight = static_cast<float*>(a.weight);
  f.param16 = a.param16;
  f.param_dtype = a.param_dtype;
  f.stochastic = a.rounding == Rounding::Stochastic;
  f.sr_key = a.sr_key;
  for (int k = 0; k < kMaxState; ++k) f.state[k] = static_cast<float*>(state[k]);
  return f;
}

// The update bodies (backend/optim_fns.h, shared with the CUDA kernels) are plain loops;
// built for baseline x86-64 alone, Adam's square root and division ran 4 lanes wide and one
// thread fell well short of the memory's speed (two threads reach it either way). Each body
// is compiled per ISA here (flatten inlines it into every clone). The optimizer files build with
// -ffp-contract=off (CMakeLists.txt), so the FMA clones round each product and sum apart,
// as the baseline loop and PyTorch's separate ops do: the same bits on every CPU.
template <class Body, class C>
TC_SIMD_CLONES [[gnu::flatten]] void run_body(const Body& body, int64_t n, const C* g, C* w, C* const* s) {
  body(n, g, w, s);
}

inline constexpr int64_t kFusedGrain = 16384;  // elements; below this one thread is faster

// body(int64_t n, const C* g, C* w, C* const* s): updates n elements of the weights w and
// of the state s[0..kMaxState) (null where unused), all already pointing at the block,
// from the gradients g[0..n). s points into the state buffers themselves when they hold C,
// else into float stack copies of the 16-bit block.
template <class C, class Body>
void fused_for_each(const StepArgs& a, const StateBuffers& state, Body body) {
  constexpr DType cdt = dtype_of<C>;
  const int64_t gsize = static_cast<int64_t>(element_size(a.grad_dtype));
  const bool pure = a.pure();
  const bool state16 = a.state_dtype != cdt;
  if (a.found_inf != nullptr && *a.found_inf != 0.0f) return;  // the GradScaler skips this step
  const C scale = static_cast<C>(a.inv_scale_ptr != nullptr ? *a.inv_scale_ptr : a.inv_scale);
  parallel_for(0, a.numel, kFusedGrain, [&](int64_t begin, int64_t end) {
    alignas(64) C gbuf[cpu::kBlock];
    alignas(64) C wbuf[std::is_same_v<C, float> ? cpu::kBlock : 1];
    alignas(64) C sbuf[std::is_same_v<C, float> ? kMaxState : 1][std::is_same_v<C, float> ? cpu::kBlock : 1];
    C* s[kMaxState] = {};
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
      if constexpr (std::is_same_v<C, float>) {
        if (pure) {
          load16(a.param16, a.param_dtype, j, wbuf, n);
          for (int k = 0; k < kMaxState; ++k) {
            if (state[k] == nullptr) continue;
            if (state16) {
              load16(state[k], a.state_dtype, j, sbuf[k], n);
              s[k] = sbuf[k];
            } else {
              s[k] = static_cast<C*>(state[k]) + j;
            }
          }
          run_body(body, n, g, wbuf, s);
          for (int k = 0; k < kMaxState; ++k)
            if (state16 && state[k] != nullptr) store16(sbuf[k], state[k], a.state_dtype, j, n);
          if (a.weight_update == WeightUpdate::PureKahan)
            kahan_write(wbuf, a, j, n);
          else
            write_back(wbuf, a, j, n);
          continue;
        }
      }
      for (int k = 0; k < kMaxState; ++k) s[k] = state[k] != nullptr ? static_cast<C*>(state[k]) + j : nullptr;
      C* w = static_cast<C*>(a.weight) + j;
      run_body(body, n, g, w, s);
      if constexpr (std::is_same_v<C, float>) {
        if (a.param16 != nullptr) write_back(w, a, j, n);
        if (a.copy16 != nullptr) store16(w, a.copy16, a.copy_dtype, j, n);
      }
    }
  });
}

}  // namespace tc::optim::detail
