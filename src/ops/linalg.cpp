// Matrix products: matmul (NumPy semantics), mm, bmm and linear, with their backward
// formulas. Every product is one call to the CPU batched GEMM (backend/cpu/onednn/matmul.h),
// which reads transposed and broadcast operands through strides, so no op here copies its
// inputs; the bias of linear is fused into the GEMM. bfloat16 gradients are bfloat16 GEMMs with float32 accumulation;
// linear writes its gradients in the dtype they are consumed in (float32 for an autocast copy of an fp32 weight:
// autograd/nodes.h).
#include <numeric>
#include <tuple>

#include "autograd/nodes.h"
#include "backend/kernels.h"
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
// the float32 accumulators without rounding them to 16 bits. act, mul: an epilogue,
// c = act(a @ b + bias) * mul; or rounded_act, an activation of the rounded c (the
// matmul_into kernel's); *applied says whether it ran.
Tensor product(const Tensor& a, const Tensor& b, const Tensor& bias, const char* op,
               std::optional<DType> out_dtype = std::nullopt, cpu::Activation act = cpu::Activation::kNone,
               bool* applied = nullptr, const Tensor& mul = Tensor(),
               cpu::Activation rounded_act = cpu::Activation::kNone) {
  const int64_t nd = std::max(a.dim(), b.dim());
  const Tensor ap = pad_dims(a, nd), bp = pad_dims(b, nd);
  Shape out(static_cast<size_t>(nd));
  for (int64_t d = 0; d < nd - 2; ++d) out[d] = ap.size(d) == 1 ? bp.size(d) : ap.size(d);
  out[nd - 2] = ap.size(-2);
  out[nd - 1] = bp.size(-1);
  Tensor c = make_tensor(out, out_dtype.value_or(a.dtype()), a.device());
  const Tensor ad = ap.detach(), bd = bp.detach(), biasd = bias.defined() ? bias.detach() : Tensor();
  const bool done = backend::kernels_for(c.device()).matmul_into(ad, bd, biasd, c, op, act, mul, rounded_act);
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
  // a and b saved as they are: with create_graph (grad mode on in backward) the gradients
  // are the same products, recorded.
  return record(
      op, out, {a, b},
      [a, b, op](const Tensor& g_in, const std::vector<bool>& n) {
        const Tensor g = g_in.to(a.dtype());
        if (is_grad_enabled())
          return std::vector<Tensor>{
              n[0] ? impl::sum_to_size(impl::matmul(g, b.transpose(-1, -2)), a.sizes()) : Tensor(),
              n[1] ? impl::sum_to_size(impl::matmul(a.transpose(-1, -2), g), b.sizes()) : Tensor()};
        return std::vector<Tensor>{n[0] ? grad_left(g, a, b, op) : Tensor(), n[1] ? grad_right(g, a, b, op) : Tensor()};
      },
      autograd::Differentiable::kTwice);
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

void check_bias(const char* op, const Tensor& bias, const Tensor& weight) {
  if (!bias.defined()) return;
  TC_CHECK(bias.device() == weight.device(), op, "expected bias on ", weight.device(), ", got ", bias.device());
  TC_CHECK(bias.dtype() == weight.dtype(), op, "expected bias to have dtype ", dtype_name(weight.dtype()), ", got ",
           dtype_name(bias.dtype()));
  TC_CHECK(bias.dim() == 1 && bias.size(0) == weight.size(0), op, "expected bias of shape ",
           shape_str({weight.size(0)}), ", got ", shape_str(bias.sizes()));
}

// linear's argument checks, for `op` (linear, linear_activation, mlp).
void check_linear(const char* op, const Tensor& input, const Tensor& weight, const Tensor& bias) {
  check_pair(op, input, weight);
  TC_CHECK(input.dim() >= 1, op, "expected an input with at least 1 dim, got ", shape_str(input.sizes()));
  TC_CHECK(weight.dim() == 2, op, "expected a 2-D weight (out_features, in_features), got ", shape_str(weight.sizes()));
  check_dtypes(op, input, weight);
  if (input.size(-1) != weight.size(1)) fail_shapes(op, input, weight);
  check_bias(op, bias, weight);
}

// What linear's backward needs of its forward: x2 = the input as (rows, in_f), the weight,
// and the dtype each gradient is consumed in (autograd/nodes.h: under autocast the fp32
// weight and bias get fp32 gradients straight from the GEMM).
struct LinearSaved {
  Tensor x2, w;
  bool has_bias = false;
  DType gx_dt, gw_dt, gb_dt;
  LinearSaved(const Tensor& x2_, const Tensor& input, const Tensor& weight, const Tensor& bias)
      : x2(x2_),
        w(weight.detach()),
        has_bias(bias.defined()),
        gx_dt(autograd::detail::grad_dtype(input)),
        gw_dt(autograd::detail::grad_dtype(weight)),
        gb_dt(autograd::detail::grad_dtype(bias)) {}

  // {dL/dx2, dL/dw, dL/dbias} (those asked for; the others undefined) from g2 = dL/dout, (rows, out_f),
  // already in the dtype the products read (widen_for_gemm: g2 feeds up to three of them).
  std::vector<Tensor> grads(const Tensor& g2, bool need_x, bool need_w, bool need_b, const char* op) const {
    std::vector<Tensor> r(3);
    if (need_x) r[0] = product(g2, w, Tensor(), op, gx_dt);  // g @ W
    // On AMX the weight's and the bias's float32 gradients come out of one pass over g's
    // tiles where the weight-gradient kernel takes the product (backend/cpu/x86/weight_grad.h).
    const backend::Kernels& kernels = backend::kernels_for(w.device());
    if (need_w && has_bias && need_b && kernels.weight_and_bias_grads && gw_dt == kFloat32 && gb_dt == kFloat32) {
      std::tie(r[1], r[2]) = kernels.weight_and_bias_grads(g2.t(), x2);
      if (r[1].defined()) return r;
    }
    if (need_w) r[1] = product(g2.t(), x2, Tensor(), op, gw_dt);  // g^T @ x
    if (has_bias && need_b)                                       // column sums of g
      r[2] = product(ones({1, g2.size(0)}, TensorOptions(g2.dtype()).device(w.device())), g2, Tensor(), op, gb_dt)
                 .view({w.size(0)});
    return r;
  }
};

// input's leading dims flattened into the GEMM's rows (a view for the usual contiguous input).
Tensor as_rows(const Tensor& input) {
  const int64_t rows = shape_numel(Shape(input.sizes().begin(), input.sizes().end() - 1));  // explicit: may be 0
  return input.detach().reshape({rows, input.size(-1)});
}

Shape with_last(Shape s, int64_t last) {
  s.back() = last;
  return s;
}

}  // namespace

Tensor linear(const Tensor& input, const Tensor& weight, const Tensor& bias) {
  const char* op = "linear";
  check_linear(op, input, weight, bias);
  const LinearSaved saved(as_rows(input), input, weight, bias);
  // The weight is read transposed through its strides.
  Tensor out = product(saved.x2, saved.w.t(), bias.defined() ? bias.detach() : Tensor(), op)
                   .view(with_last(input.sizes(), weight.size(0)));
  std::vector<Tensor> inputs{input, weight};
  if (bias.defined()) inputs.push_back(bias);
  return record(
      op, out, inputs,
      [saved, input, weight, op](const Tensor& g_in, const std::vector<bool>& n) {
        const int64_t rows = saved.x2.size(0);
        if (is_grad_enabled()) {  // create_graph: the same products, recorded
          const Tensor g2 = g_in.to(weight.dtype()).reshape({rows, weight.size(0)});
          std::vector<Tensor> grads{n[0] ? impl::matmul(g2, weight).reshape(input.sizes()) : Tensor(),
                                    n[1] ? impl::matmul(g2.t(), input.reshape({rows, input.size(-1)})) : Tensor()};
          if (saved.has_bias) grads.push_back(n[2] ? impl::sum(g2, {0}) : Tensor());
          return grads;
        }
        const Tensor g2 = backend::kernels_for(saved.w.device())
                              .widen_for_gemm(g_in.to(saved.w.dtype()).reshape({rows, saved.w.size(0)}));
        std::vector<Tensor> grads = saved.grads(g2, n[0], n[1], saved.has_bias && n[2], op);
        if (grads[0].defined()) grads[0] = grads[0].view(input.sizes());
        if (!saved.has_bias) grads.pop_back();
        return grads;
      },
      autograd::Differentiable::kTwice);
}

namespace {

// The public activation as the backend's, whose enum also has kNone (no post-op). A value
// outside the enum (a cast integer) is refused here, before any kernel sees it.
cpu::Activation backend_activation(const char* op, Activation activation) {
  switch (activation) {
    case Activation::kRelu:
      return cpu::Activation::kRelu;
    case Activation::kGelu:
      return cpu::Activation::kGelu;
    case Activation::kGeluTanh:
      return cpu::Activation::kGeluTanh;
  }
  TC_FAIL(op, "activation must be Activation::kRelu, kGelu or kGeluTanh, got the value ", static_cast<int>(activation));
}

// The activation as its own (recorded) op.
Tensor apply(cpu::Activation act, const Tensor& h) {
  return act == cpu::Activation::kRelu ? impl::relu(h) : impl::gelu(h, act == cpu::Activation::kGelu ? "none" : "tanh");
}

}  // namespace

// The composition (what autograd records, and what every path computes) is
// activation(linear(input, weight, bias)). Without a graph to record, a device with the
// activation kernels (the CPU) runs ReLU, and GELU on float32, as the GEMM's post-op on the
// float32 accumulators: one pass over the output instead of two. A 16-bit GELU is looked
// up in the GEMM's rounded output (activation.h's table: a load per value, where an erf in
// the epilogue costs a sizeable share of the GEMM at gpt's shape), which gives the training
// forward's bits, rounded twice as PyTorch's linear then gelu: by the AMX kernel's epilogue
// as it writes each block (no pass of its own), else in place after the product.
Tensor linear_activation(const Tensor& input, const Tensor& weight, const Tensor& bias, Activation activation) {
  const char* op = "linear_activation";
  const cpu::Activation act = backend_activation(op, activation);
  check_linear(op, input, weight, bias);
  const backend::Kernels& kernels = backend::kernels_for(input.device());
  if (!kernels.activation_value || autograd::will_record({input, weight, bias}))
    return apply(act, impl::linear(input, weight, bias));
  const bool by_table = act != cpu::Activation::kRelu && (input.dtype() == kBFloat16 || input.dtype() == kFloat16);
  bool applied = false;
  const Tensor h =
      product(as_rows(input), weight.detach().t(), bias.defined() ? bias.detach() : Tensor(), op, std::nullopt,
              by_table ? cpu::Activation::kNone : act, &applied, Tensor(), by_table ? act : cpu::Activation::kNone)
          .view(with_last(input.sizes(), weight.size(0)));
  if (applied) return h;
  if (by_table) {
    kernels.activation_value(h, h, act);
    return h;
  }
  return apply(act, h);
}

// linear(activation(linear(x, W1, b1)), W2, b2). Without a graph: linear_activation then
// linear. Recorded on a device with the activation kernels (the CPU), one node whose
// backward needs no pass of its own for the activation: the forward's one pass over
// h = x W1^T + b1 writes y = act(h) and, over h, d = act'(h); the backward's product g W2
// takes "* d" as a oneDNN post-op, so dL/dh = (g W2) * d comes out of the GEMM (where
// oneDNN cannot fuse it, one multiply). It saves x, d, y and the weights, as the
// composition saves x, h and y. d is rounded to h's dtype (a 16-bit gradient differs from
// the composition's by its rounding order).
Tensor mlp(const Tensor& input, const Tensor& fc_weight, const Tensor& fc_bias, const Tensor& proj_weight,
           const Tensor& proj_bias, Activation activation) {
  const char* op = "mlp";
  const cpu::Activation act = backend_activation(op, activation);
  check_linear(op, input, fc_weight, fc_bias);
  TC_CHECK(proj_weight.defined() && proj_weight.dim() == 2 && proj_weight.size(1) == fc_weight.size(0), op,
           "expected a 2-D proj_weight (out_features, ", fc_weight.size(0), ") for fc_weight ",
           shape_str(fc_weight.sizes()), ", got ",
           proj_weight.defined() ? shape_str(proj_weight.sizes()) : "an undefined tensor");
  check_pair(op, input, proj_weight);
  check_dtypes(op, input, proj_weight);
  check_bias(op, proj_bias, proj_weight);
  const backend::Kernels& kernels = backend::kernels_for(input.device());
  if (!kernels.activation_and_derivative || !autograd::will_record({input, fc_weight, fc_bias, proj_weight, proj_bias}))
    return impl::linear(impl::linear_activation(input, fc_weight, fc_bias, activation), proj_weight, proj_bias);

  const LinearSaved fc(as_rows(input), input, fc_weight, fc_bias);
  Tensor d = product(fc.x2, fc.w.t(), fc_bias.defined() ? fc_bias.detach() : Tensor(), op);  // h, then act'(h)
  const Tensor y = make_tensor(d.sizes(), d.dtype(), d.device());
  kernels.activation_and_derivative(y, d, act);
  const LinearSaved proj(y, y, proj_weight, proj_bias);  // (y's own gradient is dL/dh's business)
  Tensor out = product(y, proj.w.t(), proj_bias.defined() ? proj_bias.detach() : Tensor(), op)
                   .view(with_last(input.sizes(), proj_weight.size(0)));
  std::vector<Tensor> inputs{input, fc_weight};
  if (fc_bias.defined()) inputs.push_back(fc_bias);
  inputs.push_back(proj_weight);
  if (proj_bias.defined()) inputs.push_back(proj_bias);
  return record(
      op, out, inputs,
      [fc, proj, d, in_shape = input.sizes(), op, inputs, act](const Tensor& g_in, const std::vector<bool>& n) {
        if (is_grad_enabled())  // create_graph: the composition's gradients, recorded
          return autograd::detail::recomputed_grads(
              [has_fc_bias = fc.has_bias, has_proj_bias = proj.has_bias, act](const std::vector<Tensor>& in) {
                size_t i = 2;
                const Tensor fc_b = has_fc_bias ? in[i++] : Tensor();
                const Tensor proj_w = in[i++];
                const Tensor proj_b = has_proj_bias ? in[i] : Tensor();
                return impl::linear(apply(act, impl::linear(in[0], in[1], fc_b)), proj_w, proj_b);
              },
              inputs, g_in, n);
        // n: input, fc_weight, [fc_bias], proj_weight, [proj_bias]
        const size_t ip = fc.has_bias ? 3 : 2;
        const bool need_fc = n[0] || n[1] || (fc.has_bias && n[2]);
        const Tensor g2 = backend::kernels_for(proj.w.device())
                              .widen_for_gemm(g_in.to(proj.w.dtype()).reshape({proj.x2.size(0), proj.w.size(0)}));
        const std::vector<Tensor> gp = proj.grads(g2, false, n[ip], proj.has_bias && n[ip + 1], op);
        std::vector<Tensor> fcg(3);
        if (need_fc) {
          // dL/dh = (g W2) * act'(h), in the dtype fc's products read (float32 when g2 is widened).
          bool fused = false;
          Tensor gh = product(g2, proj.w, Tensor(), op, g2.dtype(), cpu::Activation::kNone, &fused, d);
          if (!fused) gh = impl::mul(gh, d.to(gh.dtype()));
          fcg = fc.grads(gh, n[0], n[1], fc.has_bias && n[2], op);
          if (fcg[0].defined()) fcg[0] = fcg[0].view(in_shape);
        }
        std::vector<Tensor> grads{fcg[0], fcg[1]};
        if (fc.has_bias) grads.push_back(fcg[2]);
        grads.push_back(gp[1]);
        if (proj.has_bias) grads.push_back(gp[2]);
        return grads;
      },
      autograd::Differentiable::kTwice);
}

}  // namespace tc::impl
