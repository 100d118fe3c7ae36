// scaled_dot_product_attention: the fused kernel (backend/cpu/attention.h) with its
// recomputing backward, or PyTorch's math composite where the kernel does not apply.
#include "backend/cpu/attention.h"

#include <cmath>
#include <limits>

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

// The composite, as torch's math backend: every piece an op, so autograd, masks,
// broadcasting of batch dims and float64 come for free.
Tensor attention_math(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask, double p, bool causal,
                      double scale) {
  Tensor att = impl::mul(impl::matmul(q, k.transpose(-2, -1)), scale);
  const double inf = std::numeric_limits<double>::infinity();
  if (causal) {
    const int64_t L = q.size(-2), S = k.size(-2);
    const Tensor future = gt(arange(static_cast<double>(S), kInt64).unsqueeze(0),
                             arange(static_cast<double>(L), kInt64).unsqueeze(1));  // key j > query i
    att = impl::where(future, full({}, -inf, att.dtype()), att);
  } else if (mask.defined() && mask.dtype() == kBool) {
    att = impl::where(mask, att, full({}, -inf, att.dtype()));
  } else if (mask.defined()) {
    att = impl::add(att, mask.dtype() == att.dtype() ? mask : mask.detach().to(att.dtype()));
  }
  att = impl::softmax(att, -1);
  if (p > 0) att = impl::dropout(att, p, true);
  return impl::matmul(att, v);
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
