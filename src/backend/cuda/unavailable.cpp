// The CUDA backend's entry points in a build without it: each says so. No CUDA tensor can
// exist in such a build (allocating one fails first), so these are reached only by a
// from_blob over device memory; they keep the ops free of #if around every device branch.
#if !defined(TC_WITH_CUDA)
#include "backend/cuda/amp_kernels.h"
#include "backend/cuda/copy.h"
#include "backend/cuda/matmul.h"
#include "tensorcast/cuda.h"
#include "tensorcast/error.h"

namespace tc::gpu {
namespace {
[[noreturn]] void unavailable(const char* op) { TC_FAIL(op, "CUDA tensors: ", cuda::unavailable_reason()); }
}  // namespace

void copy_into(const Tensor&, const Tensor&) { unavailable("copy_"); }
void fill(const Tensor&, double) { unavailable("fill_"); }
void transfer(const Tensor&, const Tensor&) { unavailable("to"); }
void matmul_into(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const char* op) { unavailable(op); }
size_t matmul_cache_size() { return 0; }
void amp_non_finite_check_and_unscale_(const std::vector<Tensor>&, const Tensor&, const Tensor&) {
  unavailable("GradScaler");
}

}  // namespace tc::gpu
#endif
