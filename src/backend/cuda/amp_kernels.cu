// The GradScaler's multi-tensor non-finite check and unscale on CUDA (amp_kernels.h).
//
// One launch covers up to kListSize dense tensors laid end to end in one index space (their
// pointers and prefix sums travel in the kernel's parameters, so nothing is copied to the
// device first). A thread finds its tensor by binary search over the prefix sums, checks the
// value (a 16-bit one widened exactly), multiplies it by inv_scale in float32 (float64 for
// float64 data) and rounds once: the CPU kernel's rule, PyTorch's too. found_inf is only
// ever set to 1, never cleared, so threads may write it concurrently.
#include <cmath>
#include <type_traits>

#include "backend/cuda/amp_kernels.h"
#include "backend/cuda/copy.h"
#include "backend/cuda/launch.h"
#include "tensorcast/half.h"

namespace tc::gpu {
namespace {

constexpr int kListSize = 64;

struct TensorList {
  void* ptr[kListSize];
  int64_t start[kListSize + 1];  // prefix sums of the element counts
  int count;
};

template <class T>
__global__ void unscale_kernel(TensorList list, float* found_inf, const float* inv_scale_ptr) {
  using C = std::conditional_t<std::is_same_v<T, double>, double, float>;
  const float inv_scale = *inv_scale_ptr;
  const bool write = inv_scale != 1.0f;  // PyTorch: a scale of exactly 1 writes nothing
  const int64_t total = list.start[list.count];
  bool bad = false;
  for (int64_t i = global_index(); i < total; i += grid_stride()) {
    int lo = 0, hi = list.count - 1;
    while (lo < hi) {
      const int mid = (lo + hi + 1) / 2;
      if (list.start[mid] <= i)
        lo = mid;
      else
        hi = mid - 1;
    }
    T* p = static_cast<T*>(list.ptr[lo]) + (i - list.start[lo]);
    const C v = static_cast<C>(static_cast<std::conditional_t<std::is_same_v<T, double>, double, float>>(*p));
    bad |= !isfinite(v);
    if (write) *p = static_cast<T>(v * static_cast<C>(inv_scale));
  }
  if (bad) *found_inf = 1.0f;
}

__global__ void update_scale_kernel(float* scale, int32_t* growth, int32_t* hysteresis, float* inv_scale,
                                    const float* found_inf, float* refused, amp::ScaleRule rule) {
  float s = *scale;
  int32_t g = *growth, h = *hysteresis;
  if (!amp::try_update_scale(s, g, h, *found_inf != 0.0f, rule)) {
    *refused = 1.0f;
    return;
  }
  *refused = 0.0f;
  *scale = s;
  *growth = g;
  *hysteresis = h;
  *inv_scale = static_cast<float>(1.0 / static_cast<double>(s));  // PyTorch: scale.double().reciprocal().float()
}

}  // namespace

void amp_update_scale_(const Tensor& scale, const Tensor& growth_tracker, const Tensor& hysteresis_tracker,
                       const Tensor& inv_scale, const Tensor& found_inf, const Tensor& refused,
                       const amp::ScaleRule& rule) {
  constexpr const char* kOp = "GradScaler.update";
  const Device device = scale.device();
  for (const Tensor* t : {&scale, &growth_tracker, &hysteresis_tracker, &inv_scale, &found_inf, &refused})
    TC_CHECK(t->defined() && t->numel() == 1 && t->device() == device, kOp,
             "the scaler's state must be one-element tensors on ", device);
  TC_CHECK(device.is_cuda() && scale.dtype() == kFloat32 && inv_scale.dtype() == kFloat32 &&
               found_inf.dtype() == kFloat32 && refused.dtype() == kFloat32 && growth_tracker.dtype() == kInt32 &&
               hysteresis_tracker.dtype() == kInt32,
           kOp, "expected float32 scale, inv_scale, found_inf and refused, int32 trackers, on a CUDA device");
  DeviceGuard guard(device);
  update_scale_kernel<<<1, 1, 0, current_raw_stream(device)>>>(
      static_cast<float*>(scale.raw_data()), static_cast<int32_t*>(growth_tracker.raw_data()),
      static_cast<int32_t*>(hysteresis_tracker.raw_data()), static_cast<float*>(inv_scale.raw_data()),
      static_cast<const float*>(found_inf.raw_data()), static_cast<float*>(refused.raw_data()), rule);
  TC_CUDA_CHECK(cudaGetLastError(), kOp);
}

void amp_non_finite_check_and_unscale_(const std::vector<Tensor>& grads, const Tensor& found_inf,
                                       const Tensor& inv_scale) {
  constexpr const char* kOp = "GradScaler";
  TC_CHECK(found_inf.defined() && found_inf.numel() == 1 && found_inf.dtype() == kFloat32 && inv_scale.defined() &&
               inv_scale.numel() == 1 && inv_scale.dtype() == kFloat32,
           kOp, "found_inf and inv_scale must be one-element float32 tensors");
  const Device device = found_inf.device();
  TC_CHECK(device.is_cuda() && inv_scale.device() == device, kOp, "found_inf and inv_scale must be on one CUDA device");
  DeviceGuard guard(device);
  const cudaStream_t stream = current_raw_stream(device);
  // Per dtype, lists of up to kListSize dense tensors; non-dense ones via dense copies.
  for (DType dt : {kFloat32, kFloat16, kBFloat16, kFloat64}) {
    std::vector<Tensor> dense, copied_back;
    for (const Tensor& g : grads) {
      if (!g.defined() || g.dtype() != dt || g.numel() == 0) continue;
      TC_CHECK(g.device() == device, kOp, "a gradient on ", g.device(), " next to found_inf on ", device);
      if (!dense_stride_order(g.sizes(), g.strides()).empty()) {
        dense.push_back(g);
      } else {
        Tensor d = make_tensor(g.sizes(), dt, device);
        copy_into(d, g);
        dense.push_back(d);
        copied_back.push_back(g);
        copied_back.push_back(d);
      }
    }
    dispatch_dtype(dt, [&]<class T>() {
      if constexpr (std::is_floating_point_v<T> || std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
        for (size_t first = 0; first < dense.size(); first += kListSize) {
          TensorList list{};
          list.count = static_cast<int>(std::min<size_t>(kListSize, dense.size() - first));
          for (int j = 0; j < list.count; ++j) {
            list.ptr[j] = dense[first + j].raw_data();
            list.start[j + 1] = list.start[j] + dense[first + j].numel();
          }
          unscale_kernel<T><<<blocks_for(list.start[list.count]), kThreads, 0, stream>>>(
              list, static_cast<float*>(found_inf.raw_data()), static_cast<const float*>(inv_scale.raw_data()));
          TC_CUDA_CHECK(cudaGetLastError(), kOp);
        }
      }
    });
    for (size_t j = 0; j < copied_back.size(); j += 2) copy_into(copied_back[j], copied_back[j + 1]);
  }
}

}  // namespace tc::gpu
