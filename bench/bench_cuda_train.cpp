// Training-step time and peak device memory of the MLP models on CUDA, for
// bench/device/check.sh, which sets them beside PyTorch's (bench/device/torch_train.py,
// same shapes, same optimizer). One line per case:
//   train <model> <precision> <batch> <ms per step> <peak MiB>
// mlp: Flatten-Linear(784,512)-ReLU-Linear(512,512)-ReLU-Linear(512,10), batch 128;
// mlp-large: Linear(1024,4096)-GELU-Linear(4096,1024)-GELU-Linear(1024,10), batch 256.
// AdamW(lr 1e-3), cross_entropy; bf16 is autocast over float32 parameters, fp16 the same with
// a GradScaler (one found_inf read per step). The step time
// is the mean of 30 steps after 5 warm-ups, timed to the device's completion. Without a
// GPU it says why and exits 0.
#include <chrono>
#include <cstdio>
#include <string>

#include "tensorcast/cuda.h"
#include "tensorcast/tensorcast.h"

namespace {

using namespace tc;

// precision: "fp32", "bf16" (autocast) or "fp16" (autocast with a GradScaler).
void run(const std::string& model, const std::string& precision) {
  const bool amp16 = precision != "fp32";
  const DType dt = precision == "fp16" ? kFloat16 : kBFloat16;
  const Device gpu(kCUDA, 0);
  manual_seed(0);
  const bool large = model == "mlp-large";
  const int64_t batch = large ? 256 : 128, in = large ? 1024 : 784;
  nn::Sequential net =
      large
          ? nn::Sequential(nn::Linear(1024, 4096), nn::GELU(), nn::Linear(4096, 1024), nn::GELU(), nn::Linear(1024, 10))
          : nn::Sequential(nn::Linear(784, 512), nn::ReLU(), nn::Linear(512, 512), nn::ReLU(), nn::Linear(512, 10));
  net->to(gpu);
  optim::AdamW opt(net->parameters(), optim::AdamWOptions(1e-3));
  amp::GradScaler scaler(amp::GradScalerOptions().enabled(precision == "fp16"));
  const Tensor x = randn({batch, in}, TensorOptions(gpu)), y = randint(0, 10, {batch}).to(gpu);
  auto step = [&] {
    opt.zero_grad();
    Tensor loss;
    {
      amp::AutocastGuard autocast(kCUDA, dt, amp16);
      loss = cross_entropy(net->forward(x), y);
    }
    scaler.scale(loss).backward();
    scaler.step(opt);
    scaler.update();
  };
  for (int i = 0; i < 5; ++i) step();
  cuda::synchronize();
  reset_peak_memory_stats(gpu);
  constexpr int kSteps = 30;
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < kSteps; ++i) step();
  cuda::synchronize();
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / kSteps;
  std::printf("train %s %s %lld %.3f %.1f\n", model.c_str(), precision.c_str(), static_cast<long long>(batch), ms,
              static_cast<double>(memory_stats(gpu).peak_bytes) / (1 << 20));
}

}  // namespace

int main() {
  if (!tc::cuda::is_available()) {
    std::printf("bench_cuda_train: no CUDA device (%s); nothing measured\n", tc::cuda::unavailable_reason().c_str());
    return 0;
  }
  for (const char* model : {"mlp", "mlp-large"})
    for (const char* precision : {"fp32", "bf16", "fp16"}) run(model, precision);
  return 0;
}
