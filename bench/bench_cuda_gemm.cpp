// cuBLASLt GEMM throughput through tensorcast's matmul on CUDA tensors, for
// bench/device/check.sh, which sets it beside torch.matmul on the same card. One line per
// case: `gemm <dtype> <M> <N> <K> <TFLOP/s>`: the median of 10 samples after 3 warm-ups,
// each sample 10 products issued back to back between two device synchronizations (so the
// host's launch and synchronization costs are spread over 10, as torch_gemm.py times 10
// products between two CUDA events). Operands are drawn once per size on the CPU in
// float32 and cast on the device. Without a GPU it says why and exits 0.
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
  constexpr int kPerSample = 10;
  for (int64_t n : {4096, 8192}) {
    const Tensor a32 = randn({n, n}).to(gpu), b32 = randn({n, n}).to(gpu);
    for (DType dt : {kBFloat16, kFloat16, kFloat32}) {
      const Tensor a = a32.to(dt), b = b32.to(dt);
      std::vector<double> ms;
      for (int i = 0; i < 13; ++i) {
        cuda::synchronize();
        const auto t0 = std::chrono::steady_clock::now();
        for (int r = 0; r < kPerSample; ++r) (void)matmul(a, b);
        cuda::synchronize();
        const double t = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        if (i >= 3) ms.push_back(t / kPerSample);
      }
      std::sort(ms.begin(), ms.end());
      const double median = (ms[4] + ms[5]) / 2;
      std::printf("gemm %s %lld %lld %lld %.1f\n", std::string(dtype_name(dt)).c_str(), static_cast<long long>(n),
                  static_cast<long long>(n), static_cast<long long>(n), 2.0 * n * n * n / (median * 1e-3) / 1e12);
    }
  }
  return 0;
}
