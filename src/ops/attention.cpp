// scaled_dot_product_attention: the fused kernel (backend/cpu/attention.h) with its
// recomputing backward, or PyTorch's math composite where the kernel does not apply. On
// CUDA, and on CPUs with a native 16-bit GEMM (AMX, AVX512-BF16): a product path on the
// device's GEMMs with float32 scores (attention_products below), or the composite.
#include "backend/cpu/attention.h"

#include <cmath>
#include <limits>

#include "backend/cpu/dnnl_matmul.h"
#include "backend/cuda/matmul.h"
#include "backend/cuda/softmax.h"
#include "core/tensor_impl.h"
#include "ops/impl.h"
#include "ops/pointwise.h"
#include "tensorcast/autograd.h"
#include "tensorcast/gemm16.h"
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

// c = a @ b on the tensors' device (any strides; float32 c for 16-bit a, b: unrounded sums).
void mm(const Tensor& a, const Tensor& b, const Tensor& c) {
  if (c.device().is_cuda())
    gpu::matmul_into(a, b, Tensor(), c, kOp);
  else
    cpu::matmul_into(a, b, Tensor(), c, kOp);
}

// softmax(scale q k^T, masked) (..., L, S) as `dt`: the product writes float32 scores
// (16-bit inputs on Tensor Cores or the CPU's 16-bit kernel), scaled, masked and softmaxed
// in float32 and rounded once to dt (float32, or the inputs' 16-bit dtype). Without a mask
// sdpa_probs does the scale, causal mask, softmax and rounding in one pass per row (the
// CPU's path takes no mask).
Tensor attention_probs(const Tensor& qd, const Tensor& kd, const Tensor& mask, bool causal, double scale, DType dt) {
  const Device dev = qd.device();
  Shape ssz(qd.sizes().begin(), qd.sizes().end() - 1);
  ssz.push_back(kd.size(-2));
  const Tensor scores = make_tensor(ssz, kFloat32, dev);
  mm(qd, kd.transpose(-2, -1), scores);
  if (!mask.defined()) {
    const Tensor P = dt == kFloat32 ? scores : make_tensor(ssz, dt, dev);
    if (dev.is_cpu())
      cpu::sdpa_probs(P, scores, scale, causal);
    else
      gpu::sdpa_probs(P, scores, scale, causal);
    return P;
  }
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
  return dt == kFloat32 ? P : P.to(dt);
}

// The product path's batch chunks: calls f(first, count) over the leading dim so that a
// chunk's (..., L, S) float32 scores stay within kChunkScores elements on the CPU (cache
// sized; the path is taken only where one batch entry fits kMaxScores). CUDA, a mask, or
// no batch dim: one chunk.
constexpr int64_t kChunkScores = int64_t{1} << 18;
constexpr int64_t kMaxScores = int64_t{1} << 20;

int64_t scores_per_entry(const Tensor& q, const Tensor& k) {
  return q.dim() >= 3 ? q.numel() / q.size(0) / q.size(-1) * k.size(-2) : q.size(-2) * k.size(-2);
}

template <class F>
void for_chunks(const Tensor& q, const Tensor& k, bool one_chunk, F f) {
  if (one_chunk || q.dim() < 3) {
    f(0, -1);
    return;
  }
  const int64_t B = q.size(0), n = std::max<int64_t>(1, kChunkScores / std::max<int64_t>(1, scores_per_entry(q, k)));
  for (int64_t b = 0; b < B; b += n) f(b, std::min(n, B - b));
}

// Entries [first, first + count) of t along dim 0 (count -1: all of t).
Tensor chunk(const Tensor& t, int64_t first, int64_t count) {
  return count < 0 || !t.defined() ? t : t.narrow(0, first, count);
}

// The path for q, k, v of one 16-bit or float32 dtype with the same batch dims, no dropout
// and a constant mask (or none), on CUDA, and on a CPU that multiplies 16-bit matrices
// natively (there its products run an order of magnitude faster than the fused kernel's
// float32 tiles): the probabilities above, rounded once to the inputs' dtype for the
// product with v (FlashAttention's rounding points). Like FlashAttention's, the backward
// recomputes them rather than keeping an (..., L, S) matrix alive from the forward to the
// backward: dv = P^T g, dP = g v^T (float32), dS = softmax's backward (float32) times
// scale, rounded once, dq = dS k, dk = dS^T q. (L, S) matrices exist within each pass, for
// a chunk of the batch at a time on the CPU.
Tensor attention_products(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask, bool causal,
                          double scale) {
  const Device dev = q.device();
  const DType dt = q.dtype();
  const bool one_chunk = dev.is_cuda() || mask.defined();
  const Tensor qd = q.detach(), kd = k.detach(), vd = v.detach(), md = mask.defined() ? mask.detach() : Tensor();
  // On the CPU the output's memory is (B, L, H, Ev) for a 4-d (B, H, L, Ev) result, so
  // that merging the heads afterwards, out.transpose(1, 2).reshape(B, L, H * Ev), is a view
  // (cuBLASLt writes only outputs whose batch dims share one stride).
  Shape osz(q.sizes().begin(), q.sizes().end() - 1);
  osz.push_back(v.size(-1));
  const Tensor out = osz.size() == 4 && dev.is_cpu()
                         ? make_tensor({osz[0], osz[2], osz[1], osz[3]}, dt, dev).transpose(1, 2)
                         : make_tensor(osz, dt, dev);
  for_chunks(qd, kd, one_chunk, [&](int64_t b, int64_t n) {
    mm(attention_probs(chunk(qd, b, n), chunk(kd, b, n), md, causal, scale, dt), chunk(vd, b, n), chunk(out, b, n));
  });
  return record(
      kOp, out, {q, k, v},
      [qd, kd, vd, md, causal, scale, dt, dev, one_chunk](const Tensor& g_in, const std::vector<bool>& needs) {
        const Tensor g = g_in.to(dt);
        auto grad = [&](bool needed, const Tensor& like) {
          return needed ? make_tensor(like.sizes(), dt, dev) : Tensor();
        };
        const Tensor dq = grad(needs[0], qd), dk = grad(needs[1], kd), dv = grad(needs[2], vd);
        for_chunks(qd, kd, one_chunk, [&](int64_t b, int64_t n) {
          const Tensor qc = chunk(qd, b, n), kc = chunk(kd, b, n), vc = chunk(vd, b, n), gc = chunk(g, b, n);
          const Tensor P = attention_probs(qc, kc, md, causal, scale, kFloat32);
          if (dv.defined()) mm((dt == kFloat32 ? P : P.to(dt)).transpose(-2, -1), gc, chunk(dv, b, n));
          if (!dq.defined() && !dk.defined()) return;
          const Tensor dP = make_tensor(P.sizes(), kFloat32, dev);
          mm(gc, vc.transpose(-2, -1), dP);
          const Tensor dSd = make_tensor(P.sizes(), dt, dev);  // scale * softmax's backward, rounded once
          if (dev.is_cuda())
            gpu::sdpa_probs_backward(dSd, dP, P, scale);
          else
            cpu::sdpa_probs_backward(dSd, dP, P, scale);
          if (dq.defined()) mm(dSd, kc, chunk(dq, b, n));
          if (dk.defined()) mm(dSd.transpose(-2, -1), qc, chunk(dk, b, n));
        });
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
    return direct ? attention_products(q, k, v, attn_mask, is_causal, s)
                  : attention_math(q, k, v, attn_mask, dropout_p, is_causal, s);
  }
  const bool fused = !attn_mask.defined() && dropout_p == 0 && q.dtype() != kFloat64 && same_batch(q, k) &&
                     same_batch(q, v) && q.numel() > 0 && q.size(-1) > 0;
  if (!fused) {
    return attention_math(q, k, v, attn_mask, dropout_p, is_causal, s);
  }
  if (is_reduced_float(q.dtype()) && k.numel() > 0 && cpu_gemm16_path(q.dtype()) == Gemm16::kNative &&
      scores_per_entry(q, k) <= kMaxScores)
    return attention_products(q, k, v, Tensor(), is_causal, s);

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
