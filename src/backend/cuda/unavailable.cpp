// The CUDA backend's entry points in a build without it: each says so. No CUDA tensor can
// exist in such a build (allocating one fails first), so these are reached only by a
// from_blob over device memory; they keep the ops free of #if around every device branch.
#if !defined(TC_WITH_CUDA)
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
#include "tensorcast/cuda.h"
#include "tensorcast/error.h"

namespace tc::gpu {
namespace {
[[noreturn]] void unavailable(const char* op) { TC_FAIL(op, "CUDA tensors: ", cuda::unavailable_reason()); }
}  // namespace

void copy_into(const Tensor&, const Tensor&) { unavailable("copy_"); }
void fill(const Tensor&, double) { unavailable("fill_"); }
void transfer(const Tensor&, const Tensor&, bool) { unavailable("to"); }
void matmul_into(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const char* op) { unavailable(op); }
size_t matmul_cache_size() { return 0; }
Tensor conv2d_forward(const Tensor&, const Tensor&, const Tensor&, const cpu::ConvParams&) { unavailable("conv2d"); }
Tensor conv2d_backward_data(const Tensor&, const Tensor&, const Shape&, const cpu::ConvParams&, bool) {
  unavailable("conv2d");
}
std::pair<Tensor, Tensor> conv2d_backward_weights(const Tensor&, const Tensor&, const Shape&, bool,
                                                  const cpu::ConvParams&, DType) {
  unavailable("conv2d");
}
bool conv2d_available() { return false; }
size_t conv2d_cache_size() { return 0; }
void sum_kernel(const Tensor&, const Tensor&, const std::vector<bool>&, double) { unavailable("sum"); }
void var_kernel(const Tensor&, const Tensor&, const Tensor&, const std::vector<bool>&, int64_t) { unavailable("var"); }
void minmax_kernel(const Tensor&, const Tensor&, const Tensor&, int64_t, bool is_max) {
  unavailable(is_max ? "max" : "min");
}
void scatter_along_dim(const Tensor&, const Tensor&, const Tensor&, int64_t) { unavailable("max/min backward"); }
void mse_loss_sum(const Tensor&, const Tensor&, const Tensor&, double) { unavailable("mse_loss"); }
void bce_with_logits(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&) {
  unavailable("binary_cross_entropy_with_logits");
}
void bce_with_logits_sum(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, double) {
  unavailable("binary_cross_entropy_with_logits");
}
void bce_with_logits_backward(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                              const Tensor&) {
  unavailable("binary_cross_entropy_with_logits");
}
void softmax_forward(const Tensor&, const Tensor&, int64_t, bool) { unavailable("softmax"); }
void softmax_backward(const Tensor&, const Tensor&, const Tensor&, int64_t, bool) { unavailable("softmax"); }
void sdpa_probs(const Tensor&, const Tensor&, double, bool) { unavailable("scaled_dot_product_attention"); }
void sdpa_probs_backward(const Tensor&, const Tensor&, const Tensor&, double) {
  unavailable("scaled_dot_product_attention");
}
ClassTargets class_targets(const Tensor&, const Tensor&, int64_t, int64_t, int64_t, const char* op) { unavailable(op); }
void cross_entropy_forward(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const ClassTargets&, double,
                           bool) {
  unavailable("cross_entropy");
}
void cross_entropy_backward(const Tensor&, const Tensor&, const Tensor&, const ClassTargets&, const Tensor&, bool,
                            const Tensor&, double) {
  unavailable("cross_entropy");
}
void nll_loss_forward(const Tensor&, const Tensor&, const Tensor&, const ClassTargets&, bool) {
  unavailable("nll_loss");
}
void nll_loss_backward(const Tensor&, const ClassTargets&, const Tensor&, bool, const Tensor&) {
  unavailable("nll_loss");
}
void layer_norm_forward(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                        int64_t, int64_t, double) {
  unavailable("layer_norm");
}
void layer_norm_backward(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                         const Tensor&, const Tensor&, int64_t, int64_t) {
  unavailable("layer_norm");
}
void batch_norm_forward(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                        const Tensor&, const Tensor&, const cpu::BnGeometry&, bool, bool, double, double) {
  unavailable("batch_norm");
}
void batch_norm_backward(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                         const Tensor&, const Tensor&, const cpu::BnGeometry&, bool) {
  unavailable("batch_norm");
}
std::pair<Tensor, Tensor> max_pool2d_forward(const Tensor&, const cpu::PoolParams&, bool) { unavailable("max_pool2d"); }
Tensor max_pool2d_backward(const Tensor&, const Tensor&, const Shape&, const cpu::PoolParams&, bool) {
  unavailable("max_pool2d");
}
Tensor avg_pool2d_forward(const Tensor&, const cpu::PoolParams&, bool, bool) { unavailable("avg_pool2d"); }
Tensor avg_pool2d_backward(const Tensor&, const Shape&, const cpu::PoolParams&, bool, bool) {
  unavailable("avg_pool2d");
}
Tensor adaptive_avg_pool2d_forward(const Tensor&, int64_t, int64_t, bool) { unavailable("adaptive_avg_pool2d"); }
Tensor adaptive_avg_pool2d_backward(const Tensor&, const Shape&, bool) { unavailable("adaptive_avg_pool2d"); }
void fused_sgd_step(const FusedStep&, const optim::detail::SGDScalars<float>&, const bool[4]) {
  unavailable("optimizer.step");
}
void fused_adam_step(const FusedStep&, const optim::detail::AdamScalars<float>&, const bool[4]) {
  unavailable("optimizer.step");
}
void amp_non_finite_check_and_unscale_(const std::vector<Tensor>&, const Tensor&, const Tensor&) {
  unavailable("GradScaler");
}
void amp_update_scale_(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                       const amp::ScaleRule&) {
  unavailable("GradScaler.update");
}
void embedding_indices(const Tensor&, const Tensor&, int64_t) { unavailable("embedding"); }
void embedding_gather(const Tensor&, const Tensor&, const Tensor&) { unavailable("embedding"); }
void embedding_scatter_add(const Tensor&, const Tensor&, const Tensor&) { unavailable("embedding"); }
void dropout_mask(const Tensor&, uint64_t, double) { unavailable("dropout"); }
void dropout_apply(const Tensor&, const Tensor&, const Tensor&, double) { unavailable("dropout"); }

template <class F>
void unary_map(const Tensor&, const Tensor&, const char* op, F, bool) {
  unavailable(op);
}
template <class F>
void binary_map(const Tensor&, const Tensor&, const Tensor&, const char* op, F, bool) {
  unavailable(op);
}
template <class F>
void ternary_map(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const char* op, F, bool) {
  unavailable(op);
}
#define TC_STUB_UNARY(F) template void unary_map<fn::F>(const Tensor&, const Tensor&, const char*, fn::F, bool);
#define TC_STUB_BINARY(F) \
  template void binary_map<fn::F>(const Tensor&, const Tensor&, const Tensor&, const char*, fn::F, bool);
#define TC_STUB_TERNARY(F)                                                                                         \
  template void ternary_map<fn::F>(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const char*, fn::F, \
                                   bool);
TC_CUDA_UNARY_FNS(TC_STUB_UNARY)
TC_CUDA_BINARY_FNS(TC_STUB_BINARY)
TC_CUDA_TERNARY_FNS(TC_STUB_TERNARY)

}  // namespace tc::gpu
#endif
