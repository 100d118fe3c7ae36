// scaled_dot_product_attention: the fused kernel (backend/cpu/attention.h) with its
// recomputing backward, or PyTorch's math composite where the kernel does not apply. On
// CUDA: a math path on the device's products and softmax kernels with float32 scores
// (attention_cuda below), or the composite.
#include "backend/cpu/attention.h"

#include <cmath>
#include <limits>

#include "backend/cuda/matmul.h"
#include "backend/cuda/softmax.h"
#include "core/tensor_impl.h"
#include "ops/impl.h"
#include "ops/pointwise.h"
#include "tensorcast/autograd.h"
#include "tensorcast/ops.h"

namespace tc::impl {

using autograd::record;

namespace {

constexpr const char* kOp = "scaled_dot_product_attention";

bool same_batch(const Tensor& a, const Tensor& b) {
  return a.dim() == b.dim() &&
         Shape(a.sizes().begin(), a.sizes().end() - 2) == Shape(b.sizes().begin(), b.sizes().end() - 2);
}

// Key j > query i: PyTorch's top-left causal mask, (L, S) bool on `device`.
Tensor causal_future(int64_t L, int64_t S, Device device) {
  const TensorOptions o = TensorOptions(kInt64).device(device);
  return gt(arange(static_cast<double>(S), o).unsqueeze(0), arange(static_cast<double>(L), o).unsqueeze(1));
}

// The composite, as torch's math backend: every piece an op, so autograd, masks,
// broadcasting of batch dims and float64 come for free.
Tensor attention_math(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask, double p, bool causal,
                      double scale) {
  Tensor att = impl::mul(impl::matmul(q, k.transpose(-2, -1)), scale);
  const double inf = std::numeric_limits<double>::infinity();
  if (causal) {
    att = impl::where(causal_future(q.size(-2), k.size(-2), att.device()),
                      full({}, -inf, TensorOptions(att.dtype()).device(att.device())), att);
  } else if (mask.defined() && mask.dtype() == kBool) {
    att = impl::where(mask, att, full({}, -inf, TensorOptions(att.dtype()).device(att.device())));
  } else if (mask.defined()) {
    att = impl::add(att, mask.dtype() == att.dtype() ? mask : mask.detach().to(att.dtype()));
  }
  att = impl::softmax(att, -1);
  if (p > 0) att = impl::dropout(att, p, true);
  return impl::matmul(att, v);
}

// Whether mask broadcasts to `shape` without widening it.
bool broadcasts_to(const Tensor& mask, const Shape& shape) {
  if (mask.dim() > static_cast<int64_t>(shape.size())) return false;
  for (int64_t i = 1; i <= mask.dim(); ++i)
    if (mask.size(-i) != 1 && mask.size(-i) != shape[shape.size() - static_cast<size_t>(i)]) return false;
  return true;
}

// The float32 probabilities softmax(scale q k^T, masked) (..., L, S) on the device: the
// product writes float32 scores (16-bit inputs on Tensor Cores), scaled, masked and
// softmaxed in float32.
Tensor attention_probs(const Tensor& qd, const Tensor& kd, const Tensor& mask, bool causal, double scale) {
  const Device dev = qd.device();
  Shape ssz(qd.sizes().begin(), qd.sizes().end() - 1);
  ssz.push_back(kd.size(-2));
  const Tensor scores = make_tensor(ssz, kFloat32, dev);
  gpu::matmul_into(qd, kd.transpose(-2, -1), Tensor(), scores, kOp);
  Tensor logits = impl::mul(scores, scale);
  const Tensor minus_inf = full({}, -std::numeric_limits<double>::infinity(), TensorOptions(kFloat32).device(dev));
  if (causal)
    logits = impl::where(causal_future(qd.size(-2), kd.size(-2), dev), minus_inf, logits);
  else if (mask.defined() && mask.dtype() == kBool)
    logits = impl::where(mask, logits, minus_inf);
  else if (mask.defined())
    logits = impl::add(logits, mask.to(kFloat32));
  const Tensor P = make_tensor(ssz, kFloat32, dev);
  gpu::softmax_forward(P, logits, P.dim() - 1, false);
  return P;
}

// The CUDA path for q, k, v of one 16-bit or float32 dtype with the same batch dims, no
// dropout and a constant mask (or none): the probabilities above, rounded once to the
// inputs' dtype for the product with v (FlashAttention's rounding points). Like
// FlashAttention's, the backward recomputes them rather than keeping an (..., L, S) matrix
// alive from the forward to the backward: dv = P^T g, dP = g v^T (float32), dS = softmax's
// backward (float32) times scale, rounded once, dq = dS k, dk = dS^T q. The (L, S) matrices
// exist within each of the two passes: a math path's peak, not a fused kernel's.
Tensor attention_cuda(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask, bool causal,
                      double scale) {
  const Device dev = q.device();
  const DType dt = q.dtype();
  const Tensor qd = q.detach(), kd = k.detach(), vd = v.detach(), md = mask.defined() ? mask.detach() : Tensor();
  Tensor Pd = attention_probs(qd, kd, md, causal, scale);
  if (dt != kFloat32) Pd = Pd.to(dt);
  Shape osz(q.sizes().begin(), q.sizes().end() - 1);
  osz.push_back(v.size(-1));
  Tensor out = make_tensor(osz, dt, dev);
  gpu::matmul_into(Pd, vd, Tensor(), out, kOp);
  return record(kOp, out, {q, k, v},
                [qd, kd, vd, md, causal, scale, dt, dev](const Tensor& g_in, const std::vector<bool>& needs) {
                  const Tensor g = g_in.to(dt);
                  const Tensor P = attention_probs(qd, kd, md, causal, scale);
                  Tensor dq, dk, dv;
                  if (needs[2]) {
                    const Tensor Pd = dt == kFloat32 ? P : P.to(dt);
                    dv = make_tensor(vd.sizes(), dt, dev);
                    gpu::matmul_into(Pd.transpose(-2, -1), g, Tensor(), dv, kOp);
                  }
                  if (needs[0] || needs[1]) {
                    const Tensor dP = make_tensor(P.sizes(), kFloat32, dev), dS = make_tensor(P.sizes(), kFloat32, dev);
                    gpu::matmul_into(g, vd.transpose(-2, -1), Tensor(), dP, kOp);
                    gpu::softmax_backward(dS, dP, P, P.dim() - 1, false);
                    const Tensor dSd = impl::mul(dS, scale).to(dt);
                    if (needs[0]) {
                      dq = make_tensor(qd.sizes(), dt, dev);
                      gpu::matmul_into(dSd, kd, Tensor(), dq, kOp);
                    }
                    if (needs[1]) {
                      dk = make_tensor(kd.sizes(), dt, dev);
                      gpu::matmul_into(dSd.transpose(-2, -1), qd, Tensor(), dk, kOp);
                    }
                  }
                  return std::vector<Tensor>{dq, dk, dv};
                });
}

}  // namespace

Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& attn_mask,
                                    double dropout_p, bool is_causal, std::optional<double> scale) {
  TC_CHECK(q.defined() && k.defined() && v.defined(), kOp, "got an undefined query, key or value");
  TC_CHECK(q.dim() >= 2 && k.dim() >= 2 && v.dim() >= 2, kOp,
           "expected query, key and value of at least 2 dims (..., L, E), got ", shape_str(q.sizes()), ", ",
           shape_str(k.sizes()), " and ", shape_str(v.sizes()));
  TC_CHECK(q.dtype() == k.dtype() && k.dtype() == v.dtype(), kOp,
           "expected query, key and value to have the same dtype, got ", dtype_name(q.dtype()), ", ",
           dtype_name(k.dtype()), " and ", dtype_name(v.dtype()));
  TC_CHECK(is_floating(q.dtype()), kOp, "expected floating query, key and value, got ", dtype_name(q.dtype()));
  op_util::check_same_device(kOp, q, k);
  op_util::check_same_device(kOp, q, v);
  TC_CHECK(q.size(-1) == k.size(-1), kOp, "query ", shape_str(q.sizes()), " and key ", shape_str(k.sizes()),
           " must have the same embedding size (last dim)");
  TC_CHECK(k.size(-2) == v.size(-2), kOp, "key ", shape_str(k.sizes()), " and value ", shape_str(v.sizes()),
           " must have the same sequence length (dim -2)");
  TC_CHECK(dropout_p >= 0 && dropout_p < 1, kOp, "dropout_p must be in [0, 1), got ", dropout_p);
  TC_CHECK(!(attn_mask.defined() && is_causal), kOp, "an explicit attn_mask should not be set when is_causal=true");
  if (attn_mask.defined()) {
    TC_CHECK(attn_mask.dtype() == kBool || is_floating(attn_mask.dtype()), kOp,
             "expected a bool or floating attn_mask, got ", dtype_name(attn_mask.dtype()));
    op_util::check_same_device(kOp, q, attn_mask);
  }
  const double s = scale.value_or(1.0 / std::sqrt(static_cast<double>(q.size(-1))));
  if (q.device().is_cuda()) {
    Shape ssz(q.sizes().begin(), q.sizes().end() - 1);
    ssz.push_back(k.size(-2));
    const bool direct = dropout_p == 0 && q.dtype() != kFloat64 && same_batch(q, k) && same_batch(q, v) &&
                        q.numel() > 0 && k.numel() > 0 && v.numel() > 0 &&
                        (!attn_mask.defined() || (!attn_mask.requires_grad() && broadcasts_to(attn_mask, ssz)));
    return direct ? attention_cuda(q, k, v, attn_mask, is_causal, s)
                  : attention_math(q, k, v, attn_mask, dropout_p, is_causal, s);
  }
  const bool fused = !attn_mask.defined() && dropout_p == 0 && q.dtype() != kFloat64 && same_batch(q, k) &&
                     same_batch(q, v) && q.numel() > 0 && q.size(-1) > 0;
  if (!fused) {
    return attention_math(q, k, v, attn_mask, dropout_p, is_causal, s);
  }

  // The output's memory is (batch..., L, H, Ev) for a 4-d (B, H, L, Ev) result (as
  // PyTorch's CPU flash kernel), so merging the heads afterwards, out.transpose(1, 2)
  // .reshape(B, L, H * Ev), is a view and not a copy.
  Shape osz(q.sizes().begin(), q.sizes().end() - 1);
  osz.push_back(v.size(-1));
  Tensor out;
  if (osz.size() == 4) {
    out = make_tensor({osz[0], osz[2], osz[1], osz[3]}, q.dtype(), q.device()).transpose(1, 2);
  } else {
    out = make_tensor(osz, q.dtype(), q.device());
  }
  const int64_t batch = q.numel() / (q.size(-2) * q.size(-1));
  const Tensor lse = make_tensor({batch, q.size(-2)}, kFloat32, q.device());
  const Tensor qd = q.detach(), kd = k.detach(), vd = v.detach();
  cpu::sdpa_forward(out, lse, qd, kd, vd, s, is_causal);
  return record(kOp, out, {q, k, v},
                [qd, kd, vd, o = out.detach(), lse, s, is_causal](const Tensor& g_in, const std::vector<bool>& needs) {
                  const Tensor g = g_in.to(o.dtype());
                  auto grad = [](bool needed, const Tensor& like) {
                    return needed ? make_tensor(like.sizes(), like.dtype(), like.device()) : Tensor();
                  };
                  Tensor dq = grad(needs[0], qd), dk = grad(needs[1], kd), dv = grad(needs[2], vd);
                  cpu::sdpa_backward(dq, dk, dv, g, qd, kd, vd, o, lse, s, is_causal);
                  return std::vector<Tensor>{dq, dk, dv};
                });
}

}  // namespace tc::impl
