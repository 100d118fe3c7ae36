// dropout on CUDA tensors (dropout.h): the hashed keep mask, one thread per element, and
// the fused mask-and-scale pass.
#include <initializer_list>

#include "backend/cuda/convert.cuh"
#include "backend/cuda/dropout.h"
#include "backend/cuda/launch.h"

namespace tc::gpu {
namespace {

// backend/cpu/loops/dropout.cpp's hash_uniform, operation for operation: uniform in [0, 1) from
// the i-th output of the splitmix64 stream keyed by `key` (53 bits, exact in double).
__device__ __forceinline__ double hash_uniform(uint64_t key, uint64_t i) {
  uint64_t z = key + (i + 1) * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return static_cast<double>(z >> 11) * 0x1p-53;
}

__global__ void mask_kernel(uint8_t* m, int64_t n, uint64_t key, double p) {
  for (int64_t i = global_index(); i < n; i += grid_stride())
    m[i] = hash_uniform(key, static_cast<uint64_t>(i)) >= p ? 1 : 0;
}

template <class C>
__global__ void apply_kernel(char* out, const char* v, DType dt, int64_t es, const uint8_t* m, int64_t n, C s) {
  for (int64_t i = global_index(); i < n; i += grid_stride())
    store_from<C>(out + i * es, dt, m[i] ? load_as<C>(v + i * es, dt) * s : C(0));
}

void check(const char* op, std::initializer_list<const Tensor*> ts) {
  const Device device = (*ts.begin())->device();
  for (const Tensor* t : ts)
    TC_CHECK(t->device() == device && device.is_cuda() && t->is_contiguous(), op,
             "expected contiguous tensors on one CUDA device, got one of shape ", shape_str(t->sizes()), " on ",
             t->device());
}

}  // namespace

void dropout_mask(const Tensor& mask, uint64_t key, double p) {
  check("dropout", {&mask});
  TC_CHECK(mask.dtype() == kUInt8, "dropout", "expected a uint8 mask, got ", dtype_name(mask.dtype()));
  const int64_t n = mask.numel();
  if (n == 0) return;
  DeviceGuard guard(mask.device());
  mask_kernel<<<blocks_for(n), kThreads, 0, current_raw_stream(mask.device())>>>(static_cast<uint8_t*>(mask.raw_data()),
                                                                                 n, key, p);
  TC_CUDA_CHECK(cudaGetLastError(), "dropout");
}

void dropout_apply(const Tensor& out, const Tensor& v, const Tensor& mask, double scale) {
  check("dropout", {&out, &v, &mask});
  TC_CHECK(out.dtype() == v.dtype() && mask.dtype() == kUInt8 && out.numel() == v.numel() && mask.numel() == v.numel(),
           "dropout", "expected out and v of one dtype and a uint8 mask, all of ", v.numel(), " elements");
  const int64_t n = v.numel();
  if (n == 0) return;
  DeviceGuard guard(v.device());
  const cudaStream_t stream = current_raw_stream(v.device());
  const int64_t es = static_cast<int64_t>(element_size(v.dtype()));
  with_compute_type(v.dtype(), [&]<class C>() {
    apply_kernel<C><<<blocks_for(n), kThreads, 0, stream>>>(
        static_cast<char*>(out.raw_data()), static_cast<const char*>(v.raw_data()), v.dtype(), es,
        static_cast<const uint8_t*>(mask.raw_data()), n, static_cast<C>(scale));
  });
  TC_CUDA_CHECK(cudaGetLastError(), "dropout");
}

}  // namespace tc::gpu
