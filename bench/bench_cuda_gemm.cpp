// cuBLASLt GEMM throughput through tensorcast's matmul on CUDA tensors, for
// bench/device/check.sh, which sets it beside torch.matmul on the same card. One line per
// case: `gemm <dtype> <M> <N> <K> <TFLOP/s>` (median of 10 timed products after 3 warm-ups,
// each timed to the device's completion). Without a GPU it says why and exits 0.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include "tensorcast/cuda.h"
#include "tensorcast/tensorcast.h"

int main() {
  using namespace tc;
  if (!cuda::is_available()) {
    std::printf("bench_cuda_gemm: no CUDA device (%s); nothing measured\n", cuda::unavailable_reason().c_str());
    return 0;
  }
  std::printf("# %s\n", cuda::get_device_properties(0).name.c_str());
  const Device gpu(kCUDA, 0);
  for (int64_t n : {4096, 8192}) {
    for (DType dt : {kBFloat16, kFloat16, kFloat32}) {
      const Tensor a = randn({n, n}, TensorOptions(gpu).dtype(dt)), b = randn({n, n}, TensorOptions(gpu).dtype(dt));
      std::vector<double> ms;
      for (int i = 0; i < 13; ++i) {
        cuda::synchronize();
        const auto t0 = std::chrono::steady_clock::now();
        const Tensor c = matmul(a, b);
        cuda::synchronize();
        const double t = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        if (i >= 3) ms.push_back(t);
      }
      std::sort(ms.begin(), ms.end());
      const double median = (ms[4] + ms[5]) / 2;
      std::printf("gemm %s %lld %lld %lld %.1f\n", std::string(dtype_name(dt)).c_str(), static_cast<long long>(n),
                  static_cast<long long>(n), static_cast<long long>(n), 2.0 * n * n * n / (median * 1e-3) / 1e12);
    }
  }
  return 0;
}
