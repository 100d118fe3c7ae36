// Elementwise losses: mse_loss and binary_cross_entropy_with_logits (PyTorch semantics).
//
// 'mean' and 'sum' are fused: the per-element loss is summed block by block as it is
// computed, never stored. Sums run over fixed chunks of the index space and combine in
// float64 in chunk order, so the result does not depend on the number of threads.
#include <array>
#include <cmath>
#include <vector>

#include "ops/fast_math.h"
#include "ops/pointwise.h"
#include "ops/rows.h"
#include "ops/impl.h"

namespace tc::impl {

namespace {

constexpr int64_t kChunk = 16384;  // elements per deterministic partial sum

// Sums block(m, const C* const* in, C* out) over the elements of `in` broadcast to `shape`.
template <class C, int NIn, class Block>
double reduce_blocks(const Shape& shape, const std::array<Tensor, NIn>& in, const char* op, Block block) {
  std::array<Shape, NIn> strides;
  std::array<cpu::Operand, NIn> opnds;
  for (int k = 0; k < NIn; ++k) {
    strides[k] = cpu::broadcast_strides(in[k], shape, op);
    opnds[k] = {static_cast<char*>(in[k].raw_data()), in[k].dtype(), &strides[k]};
  }
  const cpu::RunGeometry<NIn> g = cpu::make_geometry<NIn>(opnds, shape);
  if (shape_numel(shape) == 0) return 0.0;
  const int64_t numel = g.numel;
  const int64_t chunks = (numel + kChunk - 1) / kChunk;
  std::vector<double> partial(static_cast<size_t>(chunks), 0.0);
  parallel_for(0, chunks, 1, [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c) {
      double acc = 0;
      auto run = [&](char** ptrs, const int64_t* st, int64_t n) {
        alignas(64) C ibuf[NIn][cpu::kBlock];
        for (int64_t j = 0; j < n; j += cpu::kBlock) {
          const int64_t m = std::min(cpu::kBlock, n - j);
          const C* iptr[NIn];
          for (int k = 0; k < NIn; ++k) {
            const char* p = ptrs[k] + j * st[k];
            if (in[k].dtype() == dtype_of<C> && st[k] == static_cast<int64_t>(sizeof(C))) {
              iptr[k] = reinterpret_cast<const C*>(p);
            } else {
              cpu::load_block<C>(p, st[k], in[k].dtype(), ibuf[k], m);
              iptr[k] = ibuf[k];
            }
          }
          alignas(64) C obuf[cpu::kBlock];
          block(m, iptr, obuf);
          acc += static_cast<double>(ops::row_sum(obuf, m));
        }
      };
      cpu::walk_range<NIn>(g, c * kChunk, std::min(numel, (c + 1) * kChunk), run);
      partial[static_cast<size_t>(c)] = acc;
    }
  });
  double total = 0;
  for (double p : partial) total += p;
  return total;
}

// A 0-d tensor holding `v` in the compute precision for dt (float32, or float64).
Tensor compute_scalar(DType dt, double v, Device device) {
  return full({}, v, TensorOptions(dt == kFloat64 ? kFloat64 : kFloat32).device(device));
}

Tensor scalar_result(double v, DType dt, Device device) {
  Tensor out = make_tensor({}, dt, device);
  cpu::store_block<double>(&v, static_cast<char*>(out.raw_data()), 1, dt, 1);
  return out;
}

// The incoming gradient of a loss as an operand: g itself for 'none', else the scalar
// g * k (k = 1/numel for mean) kept in float32/float64 so it is not rounded to 16 bits.
Tensor grad_operand(const Tensor& g, Reduction reduction, double numel, DType dt) {
  if (reduction == kNone) return g;
  const double k = reduction == kMean ? 1.0 / numel : 1.0;
  return compute_scalar(dt, g.item_double() * k, g.device());
}

void check_loss_pair(const char* op, const Tensor& input, const Tensor& target) {
  TC_CHECK(input.defined() && target.defined(), op, "got an undefined input or target tensor");
  TC_CHECK(is_floating(input.dtype()) && is_floating(target.dtype()), op,
           "expected floating input and target, got ", dtype_name(input.dtype()), " ", shape_str(input.sizes()),
           " and ", dtype_name(target.dtype()), " ", shape_str(target.sizes()));
  ops::check_same_device(op, input, target);
}

}  // namespace

// ------------------------------------------------------------------ mse_loss

Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction) {
  const char* op = "mse_loss";
  check_loss_pair(op, input, target);
  const Shape shape = broadcast_shapes(input.sizes(), target.sizes(), op);
  const DType dt = promote_types(input.dtype(), target.dtype());
  const double numel = static_cast<double>(shape_numel(shape));
  Tensor out;
  if (reduction == kNone) {
    out = ops::map2(input, target, dt, op, [](auto x, auto y) { return (x - y) * (x - y); });
  } else {
    double total = ops::with_compute_type(dt, [&]<class C>(C) {
      return reduce_blocks<C, 2>(shape, {input, target}, op, [](int64_t n, const C* const* in, C* o) {
        for (int64_t i = 0; i < n; ++i) o[i] = (in[0][i] - in[1][i]) * (in[0][i] - in[1][i]);
      });
    });
    if (reduction == kMean) total /= numel;  // empty input: 0 / 0 = NaN, as PyTorch
    out = scalar_result(total, dt, input.device());
  }
  return autograd::record(op, out, {input, target},
                          [x = input.detach(), t = target.detach(), reduction, numel, dt, shape](
                              const Tensor& g, const std::vector<bool>& needs) {
                            const Tensor gs = grad_operand(g, reduction, numel, dt);
                            // d/dx (x - t)^2 = 2 (x - t); the target gets the negation.
                            const Tensor d = ops::map3(x, t, gs, dt, "mse_loss_backward", [](auto a, auto b, auto gg) {
                              using C = decltype(a);
                              return C(2) * (a - b) * gg;
                            });
                            Tensor gx, gt;
                            if (needs[0]) gx = shape == x.sizes() ? d : impl::sum_to_size(d, x.sizes());
                            if (needs[1]) gt = shape == t.sizes() ? impl::neg(d) : impl::sum_to_size(impl::neg(d), t.sizes());
                            return std::vector<Tensor>{gx, gt};
                          });
}

// ------------------------------------------------------------------ binary_cross_entropy_with_logits

namespace {

// softplus(-x) = log(1 + exp(-x)) = -log(sigmoid(x)), without overflow for any x.
template <class C>
inline C softplus_neg(C x) {
  const C ax = x < C(0) ? -x : x;
  return ops::fast_log1p_unit(ops::fast_exp(-ax)) + (x < C(0) ? -x : C(0));
}

// PyTorch's loss: (1 - t) x + lw * softplus(-x), lw = 1 + (pos_weight - 1) t, times weight.
template <class C>
inline C bce_logits(C x, C t, C w, C pw) {
  const C lw = C(1) + (pw - C(1)) * t;
  return w * ((C(1) - t) * x + lw * softplus_neg(x));
}

template <class C>
inline C sigmoid_neg(C x) {  // sigmoid(-x), stable on both sides: exp only of -|x|
  const C e = ops::fast_exp(x < C(0) ? x : -x);
  return (x >= C(0) ? e : C(1)) / (C(1) + e);
}

// Block kernels over (x, t, w, pos_weight[, g]) operands; the float ones are cloned per ISA.
template <class C>
inline void bce_forward_impl(int64_t n, const C* const* a, C* o) {
  for (int64_t i = 0; i < n; ++i) o[i] = bce_logits(a[0][i], a[1][i], a[2][i], a[3][i]);
}
template <class C>
inline void bce_grad_input_impl(int64_t n, const C* const* a, C* o) {  // w g ((1 - t) - lw sigmoid(-x))
  for (int64_t i = 0; i < n; ++i) {
    const C lw = C(1) + (a[3][i] - C(1)) * a[1][i];
    o[i] = a[2][i] * a[4][i] * ((C(1) - a[1][i]) - lw * sigmoid_neg(a[0][i]));
  }
}
template <class C>
inline void bce_grad_target_impl(int64_t n, const C* const* a, C* o) {  // w g (-x + (pw - 1) softplus(-x))
  for (int64_t i = 0; i < n; ++i) o[i] = a[2][i] * a[4][i] * (-a[0][i] + (a[3][i] - C(1)) * softplus_neg(a[0][i]));
}
TC_SIMD_CLONES void bce_forward_f32(int64_t n, const float* const* a, float* o) { bce_forward_impl(n, a, o); }
TC_SIMD_CLONES void bce_grad_input_f32(int64_t n, const float* const* a, float* o) { bce_grad_input_impl(n, a, o); }
TC_SIMD_CLONES void bce_grad_target_f32(int64_t n, const float* const* a, float* o) { bce_grad_target_impl(n, a, o); }
inline void bce_forward(int64_t n, const float* const* a, float* o) { bce_forward_f32(n, a, o); }
inline void bce_forward(int64_t n, const double* const* a, double* o) { bce_forward_impl(n, a, o); }
inline void bce_grad_input(int64_t n, const float* const* a, float* o) { bce_grad_input_f32(n, a, o); }
inline void bce_grad_input(int64_t n, const double* const* a, double* o) { bce_grad_input_impl(n, a, o); }
inline void bce_grad_target(int64_t n, const float* const* a, float* o) { bce_grad_target_f32(n, a, o); }
inline void bce_grad_target(int64_t n, const double* const* a, double* o) { bce_grad_target_impl(n, a, o); }

bool broadcastable_to(const Shape& s, const Shape& to) {
  if (s.size() > to.size()) return false;
  const size_t lead = to.size() - s.size();
  for (size_t d = 0; d < s.size(); ++d)
    if (s[d] != 1 && s[d] != to[lead + d]) return false;
  return true;
}

// out = block(in...) over 5 operands broadcast to out's shape, in out's compute type.
template <class Block>
void map5(const Tensor& out, const std::array<Tensor, 5>& in, const char* op, Block block) {
  ops::with_compute_type(out.dtype(), [&]<class C>(C) {
    cpu::map_blocks<C, 5>(out, in, op, [&](int64_t n, const C* const* a, C* o) { block(n, a, o); });
  });
}

}  // namespace

Tensor binary_cross_entropy_with_logits(const Tensor& input, const Tensor& target, const Tensor& weight,
                                        const Tensor& pos_weight, Reduction reduction) {
  const char* op = "binary_cross_entropy_with_logits";
  check_loss_pair(op, input, target);
  TC_CHECK(target.sizes() == input.sizes(), op, "target of shape ", shape_str(target.sizes()),
           " must have the same shape as input of shape ", shape_str(input.sizes()));
  const DType dt = promote_types(input.dtype(), target.dtype());
  auto optional_operand = [&](const Tensor& t, const char* what) {
    if (!t.defined()) return compute_scalar(dt, 1.0, input.device());
    TC_CHECK(is_floating(t.dtype()), op, what, " must be floating, got ", dtype_name(t.dtype()));
    ops::check_same_device(op, input, t);
    TC_CHECK(broadcastable_to(t.sizes(), input.sizes()), op, what, " of shape ",
             shape_str(t.sizes()), " cannot be broadcast to input of shape ", shape_str(input.sizes()));
    return t;
  };
  const Tensor w = optional_operand(weight, "weight");
  const Tensor pw = optional_operand(pos_weight, "pos_weight");
  const double numel = static_cast<double>(input.numel());
  Tensor out;
  if (reduction == kNone) {
    out = make_tensor(input.sizes(), dt, input.device());
    ops::with_compute_type(dt, [&]<class C>(C) {
      cpu::map_blocks<C, 4>(out, {input, target, w, pw}, op,
                            [](int64_t n, const C* const* a, C* o) { bce_forward(n, a, o); });
    });
  } else {
    double total = ops::with_compute_type(dt, [&]<class C>(C) {
      return reduce_blocks<C, 4>(input.sizes(), {input, target, w, pw}, op,
                                 [](int64_t n, const C* const* a, C* o) { bce_forward(n, a, o); });
    });
    if (reduction == kMean) total /= numel;
    out = scalar_result(total, dt, input.device());
  }
  return autograd::record(
      op, out, {input, target},
      [x = input.detach(), t = target.detach(), w = w.detach(), pw = pw.detach(), reduction, numel, dt](
          const Tensor& g, const std::vector<bool>& needs) {
        const Tensor gs = grad_operand(g, reduction, numel, dt);
        Tensor gx, gt;
        const char* name = "binary_cross_entropy_with_logits_backward";
        if (needs[0]) {
          gx = make_tensor(x.sizes(), dt, x.device());
          map5(gx, {x, t, w, pw, gs}, name, [](int64_t n, const auto* const* a, auto* o) { bce_grad_input(n, a, o); });
        }
        if (needs[1]) {
          gt = make_tensor(x.sizes(), dt, x.device());
          map5(gt, {x, t, w, pw, gs}, name, [](int64_t n, const auto* const* a, auto* o) { bce_grad_target(n, a, o); });
        }
        return std::vector<Tensor>{gx, gt};
      });
}

}  // namespace tc::impl
