// Matrix products: matmul (NumPy semantics), mm, bmm and linear, with their backward
// formulas. Every product is one call to the CPU batched GEMM (backend/cpu/dnnl_matmul.h),
// which reads transposed and broadcast operands through strides, so no op here copies its
// inputs; the bias of linear is fused into the GEMM. bfloat16 gradients are bfloat16 GEMMs with float32 accumulation;
// linear writes its gradients in the dtype they are consumed in (float32 for an autocast copy of an fp32 weight:
// autograd/nodes.h).
#include <numeric>

#include "autograd/nodes.h"
#include "backend/cpu/dnnl_matmul.h"
#include "backend/cuda/matmul.h"
#include "core/tensor_impl.h"
#include "ops/impl.h"
#include "tensorcast/autograd.h"
#include "tensorcast/ops.h"

namespace tc::impl {

using autograd::record;

namespace {

void check_pair(const char* op, const Tensor& a, const Tensor& b) {
  TC_CHECK(a.defined() && b.defined(), op, "got an undefined tensor");
  TC_CHECK(a.device() == b.device(), op, "expected both inputs on the same device, got ", a.device(), " and ",
           b.device());
}

void check_dtypes(const char* op, const Tensor& a, const Tensor& b) {
  // PyTorch does not promote in matrix products: a mixed pair is an error, not a silent cast.
  TC_CHECK(a.dtype() == b.dtype(), op, "expected both inputs to have the same dtype, got ", dtype_name(a.dtype()),
           " and ", dtype_name(b.dtype()));
  TC_CHECK(is_floating(a.dtype()), op, "expected floating inputs, got ", dtype_name(a.dtype()));
}

[[noreturn]] void fail_shapes(const char* op, const Tensor& a, const Tensor& b) {
  TC_FAIL(op, "shapes ", shape_str(a.sizes()), " and ", shape_str(b.sizes()), " cannot be multiplied");
}

// t with leading size-1 dims up to nd (no copy, no autograd: the backend only reads it).
Tensor pad_dims(const Tensor& t, int64_t nd) {
  if (t.dim() == nd) return t;
  Shape sz(static_cast<size_t>(nd - t.dim()), 1), st(static_cast<size_t>(nd - t.dim()), 0);
  sz.insert(sz.end(), t.sizes().begin(), t.sizes().end());
  st.insert(st.end(), t.strides().begin(), t.strides().end());
  return make_view(t, sz, st, t.storage_offset());
}

// Checks that a (..., n, k) and b (..., k, m) multiply: inner sizes agree and batch dims broadcast.
void check_product(const char* op, const Tensor& a, const Tensor& b, const Tensor& a_user, const Tensor& b_user) {
  if (a.size(-1) != b.size(-2)) fail_shapes(op, a_user, b_user);
  for (int64_t i = 3; i <= std::min(a.dim(), b.dim()); ++i)
    if (a.size(-i) != b.size(-i) && a.size(-i) != 1 && b.size(-i) != 1) fail_shapes(op, a_user, b_user);
}

// a @ b (+ bias) with batch broadcasting, into a new contiguous tensor; not recorded.
// out_dtype: c's dtype; a wider one than a's (fp32 for bf16 inputs) makes oneDNN write
// the float32 accumulators without rounding them to 16 bits. act: an activation for the
// CPU GEMM's epilogue; *applied says whether it ran (cpu::matmul_into).
Tensor product(const Tensor& a, const Tensor& b, const Tensor& bias, const char* op,
               std::optional<DType> out_dtype = std::nullopt, cpu::Activation act = cpu::Activation::kNone,
               bool* applied = nullptr) {
  const int64_t nd = std::max(a.dim(), b.dim());
  const Tensor ap = pad_dims(a, nd), bp = pad_dims(b, nd);
  Shape out(static_cast<size_t>(nd));
  for (int64_t d = 0; d < nd - 2; ++d) out[d] = ap.size(d) == 1 ? bp.size(d) : ap.size(d);
  out[nd - 2] = ap.size(-2);
  out[nd - 1] = bp.size(-1);
  Tensor c = make_tensor(out, out_dtype.value_or(a.dtype()), a.device());
  const Tensor ad = ap.detach(), bd = bp.detach(), biasd = bias.defined() ? bias.detach() : Tensor();
  bool done = act == cpu::Activation::kNone;
  if (c.device().is_cuda())
    gpu::matmul_into(ad, bd, biasd, c, op);
  else
    done = cpu::matmul_into(ad, bd, biasd, c, op, act);
  if (applied != nullptr) *applied = done;
  return c;
}

// Sums p (batch..., r, s) over the batch dims that `target` broadcasts (size 1 there, or
// missing), giving target's shape: the reverse of the forward's batch broadcasting.
// The sum is one GEMM with a ones row, so 16-bit data accumulates in float32.
Tensor reduce_batch(const Tensor& p, const Shape& target, const char* op) {
  const int64_t nd = p.dim();
  Shape tp(static_cast<size_t>(nd) - target.size(), 1);
  tp.insert(tp.end(), target.begin(), target.end());
  Shape perm, kept;
  int64_t r = 1;
  for (int64_t d = 0; d < nd; ++d) {
    if (tp[d] == 1 && p.size(d) != 1) {
      perm.push_back(d);
      r *= p.size(d);
    } else {
      kept.push_back(d);
    }
  }
  if (perm.empty()) return p.reshape(target);
  if (p.numel() == 0) return zeros(target, TensorOptions(p.dtype()).device(p.device()));
  perm.insert(perm.end(), kept.begin(), kept.end());
  const Tensor q = p.permute(perm).contiguous().view({r, p.numel() / r});
  return product(ones({1, r}, TensorOptions(p.dtype()).device(p.device())), q, Tensor(), op).view(target);
}

// dL/da for out = a @ b: g @ b^T, summed over a's broadcast batch dims.
Tensor grad_left(const Tensor& g, const Tensor& a, const Tensor& b, const char* op) {
  return reduce_batch(product(g, b.transpose(-1, -2), Tensor(), op), a.sizes(), op);
}

// dL/db for out = a @ b: a^T @ g, summed over b's broadcast batch dims. When b is one
// matrix shared by every batch (x @ W), the batch folds into the GEMM's inner dim instead.
Tensor grad_right(const Tensor& g, const Tensor& a, const Tensor& b, const char* op) {
  const int64_t b_batch = shape_numel(Shape(b.sizes().begin(), b.sizes().end() - 2));
  if (g.dim() > 2 && b_batch == 1 && a.dim() == g.dim()) {
    const int64_t rows = shape_numel(Shape(g.sizes().begin(), g.sizes().end() - 1));  // explicit: k or m may be 0
    const Tensor a2 = a.reshape({rows, a.size(-1)}), g2 = g.reshape({rows, g.size(-1)});
    if (a2.size(0) == g2.size(0)) return product(a2.transpose(0, 1), g2, Tensor(), op).view(b.sizes());
  }
  return reduce_batch(product(a.transpose(-1, -2), g, Tensor(), op), b.sizes(), op);
}

// The differentiable product behind matmul, mm and bmm (shapes already checked).
Tensor product_op(const char* op, const Tensor& a, const Tensor& b) {
  Tensor out = product(a, b, Tensor(), op);
  return record(op, out, {a, b}, [a = a.detach(), b = b.detach(), op](const Tensor& g_in, const std::vector<bool>& n) {
    const Tensor g = g_in.to(a.dtype());
    return std::vector<Tensor>{n[0] ? grad_left(g, a, b, op) : Tensor(), n[1] ? grad_right(g, a, b, op) : Tensor()};
  });
}

}  // namespace

Tensor matmul(const Tensor& a, const Tensor& b) {
  const char* op = "matmul";
  check_pair(op, a, b);
  TC_CHECK(a.dim() >= 1 && b.dim() >= 1, op, "both arguments to matmul need to be at least 1D, but they are ", a.dim(),
           "D and ", b.dim(), "D");
  check_dtypes(op, a, b);
  // NumPy: a 1-d left operand is a row (n = 1), a 1-d right operand a column (m = 1); the
  // added dim is removed from the result.
  const Tensor a2 = a.dim() == 1 ? a.unsqueeze(0) : a;
  const Tensor b2 = b.dim() == 1 ? b.unsqueeze(1) : b;
  check_product(op, a2, b2, a, b);
  Tensor out = product_op(op, a2, b2);
  if (a.dim() == 1) out = out.squeeze(-2);
  if (b.dim() == 1) out = out.squeeze(-1);
  return out;
}

Tensor mm(const Tensor& a, const Tensor& b) {
  check_pair("mm", a, b);
  TC_CHECK(a.dim() == 2 && b.dim() == 2, "mm", "expected 2-D tensors, got ", shape_str(a.sizes()), " and ",
           shape_str(b.sizes()));
  check_dtypes("mm", a, b);
  check_product("mm", a, b, a, b);
  return product_op("mm", a, b);
}

Tensor bmm(const Tensor& a, const Tensor& b) {
  check_pair("bmm", a, b);
  TC_CHECK(a.dim() == 3 && b.dim() == 3, "bmm", "expected 3-D tensors, got ", shape_str(a.sizes()), " and ",
           shape_str(b.sizes()));
  check_dtypes("bmm", a, b);
  if (a.size(0) != b.size(0)) fail_shapes("bmm", a, b);  // bmm does not broadcast
  check_product("bmm", a, b, a, b);
  return product_op("bmm", a, b);
}

namespace {

// linear's argument checks, for `op` (linear or linear_activation).
void check_linear(const char* op, const Tensor& input, const Tensor& weight, const Tensor& bias) {
  check_pair(op, input, weight);
  TC_CHECK(input.dim() >= 1, op, "expected an input with at least 1 dim, got ", shape_str(input.sizes()));
  TC_CHECK(weight.dim() == 2, op, "expected a 2-D weight (out_features, in_features), got ", shape_str(weight.sizes()));
  check_dtypes(op, input, weight);
  if (input.size(-1) != weight.size(1)) fail_shapes(op, input, weight);
  if (bias.defined()) {
    TC_CHECK(bias.device() == weight.device(), op, "expected bias on ", weight.device(), ", got ", bias.device());
    TC_CHECK(bias.dtype() == weight.dtype(), op, "expected bias to have dtype ", dtype_name(weight.dtype()), ", got ",
             dtype_name(bias.dtype()));
    TC_CHECK(bias.dim() == 1 && bias.size(0) == weight.size(0), op, "expected bias of shape ",
             shape_str({weight.size(0)}), ", got ", shape_str(bias.sizes()));
  }
}

}  // namespace

Tensor linear(const Tensor& input, const Tensor& weight, const Tensor& bias) {
  const char* op = "linear";
  check_linear(op, input, weight, bias);
  const int64_t in_f = weight.size(1), out_f = weight.size(0);
  const bool has_bias = bias.defined();
  // Leading dims flatten into the GEMM's rows (a view for the usual contiguous input);
  // the weight is read transposed through its strides.
  const int64_t rows = shape_numel(Shape(input.sizes().begin(), input.sizes().end() - 1));
  const Tensor x2 = input.detach().reshape({rows, in_f});
  const Tensor w = weight.detach();
  Shape out_shape = input.sizes();
  out_shape.back() = out_f;
  Tensor out = product(x2, w.t(), has_bias ? bias.detach() : Tensor(), op).view(out_shape);
  std::vector<Tensor> inputs{input, weight};
  if (has_bias) inputs.push_back(bias);
  // The gradients are written in the dtype they are consumed in (autograd/nodes.h): under
  // autocast the fp32 weight and bias get fp32 gradients straight from the GEMM.
  const DType gx_dt = autograd::detail::grad_dtype(input), gw_dt = autograd::detail::grad_dtype(weight),
              gb_dt = autograd::detail::grad_dtype(bias);
  return record(op, out, inputs,
                [x2, w, in_shape = input.sizes(), rows, out_f, has_bias, gx_dt, gw_dt, gb_dt, op](
                    const Tensor& g_in, const std::vector<bool>& n) {
                  // g feeds up to three products: on the float32 kernel it is widened once, here.
                  const Tensor g2 = cpu::widen_for_gemm(g_in.to(w.dtype()).reshape({rows, out_f}));
                  std::vector<Tensor> grads(has_bias ? 3 : 2);
                  if (n[0]) grads[0] = product(g2, w, Tensor(), op, gx_dt).view(in_shape);  // g @ W
                  if (n[1]) grads[1] = product(g2.t(), x2, Tensor(), op, gw_dt);            // g^T @ x
                  if (has_bias && n[2])                                                     // column sums of g
                    grads[2] =
                        product(ones({1, rows}, TensorOptions(g2.dtype()).device(w.device())), g2, Tensor(), op, gb_dt)
                            .view({out_f});
                  return grads;
                });
}

// The composition (what autograd records, and what every path computes) is
// activation(linear(input, weight, bias)). Without a graph to record, the CPU runs the
// activation as the GEMM's post-op on the float32 accumulators: one pass over the output
// instead of two, and a 16-bit result rounded once instead of twice.
Tensor linear_activation(const Tensor& input, const Tensor& weight, const Tensor& bias, std::string_view activation) {
  const char* op = "linear_activation";
  TC_CHECK(activation == "relu" || activation == "gelu" || activation == "gelu_tanh", op,
           "activation must be \"relu\", \"gelu\" or \"gelu_tanh\", got \"", activation, "\"");
  auto act = [&](const Tensor& h) {
    return activation == "relu" ? impl::relu(h) : impl::gelu(h, activation == "gelu" ? "none" : "tanh");
  };
  check_linear(op, input, weight, bias);
  if (input.device().is_cuda() || (is_grad_enabled() && autograd::any_requires_grad({input, weight, bias})))
    return act(impl::linear(input, weight, bias));
  const int64_t in_f = weight.size(1), out_f = weight.size(0);
  const int64_t rows = shape_numel(Shape(input.sizes().begin(), input.sizes().end() - 1));
  Shape out_shape = input.sizes();
  out_shape.back() = out_f;
  const cpu::Activation epilogue = activation == "relu"   ? cpu::Activation::kRelu
                                   : activation == "gelu" ? cpu::Activation::kGelu
                                                          : cpu::Activation::kGeluTanh;
  bool applied = false;
  const Tensor h = product(input.detach().reshape({rows, in_f}), weight.detach().t(),
                           bias.defined() ? bias.detach() : Tensor(), op, std::nullopt, epilogue, &applied)
                       .view(out_shape);
  return applied ? h : act(h);
}

}  // namespace tc::impl
