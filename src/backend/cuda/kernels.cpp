// The CUDA backend's kernel table: what backend/cuda has kernels for. A kernel left out
// here raises "[name] no kernel for cuda tensors"; where a front end has a composite it
// runs that instead (add_layer_norm_forward: add, then layer_norm). Built only with CUDA
// (cmake/cuda.cmake).
#include <initializer_list>

#include "backend/cuda/amp_kernels.h"
#include "backend/cuda/conv.h"
#include "backend/cuda/copy.h"
#include "backend/cuda/dropout.h"
#include "backend/cuda/embedding.h"
#include "backend/cuda/loss.h"
#include "backend/cuda/loss_pointwise.h"
#include "backend/cuda/matmul.h"
#include "backend/cuda/norm.h"
#include "backend/cuda/optim.h"
#include "backend/cuda/pointwise.h"
#include "backend/cuda/pool.h"
#include "backend/cuda/reduce.h"
#include "backend/cuda/softmax.h"
#include "backend/registry.h"
#include "tensorcast/error.h"
#include "tensorcast/factories.h"

namespace tc::backend {

namespace {

// The elementwise loops' compute type: double where any operand is float64 or a 64/32-bit integer.
bool in_double(std::initializer_list<DType> dtypes) {
  for (DType t : dtypes)
    if (t == kFloat64 || t == kInt64 || t == kInt32) return true;
  return false;
}

void cat_into(const Tensor& out, const std::vector<Tensor>& parts, const std::vector<int64_t>& starts, int64_t dim) {
  for (size_t i = 0; i < parts.size(); ++i)  // one converting copy per part into its slice of out
    if (parts[i].numel() > 0) gpu::copy_into(out.narrow(dim, starts[i], parts[i].size(dim)), parts[i]);
}

void gelu(const Tensor& out, const Tensor& x, bool tanh_approx) {
  gpu::unary_map(out, x, "gelu", fn::Gelu{tanh_approx}, in_double({out.dtype(), x.dtype()}));
}

void gelu_backward(const Tensor& dx, const Tensor& g, const Tensor& x, bool tanh_approx) {
  gpu::binary_map(dx, g, x, "gelu", fn::GeluBackward{tanh_approx}, in_double({dx.dtype(), g.dtype(), x.dtype()}));
}

void layer_norm_backward(const Tensor& dx, const Tensor& dw, const Tensor& db, const Tensor& g, const Tensor& x,
                         const Tensor& mean, const Tensor& rstd, const Tensor& w, int64_t M, int64_t N,
                         const Tensor& dx_plus) {
  gpu::layer_norm_backward(dx, dw, db, g, x, mean, rstd, w, M, N);
  if (dx_plus.defined()) gpu::binary_map(dx, dx, dx_plus, "layer_norm_backward", fn::Add{}, in_double({dx.dtype()}));
}

// The epilogues (act, mul, rounded_act) are not fused here: the caller applies them.
bool matmul_into(const Tensor& a, const Tensor& b, const Tensor& bias, const Tensor& c, const char* op,
                 cpu::Activation act, const Tensor& mul, cpu::Activation rounded_act) {
  gpu::matmul_into(a, b, bias, c, op);
  return act == cpu::Activation::kNone && !mul.defined() && rounded_act == cpu::Activation::kNone;
}

// cuBLASLt reads 16-bit operands as they are.
Tensor widen_for_gemm(const Tensor& t) { return t; }

// One band (the whole matrix); keep_float leaves the float32 probabilities in s as well.
void sdpa_probs(const Tensor& p, const Tensor& s, double scale, bool causal, int64_t first_row, bool keep_float) {
  TC_CHECK(first_row == 0, "scaled_dot_product_attention", "internal: the CUDA kernel takes the whole matrix");
  if (!keep_float) {
    gpu::sdpa_probs(p, s, scale, causal);
    return;
  }
  gpu::sdpa_probs(s, s, scale, causal);
  if (!p.is_same(s)) gpu::copy_into(p, s);
}

// An undefined inv_scale: a scale of exactly 1 makes the kernel a read-only check.
void non_finite_check_and_unscale(const std::vector<Tensor>& grads, const Tensor& found_inf, const Tensor& inv_scale) {
  if (inv_scale.defined()) {
    gpu::amp_non_finite_check_and_unscale_(grads, found_inf, inv_scale);
    return;
  }
  const Tensor one = empty({}, TensorOptions(kFloat32).device(found_inf.device()));
  gpu::fill(one, 1.0);
  gpu::amp_non_finite_check_and_unscale_(grads, found_inf, one);
}

// The fused steps update float32 weights (a parameter, or a 16-bit one's float32 master)
// with float32 state; Pure modes and float64 parameters run on the CPU only so far.
void check_fused_step(const optim::detail::FusedStep& f) {
  TC_CHECK(!f.has_copy16, "optim", "internal: a 16-bit weight copy to write on CUDA");
  TC_CHECK(f.weight_dtype == kFloat32 && !f.pure && f.state_dtype == kFloat32, "optim",
           "on CUDA the optimizers update float32 parameters and 16-bit ones through float32 master weights; got a ",
           dtype_name(f.param_dtype), " parameter", f.pure ? " in a Pure weight-update mode" : "");
}

void fused_sgd_step(const optim::detail::FusedStep& f, const optim::detail::SGDScalars<float>& k, const bool* flags) {
  check_fused_step(f);
  gpu::fused_sgd_step(f, k, flags);
}

void fused_adam_step(const optim::detail::FusedStep& f, const optim::detail::AdamScalars<float>& k, const bool* flags) {
  check_fused_step(f);
  gpu::fused_adam_step(f, k, flags);
}

// The forward saves the argmax indices themselves.
Tensor max_pool2d_indices(const Tensor&, const Tensor& saved, const cpu::PoolParams&) { return saved; }

}  // namespace

void register_cuda(Registry& registry) {
  Kernels k;
  k.copy_into = &gpu::copy_into;
  k.fill = &gpu::fill;
  k.transfer = &gpu::transfer;
  k.cat_into = &cat_into;
  k.gelu = &gelu;
  k.gelu_backward = &gelu_backward;
  k.sum_kernel = &gpu::sum_kernel;
  k.var_kernel = &gpu::var_kernel;
  k.minmax_kernel = &gpu::minmax_kernel;
  k.scatter_along_dim = &gpu::scatter_along_dim;
  k.softmax_forward = &gpu::softmax_forward;
  k.softmax_backward = &gpu::softmax_backward;
  k.layer_norm_forward = &gpu::layer_norm_forward;
  k.layer_norm_backward = &layer_norm_backward;
  k.batch_norm_forward = &gpu::batch_norm_forward;
  k.batch_norm_backward = &gpu::batch_norm_backward;
  k.mse_loss_sum = &gpu::mse_loss_sum;
  k.bce_with_logits = &gpu::bce_with_logits;
  k.bce_with_logits_sum = &gpu::bce_with_logits_sum;
  k.bce_with_logits_backward = &gpu::bce_with_logits_backward;
  k.dropout_mask = &gpu::dropout_mask;
  k.dropout_apply = &gpu::dropout_apply;
  k.embedding_indices = &gpu::embedding_indices;
  k.embedding_gather = &gpu::embedding_gather;
  k.embedding_scatter_add = &gpu::embedding_scatter_add;
  k.conv2d_forward = &gpu::conv2d_forward;
  k.conv2d_backward_data = &gpu::conv2d_backward_data;
  k.conv2d_backward_weights = &gpu::conv2d_backward_weights;
  k.class_targets = &gpu::class_targets;
  k.cross_entropy_forward = &gpu::cross_entropy_forward;
  k.cross_entropy_backward = &gpu::cross_entropy_backward;
  k.nll_loss_forward = &gpu::nll_loss_forward;
  k.nll_loss_backward = &gpu::nll_loss_backward;
  k.matmul_into = &matmul_into;
  k.widen_for_gemm = &widen_for_gemm;
  k.sdpa_probs = &sdpa_probs;
  k.sdpa_probs_backward = &gpu::sdpa_probs_backward;
  k.amp_non_finite_check_and_unscale_ = &non_finite_check_and_unscale;
  k.amp_update_scale_ = &gpu::amp_update_scale_;
  k.fused_sgd_step = &fused_sgd_step;
  k.fused_adam_step = &fused_adam_step;
  k.max_pool2d_forward = &gpu::max_pool2d_forward;
  k.max_pool2d_backward = &gpu::max_pool2d_backward;
  k.max_pool2d_indices = &max_pool2d_indices;
  k.avg_pool2d_forward = &gpu::avg_pool2d_forward;
  k.avg_pool2d_backward = &gpu::avg_pool2d_backward;
  k.adaptive_avg_pool2d_forward = &gpu::adaptive_avg_pool2d_forward;
  k.adaptive_avg_pool2d_backward = &gpu::adaptive_avg_pool2d_backward;
#define TC_UNARY(F) k.map<fn::F>() = &gpu::unary_map<fn::F>;
#define TC_BINARY(F) k.map<fn::F>() = &gpu::binary_map<fn::F>;
#define TC_TERNARY(F) k.map<fn::F>() = &gpu::ternary_map<fn::F>;
  TC_UNARY_FNS(TC_UNARY)
  TC_BINARY_FNS(TC_BINARY)
  TC_TERNARY_FNS(TC_TERNARY)
#undef TC_UNARY
#undef TC_BINARY
#undef TC_TERNARY
  registry.add(DeviceType::CUDA, "cuda", k);
}

}  // namespace tc::backend
