// Training-step and inference time, peak device memory and (for the GPTs) model FLOPs
// utilization of the five benchmark models on CUDA, for bench/device/check.sh, which sets
// them beside PyTorch's (bench/device/torch_train.py: same shapes, same optimizer).
//
//   bench_cuda_train [model ...]     (default: mlp mlp-large cnn gpt gpt2-small)
//   bench_cuda_train --fashion-mnist DIR [--epochs N]
//
// One line per case:
//   train <model> <precision> <batch> <ms per step> <peak MiB>
//   infer <model> <precision> <batch> <ms per forward>
//   mfu <model> <precision> <percent of 990 TFLOP/s>
//   accuracy cnn <precision> <epochs> <test accuracy %> <seconds>     (--fashion-mnist)
// Models (the shapes of docs/cli.md, "Models", plus GPT-2 small):
//   mlp         Linear(784,512)-ReLU-Linear(512,512)-ReLU-Linear(512,10), x (128, 784)
//   mlp-large   Linear(1024,4096)-GELU-Linear(4096,1024)-GELU-Linear(1024,10), x (256, 1024)
//   cnn         Conv(1,32,3,p1)-ReLU-MaxPool2-Conv(32,64,3,p1)-ReLU-MaxPool2-Linear(3136,128)-ReLU-
//               Linear(128,10), x (128, 1, 28, 28)
//   gpt         tc::nn::GPT bytes: context 128, 4 layers, 4 heads, width 256; (16, 128) tokens
//   gpt2-small  tc::nn::GPT with GPT-2 small's shape: vocabulary 50257 (GPT-2's BPE size; the
//               lm head is untied and has a bias, so 163M parameters, not 124M), context 1024,
//               12 layers, 12 heads, width 768; (16, 1024) tokens
// AdamW(lr 1e-3), cross_entropy; bf16 is autocast over float32 parameters, fp16 the same with
// a GradScaler (no host read in the step). The step time is the mean of the timed steps
// (30 after 5 warm-ups; gpt2-small 10 after 3) to the device's completion. MFU counts
// llm.c's model FLOPs: 6 x parameters + 12 x layers x width x context per token, times the
// tokens of a step, over the step time and the H100/H200 SXM dense bf16 peak (990 TFLOP/s).
// --fashion-mnist trains the cnn on the real data instead (the IDX files in DIR, e.g. Debian's
// dataset-fashion-mnist; batches pinned, copied asynchronously): N epochs (default 5) of batch
// 128, shuffled, AdamW(lr 1e-3) with the
// CLI's cosine decay, in fp32, bf16 and fp16 with a GradScaler, each evaluated on the test
// set. Without a GPU it says why and exits 0.
#include <chrono>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "tensorcast/cuda.h"
#include "tensorcast/data/data_loader.h"
#include "tensorcast/data/mnist.h"
#include "tensorcast/nn/gpt.h"
#include "tensorcast/optim/schedulers.h"
#include "tensorcast/tensorcast.h"

namespace {

using namespace tc;

const Device kGpu(kCUDA, 0);

struct Bench {
  std::shared_ptr<nn::Module> module;
  std::function<Tensor(const Tensor&)> forward;
  Tensor x, y;
  int64_t batch = 0;
  int warmup = 5, steps = 30;
  double flops_per_step = 0;    // model FLOPs of a training step (GPTs only)
  std::vector<Tensor> initial;  // the parameters as made, kept on the host (out of the device's peak memory)
};

Bench sequential(nn::Sequential net, Tensor x, int64_t classes) {
  const int64_t batch = x.size(0);
  return {net.ptr(), [net](const Tensor& in) { return net->forward(in); }, std::move(x), randint(0, classes, {batch}),
          batch};
}

Bench make(const std::string& model) {
  manual_seed(0);
  if (model == "mlp")
    return sequential(
        nn::Sequential(nn::Linear(784, 512), nn::ReLU(), nn::Linear(512, 512), nn::ReLU(), nn::Linear(512, 10)),
        randn({128, 784}), 10);
  if (model == "mlp-large")
    return sequential(
        nn::Sequential(nn::Linear(1024, 4096), nn::GELU(), nn::Linear(4096, 1024), nn::GELU(), nn::Linear(1024, 10)),
        randn({256, 1024}), 10);
  if (model == "cnn")
    return sequential(nn::Sequential(nn::Conv2d(nn::Conv2dOptions(1, 32, 3).padding(1)), nn::ReLU(), nn::MaxPool2d(2),
                                     nn::Conv2d(nn::Conv2dOptions(32, 64, 3).padding(1)), nn::ReLU(), nn::MaxPool2d(2),
                                     nn::Flatten(), nn::Linear(3136, 128), nn::ReLU(), nn::Linear(128, 10)),
                      randn({128, 1, 28, 28}), 10);
  if (model == "gpt" || model == "gpt2-small") {
    const bool small2 = model == "gpt2-small";
    const auto cfg = small2 ? nn::GPTConfig().vocab_size(50257).context(1024).layers(12).heads(12).width(768)
                            : nn::GPTConfig().vocab_size(256).context(128).layers(4).heads(4).width(256);
    nn::GPT gpt(cfg);
    const int64_t batch = 16, T = cfg.context(), V = cfg.vocab_size();
    Bench b{gpt.ptr(), [gpt](const Tensor& idx) { return gpt->forward(idx); }, randint(0, V, {batch, T}),
            randint(0, V, {batch, T}), batch};
    if (small2) b.warmup = 3, b.steps = 10;
    double params = 0;
    for (const Tensor& p : gpt->parameters()) params += static_cast<double>(p.numel());
    const double per_token = 6.0 * params + 12.0 * static_cast<double>(cfg.layers() * cfg.width() * T);
    b.flops_per_step = per_token * static_cast<double>(batch * T);
    return b;
  }
  throw Error("[bench_cuda_train] unknown model '" + model + "' (use mlp, mlp-large, cnn, gpt or gpt2-small)");
}

Tensor loss_of(const Tensor& logits, const Tensor& y) {
  return cross_entropy(logits.reshape({-1, logits.size(-1)}), y.reshape({-1}));
}

// Mean milliseconds of fn over `steps` calls after `warmup`, to the device's completion.
double time_ms(const std::function<void()>& fn, int warmup, int steps, bool reset_peak) {
  for (int i = 0; i < warmup; ++i) fn();
  cuda::synchronize();
  if (reset_peak) reset_peak_memory_stats(kGpu);
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < steps; ++i) fn();
  cuda::synchronize();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / steps;
}

// The model on the device with its initial parameters: made (and initialized on the host)
// once per model, its parameters copied back from a host copy before each case.
void restore(Bench& b) {
  NoGradGuard no_grad;
  if (b.initial.empty()) {
    b.module->to(kGpu);
    b.x = b.x.to(kGpu);
    b.y = b.y.to(kGpu);
    for (const Tensor& p : b.module->parameters()) b.initial.push_back(p.detach().to(Device(kCPU)));
    return;
  }
  const std::vector<Tensor> params = b.module->parameters();
  for (size_t i = 0; i < params.size(); ++i) Tensor(params[i]).copy_(b.initial[i]);
}

// One training step on a batch. precision: "fp32", "bf16" (autocast) or "fp16" (autocast
// with the GradScaler, which is disabled otherwise).
void train_step(const Bench& b, optim::Optimizer& opt, amp::GradScaler& scaler, const std::string& precision,
                const Tensor& x, const Tensor& y) {
  opt.zero_grad();
  Tensor loss;
  {
    amp::AutocastGuard autocast(kCUDA, precision == "fp16" ? kFloat16 : kBFloat16, precision != "fp32");
    loss = loss_of(b.forward(x), y);
  }
  scaler.scale(loss).backward();
  scaler.step(opt);
  scaler.update();
}

void train(Bench& b, const std::string& model, const std::string& precision) {
  restore(b);
  b.module->train();
  optim::AdamW opt(b.module->parameters(), optim::AdamWOptions(1e-3));
  amp::GradScaler scaler(amp::GradScalerOptions().enabled(precision == "fp16"));
  auto step = [&] { train_step(b, opt, scaler, precision, b.x, b.y); };
  const double ms = time_ms(step, b.warmup, b.steps, /*reset_peak=*/true);
  std::printf("train %s %s %lld %.3f %.1f\n", model.c_str(), precision.c_str(), static_cast<long long>(b.batch), ms,
              static_cast<double>(memory_stats(kGpu).peak_bytes) / (1 << 20));
  if (b.flops_per_step > 0)
    std::printf("mfu %s %s %.1f\n", model.c_str(), precision.c_str(), 100.0 * b.flops_per_step / (ms * 1e-3) / 990e12);
  std::fflush(stdout);
}

// Forward only (eval mode, no graph): fp32, or bf16 autocast.
void infer(Bench& b, const std::string& model, const std::string& precision) {
  restore(b);
  b.module->eval();
  const Tensor& x = b.x;
  NoGradGuard no_grad;
  auto fwd = [&] {
    amp::AutocastGuard autocast(kCUDA, kBFloat16, precision == "bf16");
    b.forward(x);
  };
  const double ms = time_ms(fwd, b.warmup, b.steps, /*reset_peak=*/false);
  std::printf("infer %s %s %lld %.3f\n", model.c_str(), precision.c_str(), static_cast<long long>(b.batch), ms);
  std::fflush(stdout);
}

// The cnn trained on Fashion-MNIST on the device, then its test accuracy.
void fashion_mnist(const std::string& dir, int64_t epochs, const std::string& precision) {
  const data::FashionMNIST train_set(dir, /*train=*/true), test_set(dir, /*train=*/false);
  Bench b = make("cnn");
  b.module->to(kGpu);
  data::DataLoader loader(train_set, data::DataLoaderOptions().batch_size(128).shuffle(true).seed(0).pin_memory(true));
  optim::AdamW opt(b.module->parameters(), optim::AdamWOptions(1e-3).weight_decay(0.0));
  optim::CosineAnnealingLR schedule(opt, epochs * static_cast<int64_t>(loader.size()));
  amp::GradScaler scaler(amp::GradScalerOptions().enabled(precision == "fp16"));
  const auto t0 = std::chrono::steady_clock::now();
  for (int64_t epoch = 0; epoch < epochs; ++epoch)
    for (auto& batch : loader) {
      // Pinned batches: the copies are asynchronous.
      train_step(b, opt, scaler, precision, batch.data.to(kGpu, true), batch.target.to(kGpu, true));
      schedule.step();
    }
  cuda::synchronize();
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  b.module->eval();
  NoGradGuard no_grad;
  double correct = 0;
  const int64_t n = test_set.size();
  for (int64_t i = 0; i < n; i += 1000) {
    const int64_t m = std::min<int64_t>(1000, n - i);
    amp::AutocastGuard autocast(kCUDA, precision == "fp16" ? kFloat16 : kBFloat16, precision != "fp32");
    const Tensor logits = b.forward(test_set.images().narrow(0, i, m).to(kGpu));
    correct += eq(argmax(logits, 1), test_set.targets().narrow(0, i, m).to(kGpu)).to(kFloat32).sum().item<double>();
  }
  std::printf("accuracy cnn %s %lld %.2f %.1f\n", precision.c_str(), static_cast<long long>(epochs),
              100.0 * correct / static_cast<double>(n), secs);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  if (!tc::cuda::is_available()) {
    std::printf("bench_cuda_train: no CUDA device (%s); nothing measured\n", tc::cuda::unavailable_reason().c_str());
    return 0;
  }
  std::vector<std::string> models(argv + 1, argv + argc);
  if (!models.empty() && models[0] == "--fashion-mnist") {
    if (models.size() != 2 && !(models.size() == 4 && models[2] == "--epochs")) {
      std::fprintf(stderr, "usage: bench_cuda_train --fashion-mnist DIR [--epochs N]\n");
      return 2;
    }
    const int64_t epochs = models.size() == 4 ? std::stoll(models[3]) : 5;
    try {
      for (const char* precision : {"fp32", "bf16", "fp16"}) fashion_mnist(models[1], epochs, precision);
    } catch (const std::exception& e) {
      std::printf("# fashion-mnist failed: %s\n", e.what());
      return 1;
    }
    return 0;
  }
  if (models.empty()) models = {"mlp", "mlp-large", "cnn", "gpt", "gpt2-small"};
  int failed = 0;
  // A model whose ops fail on the device must not hide the others' numbers.
  for (const std::string& model : models) {
    // A case whose ops fail on the device must not hide the other cases' numbers.
    auto run = [&](const char* kind, const char* precision, const std::function<void()>& f) {
      try {
        f();
      } catch (const std::exception& e) {
        std::printf("# %s %s %s failed: %s\n", kind, model.c_str(), precision, e.what());
        std::fflush(stdout);
        ++failed;
      }
    };
    try {
      Bench b = make(model);
      for (const char* precision : {"fp32", "bf16", "fp16"})
        run("train", precision, [&] { train(b, model, precision); });
      for (const char* precision : {"fp32", "bf16"}) run("infer", precision, [&] { infer(b, model, precision); });
    } catch (const std::exception& e) {
      std::printf("# %s failed: %s\n", model.c_str(), e.what());
      ++failed;
    }
    tc::empty_cache(kGpu);
  }
  return failed == 0 ? 0 : 1;
}
