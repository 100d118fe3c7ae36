// Elementwise loss kernels: a deterministic chunked sum over map_blocks-style blocks, and
// the binary-cross-entropy-with-logits formulas, their float loops cloned per ISA.
#include "backend/cpu/loops/loss_pointwise.h"

#include <array>
#include <vector>

#include "backend/cpu/loops/fast_math.h"
#include "backend/cpu/loops/rows.h"

namespace tc::cpu {

namespace {

constexpr int64_t kChunk = 16384;  // elements per deterministic partial sum

// Sums block(m, const C* const* in, C* out) over the elements of `in` broadcast to `shape`.
template <class C, int NIn, class Block>
double reduce_blocks(const Shape& shape, const std::array<Tensor, NIn>& in, const char* op, Block block) {
  std::array<Shape, NIn> strides;
  std::array<Operand, NIn> opnds;
  for (int k = 0; k < NIn; ++k) {
    strides[k] = broadcast_strides(in[k], shape, op);
    opnds[k] = {static_cast<char*>(in[k].raw_data()), in[k].dtype(), &strides[k]};
  }
  const RunGeometry<NIn> g = make_geometry<NIn>(opnds, shape);
  if (shape_numel(shape) == 0) return 0.0;
  const int64_t numel = g.numel;
  const int64_t chunks = (numel + kChunk - 1) / kChunk;
  std::vector<double> partial(static_cast<size_t>(chunks), 0.0);
  parallel_for(0, chunks, 1, [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c) {
      double acc = 0;
      auto run = [&](char** ptrs, const int64_t* st, int64_t n) {
        alignas(64) C ibuf[NIn][kBlock];
        for (int64_t j = 0; j < n; j += kBlock) {
          const int64_t m = std::min(kBlock, n - j);
          const C* iptr[NIn];
          for (int k = 0; k < NIn; ++k) {
            const char* p = ptrs[k] + j * st[k];
            if (in[k].dtype() == dtype_of<C> && st[k] == static_cast<int64_t>(sizeof(C))) {
              iptr[k] = reinterpret_cast<const C*>(p);
            } else {
              load_block<C>(p, st[k], in[k].dtype(), ibuf[k], m);
              iptr[k] = ibuf[k];
            }
          }
          alignas(64) C obuf[kBlock];
          block(m, iptr, obuf);
          acc += static_cast<double>(row_sum(obuf, m));
        }
      };
      walk_range<NIn>(g, c * kChunk, std::min(numel, (c + 1) * kChunk), run);
      partial[static_cast<size_t>(c)] = acc;
    }
  });
  double total = 0;
  for (double p : partial) total += p;
  return total;
}

void store_scalar(const Tensor& out, double v) {
  store_block<double>(&v, static_cast<char*>(out.raw_data()), 1, out.dtype(), 1);
}

// softplus(-x) = log(1 + exp(-x)) = -log(sigmoid(x)), without overflow for any x.
template <class C>
inline C softplus_neg(C x) {
  const C ax = x < C(0) ? -x : x;
  return fast_log1p_unit(fast_exp(-ax)) + (x < C(0) ? -x : C(0));
}

// PyTorch's loss: (1 - t) x + lw * softplus(-x), lw = 1 + (pos_weight - 1) t, times weight.
template <class C>
inline C bce_logits(C x, C t, C w, C pw) {
  const C lw = C(1) + (pw - C(1)) * t;
  return w * ((C(1) - t) * x + lw * softplus_neg(x));
}

template <class C>
inline C sigmoid_neg(C x) {  // sigmoid(-x), stable on both sides: exp only of -|x|
  const C e = fast_exp(x < C(0) ? x : -x);
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

// out = block(in...) over 5 operands broadcast to out's shape, in out's compute type.
template <class Block>
void map5(const Tensor& out, const std::array<Tensor, 5>& in, const char* op, Block block) {
  with_compute_type(out.dtype(), [&]<class C>(C) {
    map_blocks<C, 5>(out, in, op, [&](int64_t n, const C* const* a, C* o) { block(n, a, o); });
  });
}

}  // namespace

void mse_loss_sum(const Tensor& out, const Tensor& input, const Tensor& target, double divisor) {
  const Shape shape = broadcast_shapes(input.sizes(), target.sizes(), "mse_loss");
  const double total = with_compute_type(out.dtype(), [&]<class C>(C) {
    return reduce_blocks<C, 2>(shape, {input, target}, "mse_loss", [](int64_t n, const C* const* in, C* o) {
      for (int64_t i = 0; i < n; ++i) o[i] = (in[0][i] - in[1][i]) * (in[0][i] - in[1][i]);
    });
  });
  store_scalar(out, total / divisor);  // empty input: 0 / 0 = NaN, as PyTorch
}

void bce_with_logits(const Tensor& out, const Tensor& x, const Tensor& t, const Tensor& w, const Tensor& pw) {
  with_compute_type(out.dtype(), [&]<class C>(C) {
    map_blocks<C, 4>(out, {x, t, w, pw}, "binary_cross_entropy_with_logits",
                     [](int64_t n, const C* const* a, C* o) { bce_forward(n, a, o); });
  });
}

void bce_with_logits_sum(const Tensor& out, const Tensor& x, const Tensor& t, const Tensor& w, const Tensor& pw,
                         double divisor) {
  const double total = with_compute_type(out.dtype(), [&]<class C>(C) {
    return reduce_blocks<C, 4>(x.sizes(), {x, t, w, pw}, "binary_cross_entropy_with_logits",
                               [](int64_t n, const C* const* a, C* o) { bce_forward(n, a, o); });
  });
  store_scalar(out, total / divisor);
}

void bce_with_logits_backward(const Tensor& gx, const Tensor& gt, const Tensor& x, const Tensor& t, const Tensor& w,
                              const Tensor& pw, const Tensor& g) {
  const char* name = "binary_cross_entropy_with_logits_backward";
  if (gx.defined())
    map5(gx, {x, t, w, pw, g}, name, [](int64_t n, const auto* const* a, auto* o) { bce_grad_input(n, a, o); });
  if (gt.defined())
    map5(gt, {x, t, w, pw, g}, name, [](int64_t n, const auto* const* a, auto* o) { bce_grad_target(n, a, o); });
}

}  // namespace tc::cpu
