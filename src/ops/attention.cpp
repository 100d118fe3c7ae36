// scaled_dot_product_attention: the fused kernel (backend/cpu/loops/attention.h) with its
// recomputing backward, or PyTorch's math composite where the kernel does not apply. On
// CPUs with AVX-512 BF16, bfloat16 runs on its dot products (attention_bf16 below). On
// CUDA, and on CPUs with a native 16-bit GEMM otherwise (float16 on AMX-FP16 or
// AVX512-FP16): a product path on the device's GEMMs with float32 scores
// (attention_products below), or the composite.
#include <algorithm>
#include <cmath>
#include <limits>

#include "autograd/nodes.h"
#include "backend/kernels.h"
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

// The composite, as torch's math backend: every piece an op, so autograd (to any order), masks,
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

// The fused paths' gradients with create_graph: the composite's (no dropout) recomputed
// with recorded ops and differentiated, so that they differentiate again.
std::vector<Tensor> recomputed_attention_grads(const Tensor& g, const Tensor& q, const Tensor& k, const Tensor& v,
                                               const Tensor& mask, bool causal, double scale,
                                               const std::vector<bool>& needs) {
  return autograd::detail::recomputed_grads(
      [&](const std::vector<Tensor>& in) { return attention_math(in[0], in[1], in[2], mask, 0.0, causal, scale); },
      {q, k, v}, g, needs);
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
  backend::kernels_for(c.device())
      .matmul_into(a, b, Tensor(), c, kOp, cpu::Activation::kNone, Tensor(), cpu::Activation::kNone);
}

// A device with the fused attention kernels (the CPU) runs attention as a cache-blocked
// host: the product path in batch chunks and causal bands, outputs laid out (B, L, H, Ev)
// and q, k, v's gradients in one block. Elsewhere (cuBLASLt writes only outputs whose
// batch dims share one stride) the whole matrix at once, in plain layouts.
bool cache_blocked(Device dev) { return static_cast<bool>(backend::kernels_for(dev).sdpa_forward); }

// A band of query rows [i0, i1) that sees the keys [0, n), and the key block [k0, k1)
// whose gradients the backward computes from the rows [k0, L) that see it.
struct Band {
  int64_t i0, i1, n, k0, k1;
};

// Rows per band of the cache-blocked causal product path (at least): the products skip the key
// blocks above the diagonal (a quarter of the work at L = 128, half as L grows) while
// each stays large enough to run at the GEMM kernel's rate.
constexpr int64_t kBandRows = 64;

// One band, the whole (L, S) matrix, but for causal self-attention (L == S) on a
// cache-blocked device: bands of kBandRows or more rows, each seeing the keys up to its
// last row.
std::vector<Band> bands(int64_t L, int64_t S, bool causal, Device dev) {
  if (!causal || L != S || !cache_blocked(dev) || L < 2 * kBandRows) return {{0, L, S, 0, S}};
  const int64_t count = L / kBandRows, rows = (L + count - 1) / count;
  std::vector<Band> out;
  for (int64_t i0 = 0; i0 < L; i0 += rows) {
    const int64_t i1 = std::min(L, i0 + rows);
    out.push_back({i0, i1, i1, i0, i1});
  }
  return out;
}

Tensor rows(const Tensor& t, int64_t first, int64_t end) { return t.narrow(-2, first, end - first); }
Tensor keys(const Tensor& t, const Band& b) { return t.narrow(-2, 0, b.n); }
// The band's part of an (..., L, S) matrix, and the part the backward's key pass reads.
Tensor band_of(const Tensor& m, const Band& b) { return rows(m, b.i0, b.i1).narrow(-1, 0, b.n); }
Tensor key_block_of(const Tensor& m, const Band& b) { return rows(m, b.k0, m.size(-2)).narrow(-1, b.k0, b.k1 - b.k0); }

// The band's probabilities softmax(scale q k^T, masked) from its float32 scores (already
// in `scores`), in float32 and rounded once into p (float32: p may be scores; or the
// inputs' 16-bit dtype); keep_float also leaves the float32 probabilities in `scores`.
// Without a mask sdpa_probs does the scale, causal mask, softmax and rounding in one pass
// per row; a mask (one band: the cache-blocked path takes none) goes through the composite.
void probs(const Tensor& p, const Tensor& scores, const Tensor& mask, const Band& b, bool causal, double scale,
           bool keep_float) {
  const Device dev = scores.device();
  const backend::Kernels& kernels = backend::kernels_for(dev);
  if (!mask.defined()) {
    kernels.sdpa_probs(band_of(p, b), band_of(scores, b), scale, causal, b.i0, keep_float && !p.is_same(scores));
    return;
  }
  Tensor logits = impl::mul(scores, scale);
  const Tensor minus_inf = full({}, -std::numeric_limits<double>::infinity(), TensorOptions(kFloat32).device(dev));
  if (mask.dtype() == kBool)
    logits = impl::where(mask, logits, minus_inf);
  else
    logits = impl::add(logits, mask.to(kFloat32));
  kernels.softmax_forward(scores, logits, scores.dim() - 1, false);
  if (!p.is_same(scores)) Tensor(p).copy_(scores);  // a handle: the same storage
}

void probs_backward(const Tensor& ds, const Tensor& dp, const Tensor& p, const Band& b, double scale) {
  backend::kernels_for(p.device()).sdpa_probs_backward(band_of(ds, b), band_of(dp, b), band_of(p, b), scale);
}

// The product path's batch chunks: calls f(first, count) over the leading dim so that a
// chunk's (..., L, S) float32 scores stay within kChunkScores elements on the CPU (cache
// sized; the path is taken only where one batch entry fits kMaxScores). Not cache-blocked,
// a mask, or no batch dim: one chunk.
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

// The output (..., L, Ev) of attention over q (..., L, E) and v (..., S, Ev). Cache-blocked,
// its memory is (B, L, H, Ev) for a 4-d (B, H, L, Ev) result (as PyTorch's CPU flash kernel),
// so that merging the heads afterwards, out.transpose(1, 2).reshape(B, L, H * Ev), is a
// view and not a copy (cuBLASLt writes only outputs whose batch dims share one stride).
Tensor new_output(const Tensor& q, const Tensor& v) {
  Shape osz(q.sizes().begin(), q.sizes().end() - 1);
  osz.push_back(v.size(-1));
  return osz.size() == 4 && cache_blocked(q.device())
             ? make_tensor({osz[0], osz[2], osz[1], osz[3]}, q.dtype(), q.device()).transpose(1, 2)
             : make_tensor(osz, q.dtype(), q.device());
}

// Each query row's log-sum-exp, saved by a fused forward for its backward: contiguous
// float32 (batch, L) for q (..., L, E).
Tensor new_lse(const Tensor& q) {
  return make_tensor({q.numel() / (q.size(-2) * q.size(-1)), q.size(-2)}, kFloat32, q.device());
}

// New gradients for q, k and v (those asked for, each of its input's shape, in dt).
// Cache-blocked, when all three are wanted and are evenly spaced views of one dense block (selected
// from one projection, as nn::GPT's attention does), they share one new block of that
// layout: the autograd engine then hands the projection its gradient as that block,
// without copying the three parts together (autograd/nodes.h).
std::vector<Tensor> qkv_grads(const Tensor& q, const Tensor& k, const Tensor& v, const std::vector<bool>& needs,
                              DType dt) {
  const Device dev = q.device();
  const Tensor* in[3] = {&q, &k, &v};
  bool shared = cache_blocked(dev) && needs[0] && needs[1] && needs[2] && q.numel() > 0;
  for (const Tensor* t : in)
    shared = shared && t->dtype() == dt && t->impl()->storage == q.impl()->storage && t->sizes() == q.sizes() &&
             t->strides() == q.strides();
  if (shared) {
    const int64_t off[3] = {q.storage_offset(), k.storage_offset(), v.storage_offset()};
    const int64_t first = std::min({off[0], off[1], off[2]}), step = (std::max({off[0], off[1], off[2]}) - first) / 2;
    Shape sz{3}, st{step};
    sz.insert(sz.end(), q.sizes().begin(), q.sizes().end());
    st.insert(st.end(), q.strides().begin(), q.strides().end());
    // The three views tile [first, first + 3 numel) exactly: evenly spaced, distinct, dense.
    bool even = step > 0 && off[0] != off[1] && off[1] != off[2] && off[0] != off[2];
    for (int64_t o : off) even = even && (o - first) % step == 0;
    if (even && !dense_stride_order(sz, st).empty()) {
      const Tensor block = make_tensor({3 * q.numel()}, dt, dev);
      std::vector<Tensor> out;
      for (int64_t o : off) out.push_back(make_view(block, q.sizes(), q.strides(), o - first));
      return out;
    }
  }
  std::vector<Tensor> out;
  for (int i = 0; i < 3; ++i) out.push_back(needs[i] ? make_tensor(in[i]->sizes(), dt, dev) : Tensor());
  return out;
}

// The path for q, k, v of one 16-bit or float32 dtype with the same batch dims, no dropout
// and a constant mask (or none), on CUDA, and on a CPU that multiplies 16-bit matrices
// natively (there its products run an order of magnitude faster than the fused kernel's
// float32 tiles): the probabilities above, rounded once to the inputs' dtype for the
// product with v (FlashAttention's rounding points). Like FlashAttention's, the backward
// recomputes them rather than keeping an (..., L, S) matrix alive from the forward to the
// backward: dv = P^T g, dP = g v^T (float32), dS = softmax's backward (float32) times
// scale, rounded once, dq = dS k, dk = dS^T q. (L, S) matrices exist within each pass, for
// a chunk of the batch at a time on the CPU, and there under causal masking only in the
// bands below the diagonal (each band's products read and write no other part).
void products_forward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out, const Tensor& mask,
                      bool causal, double scale) {
  const Device dev = q.device();
  const DType dt = q.dtype();
  Shape ssz(q.sizes().begin(), q.sizes().end() - 1);
  ssz.push_back(k.size(-2));
  const Tensor scores = make_tensor(ssz, kFloat32, dev);
  const Tensor P = dt == kFloat32 ? scores : make_tensor(ssz, dt, dev);
  for (const Band& b : bands(q.size(-2), k.size(-2), causal, dev)) {
    mm(rows(q, b.i0, b.i1), keys(k, b).transpose(-2, -1), band_of(scores, b));
    probs(P, scores, mask, b, causal, scale, /*keep_float=*/false);
    mm(band_of(P, b), keys(v, b), rows(out, b.i0, b.i1));
  }
}

// dq, dk, dv: undefined when not wanted, else q's, k's, v's shape and dtype.
void products_backward(const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& g, const Tensor& q,
                       const Tensor& k, const Tensor& v, const Tensor& mask, bool causal, double scale) {
  const Device dev = q.device();
  const DType dt = q.dtype();
  const int64_t L = q.size(-2);
  Shape ssz(q.sizes().begin(), q.sizes().end() - 1);
  ssz.push_back(k.size(-2));
  const bool need_ds = dq.defined() || dk.defined();
  const Tensor P = make_tensor(ssz, kFloat32, dev);                                   // float32 probabilities
  const Tensor Pd = dt == kFloat32 || !dv.defined() ? P : make_tensor(ssz, dt, dev);  // rounded for dv's product
  const Tensor dP = need_ds ? make_tensor(ssz, kFloat32, dev) : Tensor();
  const Tensor dS = need_ds ? make_tensor(ssz, dt, dev) : Tensor();  // scale * softmax's backward, rounded once
  const std::vector<Band> parts = bands(L, k.size(-2), causal, dev);
  for (const Band& b : parts) {
    mm(rows(q, b.i0, b.i1), keys(k, b).transpose(-2, -1), band_of(P, b));
    probs(Pd, P, mask, b, causal, scale, /*keep_float=*/true);
    if (!need_ds) continue;
    mm(rows(g, b.i0, b.i1), keys(v, b).transpose(-2, -1), band_of(dP, b));
    probs_backward(dS, dP, P, b, scale);
    if (dq.defined()) mm(band_of(dS, b), keys(k, b), rows(dq, b.i0, b.i1));
  }
  for (const Band& b : parts) {  // a key block's gradients from every row that sees it
    if (dv.defined()) mm(key_block_of(Pd, b).transpose(-2, -1), rows(g, b.k0, L), rows(dv, b.k0, b.k1));
    if (dk.defined()) mm(key_block_of(dS, b).transpose(-2, -1), rows(q, b.k0, L), rows(dk, b.k0, b.k1));
  }
}

Tensor attention_products(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask, bool causal,
                          double scale) {
  const Device dev = q.device();
  const DType dt = q.dtype();
  const bool one_chunk = !cache_blocked(dev) || mask.defined();
  const Tensor qd = q.detach(), kd = k.detach(), vd = v.detach(), md = mask.defined() ? mask.detach() : Tensor();
  const Tensor out = new_output(q, v);
  for_chunks(qd, kd, one_chunk, [&](int64_t b, int64_t n) {
    products_forward(chunk(qd, b, n), chunk(kd, b, n), chunk(vd, b, n), chunk(out, b, n), md, causal, scale);
  });
  return record(
      kOp, out, {q, k, v},
      [q, k, v, qd, kd, vd, md, causal, scale, dt, dev, one_chunk](const Tensor& g_in, const std::vector<bool>& needs) {
        const Tensor g = g_in.to(dt);
        if (is_grad_enabled()) return recomputed_attention_grads(g, q, k, v, md, causal, scale, needs);
        const std::vector<Tensor> grads = qkv_grads(qd, kd, vd, needs, dt);
        const Tensor &dq = grads[0], &dk = grads[1], &dv = grads[2];
        for_chunks(qd, kd, one_chunk, [&](int64_t b, int64_t n) {
          products_backward(chunk(dq, b, n), chunk(dk, b, n), chunk(dv, b, n), chunk(g, b, n), chunk(qd, b, n),
                            chunk(kd, b, n), chunk(vd, b, n), md, causal, scale);
        });
        return grads;
      },
      autograd::Differentiable::kTwice);
}

// bfloat16 on a CPU with AVX-512 BF16, rows of unit stride: both directions on its dot
// products (backend/cpu/loops/attention.h), with the product path's rounding points and no
// (L, S) matrix in memory at any length. Undefined where the kernels do not apply.
Tensor attention_bf16(const Tensor& q, const Tensor& k, const Tensor& v, bool causal, double scale) {
  const Tensor qd = q.detach(), kd = k.detach(), vd = v.detach();
  const Tensor out = new_output(q, v);
  const bool backward = autograd::will_record({q, k, v});
  const Tensor lse = backward ? new_lse(q) : Tensor();
  if (!backend::kernels_for(q.device()).sdpa_forward_bf16(out, lse, qd, kd, vd, scale, causal)) return Tensor();
  return record(
      kOp, out, {q, k, v},
      [q, k, v, qd, kd, vd, o = out.detach(), lse, causal, scale](const Tensor& g_in, const std::vector<bool>& needs) {
        Tensor g = g_in.to(kBFloat16);
        if (is_grad_enabled()) return recomputed_attention_grads(g, q, k, v, Tensor(), causal, scale, needs);
        if (g.stride(-1) != 1) g = g.contiguous();
        const std::vector<Tensor> grads = qkv_grads(qd, kd, vd, needs, kBFloat16);
        TC_CHECK(backend::kernels_for(qd.device())
                     .sdpa_backward_bf16(grads[0], grads[1], grads[2], g, qd, kd, vd, o, lse, scale, causal),
                 kOp, "internal: the bfloat16 backward refused inputs its forward took");
        return grads;
      },
      autograd::Differentiable::kTwice);
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
  const backend::Kernels& kernels = backend::kernels_for(q.device());
  if (!kernels.sdpa_forward) {  // the product path where it applies, else the composition
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
  const bool native16 = is_reduced_float(q.dtype()) && k.numel() > 0 && cpu_gemm16_path(q.dtype()) == Gemm16::kNative;
  if (native16 && q.dtype() == kBFloat16) {
    Tensor out = attention_bf16(q, k, v, is_causal, s);
    if (out.defined()) return out;
  }
  if (native16 && scores_per_entry(q, k) <= kMaxScores) return attention_products(q, k, v, Tensor(), is_causal, s);

  const Tensor out = new_output(q, v);
  const Tensor lse = new_lse(q);
  const Tensor qd = q.detach(), kd = k.detach(), vd = v.detach();
  kernels.sdpa_forward(out, lse, qd, kd, vd, s, is_causal);
  return record(
      kOp, out, {q, k, v},
      [q, k, v, qd, kd, vd, o = out.detach(), lse, s, is_causal](const Tensor& g_in, const std::vector<bool>& needs) {
        const Tensor g = g_in.to(o.dtype());
        if (is_grad_enabled()) return recomputed_attention_grads(g, q, k, v, Tensor(), is_causal, s, needs);
        const std::vector<Tensor> grads = qkv_grads(qd, kd, vd, needs, qd.dtype());
        backend::kernels_for(qd.device())
            .sdpa_backward(grads[0], grads[1], grads[2], g, qd, kd, vd, o, lse, s, is_causal);
        return grads;
      },
      autograd::Differentiable::kTwice);
}

}  // namespace tc::impl
