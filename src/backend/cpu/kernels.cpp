// The CPU backend's kernel table: every kernel of kernels.def and every elementwise
// functor, but transfer (which the other device of a copy registers) and the AMP and
// optimizer steps that keep state in device memory (the host runs its own loops there).
#include "backend/cpu/conv2d.h"
#include "backend/cpu/loops/activation.h"
#include "backend/cpu/loops/amp_kernels.h"
#include "backend/cpu/loops/attention.h"
#include "backend/cpu/loops/dropout.h"
#include "backend/cpu/loops/elementwise.h"
#include "backend/cpu/loops/embedding.h"
#include "backend/cpu/loops/loss.h"
#include "backend/cpu/loops/loss_pointwise.h"
#include "backend/cpu/loops/norm.h"
#include "backend/cpu/loops/reduce.h"
#include "backend/cpu/loops/shape_ops.h"
#include "backend/cpu/loops/softmax.h"
#include "backend/cpu/onednn/matmul.h"
#include "backend/cpu/pool2d.h"
#include "backend/cpu/x86/weight_grad.h"
#include "backend/registry.h"

namespace tc::backend {

namespace {

// The loops decide the compute type from the dtypes themselves.
template <class F>
void unary(const Tensor& out, const Tensor& x, const char* op, F f, bool) {
  cpu::unary_map(out, x, op, f);
}
template <class F>
void binary(const Tensor& out, const Tensor& a, const Tensor& b, const char* op, F f, bool compute_double) {
  cpu::binary_map(out, a, b, op, f, compute_double);
}
template <class F>
void ternary(const Tensor& out, const Tensor& a, const Tensor& b, const Tensor& c, const char* op, F f,
             bool compute_double) {
  cpu::ternary_map(out, a, b, c, op, f, compute_double);
}

}  // namespace

void register_cpu(Registry& registry) {
  Kernels k;
  k.copy_into = &cpu::copy_into;
  k.fill = &cpu::fill;
  k.cat_into = &cpu::cat_into;
  k.gelu = &cpu::gelu;
  k.gelu_backward = &cpu::gelu_backward;
  k.sum_kernel = &cpu::sum_kernel;
  k.var_kernel = &cpu::var_kernel;
  k.minmax_kernel = &cpu::minmax_kernel;
  k.scatter_along_dim = &cpu::scatter_along_dim;
  k.softmax_forward = &cpu::softmax_forward;
  k.softmax_backward = &cpu::softmax_backward;
  k.layer_norm_forward = &cpu::layer_norm_forward;
  k.layer_norm_backward = &cpu::layer_norm_backward;
  k.add_layer_norm_forward = &cpu::add_layer_norm_forward;
  k.batch_norm_forward = &cpu::batch_norm_forward;
  k.batch_norm_backward = &cpu::batch_norm_backward;
  k.mse_loss_sum = &cpu::mse_loss_sum;
  k.bce_with_logits = &cpu::bce_with_logits;
  k.bce_with_logits_sum = &cpu::bce_with_logits_sum;
  k.bce_with_logits_backward = &cpu::bce_with_logits_backward;
  k.dropout_mask = &cpu::dropout_mask;
  k.dropout_apply = &cpu::dropout_apply;
  k.embedding_indices = &cpu::embedding_indices;
  k.embedding_gather = &cpu::embedding_gather;
  k.embedding_scatter_add = &cpu::embedding_scatter_add;
  k.conv2d_forward = &cpu::conv2d_forward;
  k.conv2d_backward_data = &cpu::conv2d_backward_data;
  k.conv2d_backward_weights = &cpu::conv2d_backward_weights;
  k.max_pool2d_forward = &cpu::max_pool2d_forward;
  k.max_pool2d_backward = &cpu::max_pool2d_backward;
  k.max_pool2d_indices = &cpu::max_pool2d_indices;
  k.avg_pool2d_forward = &cpu::avg_pool2d_forward;
  k.avg_pool2d_backward = &cpu::avg_pool2d_backward;
  k.adaptive_avg_pool2d_forward = &cpu::adaptive_avg_pool2d_forward;
  k.adaptive_avg_pool2d_backward = &cpu::adaptive_avg_pool2d_backward;
  k.class_targets = &cpu::class_targets;
  k.cross_entropy_forward = &cpu::cross_entropy_forward;
  k.cross_entropy_backward = &cpu::cross_entropy_backward;
  k.nll_loss_forward = &cpu::nll_loss_forward;
  k.nll_loss_backward = &cpu::nll_loss_backward;
  k.matmul_into = &cpu::matmul_into;
  k.widen_for_gemm = &cpu::widen_for_gemm;
  k.weight_and_bias_grads = &cpu::weight_and_bias_grads;
  k.activation_value = &cpu::activation_value;
  k.activation_and_derivative = &cpu::activation_and_derivative;
  k.sdpa_probs = &cpu::sdpa_probs;
  k.sdpa_probs_backward = &cpu::sdpa_probs_backward;
  k.sdpa_forward = &cpu::sdpa_forward;
  k.sdpa_backward = &cpu::sdpa_backward;
  k.sdpa_forward_bf16 = &cpu::sdpa_forward_bf16;
  k.sdpa_backward_bf16 = &cpu::sdpa_backward_bf16;
  k.amp_non_finite_check_and_unscale_ = &cpu::non_finite_check_and_unscale;
#define TC_UNARY(F) k.map<fn::F>() = &unary<fn::F>;
#define TC_BINARY(F) k.map<fn::F>() = &binary<fn::F>;
#define TC_TERNARY(F) k.map<fn::F>() = &ternary<fn::F>;
  TC_UNARY_FNS(TC_UNARY)
  TC_BINARY_FNS(TC_BINARY)
  TC_TERNARY_FNS(TC_TERNARY)
#undef TC_UNARY
#undef TC_BINARY
#undef TC_TERNARY
  registry.add(DeviceType::CPU, "cpu", k);
}

}  // namespace tc::backend
