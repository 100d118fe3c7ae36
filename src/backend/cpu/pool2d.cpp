#include "backend/cpu/pool2d.h"

#include "backend/cpu/loops/conv_direct.h"
#include "backend/cpu/onednn/plan.h"
#include "backend/cpu/onednn/pool.h"

namespace tc::cpu {

namespace {

// Runs a direct float/double kernel for any floating dtype: 16-bit data goes through
// float32 and the result rounds once.
template <class F>
Tensor via_direct(const Tensor& x, F f) {
  if (x.dtype() == kFloat32 || x.dtype() == kFloat64) return f(x);
  return f(x.to(kFloat32)).to(x.dtype());
}

// Average pooling on the direct loops: float64, and PyTorch's divisor with
// count_include_pad, which clips a ceil_mode window that overhangs the padded input
// (oneDNN always divides by the kernel area there).
bool avg_pool_direct(DType dt, const Shape& xs, const PoolParams& p, bool count_include_pad) {
  bool overhang = false;
  for (int d = 0; d < 2; ++d)
    overhang |= (p.out[d] - 1) * p.stride[d] - p.padding[d] + p.kernel[d] > xs[2 + d] + p.padding[d];
  return dt == kFloat64 || (count_include_pad && overhang);
}

PoolKind avg_kind(bool count_include_pad) {
  return count_include_pad ? PoolKind::AvgIncludePad : PoolKind::AvgExcludePad;
}

}  // namespace

std::pair<Tensor, Tensor> max_pool2d_forward(const Tensor& x, const PoolParams& p, bool channels_last) {
  if (x.dtype() == kFloat64) {
    auto [out, idx] = direct_max_pool2d(x, p);
    return {to_activation_layout(out, channels_last), idx};
  }
  PoolResult r = dnnl_pool2d_forward(x, p, PoolKind::Max);
  return {r.out, r.workspace};
}

Tensor max_pool2d_backward(const Tensor& grad_out, const Tensor& saved, const Shape& input_sizes, const PoolParams& p,
                           bool channels_last) {
  const DType dt = grad_out.dtype();
  if (saved.dtype() != kInt64)  // oneDNN's workspace
    return dnnl_pool2d_backward(grad_out, saved, input_sizes, dt, p, PoolKind::Max, channels_last);
  const Tensor g = dt == kFloat64 ? grad_out : grad_out.to(kFloat32);
  const Tensor gx = to_activation_layout(direct_max_pool2d_backward(g, saved, input_sizes), channels_last);
  return gx.dtype() == dt ? gx : gx.to(dt);
}

// oneDNN's workspace does not give the argmax, so the direct kernel finds it (in float32:
// the same element of a tied window as the gradient by it takes).
Tensor max_pool2d_indices(const Tensor& x, const Tensor& saved, const PoolParams& p) {
  if (saved.dtype() == kInt64) return saved;
  return direct_max_pool2d(x.dtype() == kFloat64 ? x : x.to(kFloat32), p).second;
}

Tensor avg_pool2d_forward(const Tensor& x, const PoolParams& p, bool count_include_pad, bool channels_last) {
  if (!avg_pool_direct(x.dtype(), x.sizes(), p, count_include_pad))
    return dnnl_pool2d_forward(x, p, avg_kind(count_include_pad)).out;
  return to_activation_layout(
      via_direct(x, [&](const Tensor& xf) { return direct_avg_pool2d(xf, p, count_include_pad); }), channels_last);
}

Tensor avg_pool2d_backward(const Tensor& grad_out, const Shape& input_sizes, const PoolParams& p,
                           bool count_include_pad, bool channels_last) {
  const DType dt = grad_out.dtype();
  if (!avg_pool_direct(dt, input_sizes, p, count_include_pad))
    return dnnl_pool2d_backward(grad_out, Tensor(), input_sizes, dt, p, avg_kind(count_include_pad), channels_last);
  return to_activation_layout(
      via_direct(grad_out,
                 [&](const Tensor& g) { return direct_avg_pool2d_backward(g, input_sizes, p, count_include_pad); }),
      channels_last);
}

Tensor adaptive_avg_pool2d_forward(const Tensor& x, int64_t out_h, int64_t out_w, bool channels_last) {
  return to_activation_layout(
      via_direct(x, [&](const Tensor& xf) { return direct_adaptive_avg_pool2d(xf, out_h, out_w); }), channels_last);
}

Tensor adaptive_avg_pool2d_backward(const Tensor& grad_out, const Shape& input_sizes, bool channels_last) {
  return to_activation_layout(
      via_direct(grad_out, [&](const Tensor& g) { return direct_adaptive_avg_pool2d_backward(g, input_sizes); }),
      channels_last);
}

}  // namespace tc::cpu
