// Trains a two-layer MLP on Fashion-MNIST with automatic mixed precision, exactly as the
// PyTorch recipe reads: fp32 parameters, an autocast region for the forward pass (matrix
// products in bf16/fp16, the loss in fp32), a GradScaler for fp16, and AdamW.
//
//   train_fashion_mnist [--precision fp32|bf16|fp16] [--epochs N] [--batch-size B]
//                       [--lr LR] [--data DIR] [--threads T] [--max-steps S] [--no-scaler]
#include <tensorcast/tensorcast.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <string>

namespace {

struct Args {
  std::string precision = "bf16", data = "/usr/share/datasets/fashion-mnist";
  int epochs = 2, batch = 128, threads = 0;
  int64_t max_steps = -1;
  double lr = 1e-3;
  bool scaler = true;
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    std::string k = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) throw tc::Error("[args] " + k + " needs a value");
      return argv[++i];
    };
    if (k == "--precision")
      a.precision = next();
    else if (k == "--epochs")
      a.epochs = std::stoi(next());
    else if (k == "--batch-size")
      a.batch = std::stoi(next());
    else if (k == "--lr")
      a.lr = std::stod(next());
    else if (k == "--data")
      a.data = next();
    else if (k == "--threads")
      a.threads = std::stoi(next());
    else if (k == "--max-steps")
      a.max_steps = std::stoll(next());
    else if (k == "--no-scaler")
      a.scaler = false;
    else
      throw tc::Error("[args] unknown flag " + k + " (see the comment at the top of train_fashion_mnist.cpp)");
  }
  if (a.precision != "fp32" && a.precision != "bf16" && a.precision != "fp16")
    throw tc::Error("[args] --precision must be fp32, bf16 or fp16, got " + a.precision);
  return a;
}

}  // namespace

int main(int argc, char** argv) try {
  const Args args = parse(argc, argv);
  if (args.threads > 0) tc::set_num_threads(args.threads);
  const tc::DType compute = args.precision == "bf16"   ? tc::kBFloat16
                            : args.precision == "fp16" ? tc::kFloat16
                                                       : tc::kFloat32;
  tc::manual_seed(0);

  // Images (N, 1, 28, 28) float32, normalized with Fashion-MNIST's mean and std; targets int64.
  const tc::data::FashionMNIST train(args.data, /*train=*/true), test(args.data, /*train=*/false);
  tc::data::DataLoader loader(train,
                              tc::data::DataLoaderOptions().batch_size(args.batch).shuffle(true).drop_last(true));
  const tc::Tensor x_test = test.images().reshape({test.size(), 784});
  const tc::Tensor& y_test = test.targets();

  // fp32 master weights, PyTorch's default Linear init (uniform +-1/sqrt(fan_in)).
  auto init = [](tc::Shape s, int64_t fan_in) {
    const double b = 1.0 / std::sqrt(double(fan_in));
    return (tc::rand(s) * (2 * b) - b).detach().requires_grad_();
  };
  std::vector<tc::Tensor> params = {init({256, 784}, 784), init({256}, 784), init({10, 256}, 256), init({10}, 256)};
  tc::optim::AdamW optimizer(params, tc::optim::AdamWOptions(args.lr).weight_decay(0.0));
  // fp16 needs loss scaling against gradient underflow; bf16 has fp32's exponent range.
  tc::amp::GradScaler scaler(tc::amp::GradScalerOptions().enabled(compute == tc::kFloat16 && args.scaler));

  auto forward = [&](const tc::Tensor& x) {
    // In the region linear runs in 16 bits (weights cast once per region, gradients reach
    // the fp32 parameters in fp32); outside it everything is fp32.
    tc::amp::AutocastGuard autocast(tc::kCPU, compute == tc::kFloat32 ? tc::kBFloat16 : compute,
                                    /*enabled=*/compute != tc::kFloat32);
    auto h = tc::relu(tc::linear(x, params[0], params[1]));
    return tc::linear(h, params[2], params[3]);
  };

  std::printf("tensorcast %s: MLP 784-256-10 on Fashion-MNIST, %s, %d threads, batch %d%s\n", TENSORCAST_VERSION,
              args.precision.c_str(), tc::get_num_threads(), args.batch, scaler.is_enabled() ? ", GradScaler" : "");
  int64_t step = 0;
  tc::reset_peak_memory_stats();
  const auto t0 = std::chrono::steady_clock::now();
  for (int epoch = 1; epoch <= args.epochs; ++epoch) {
    double loss_sum = 0;
    int64_t batches = 0, skipped = 0;
    for (auto& batch : loader) {  // one epoch, reshuffled with seed + epoch, prefetched
      if (args.max_steps >= 0 && step >= args.max_steps) break;
      const tc::Tensor xb = batch.data.reshape({batch.data.size(0), 784});
      tc::Tensor loss = tc::cross_entropy(forward(xb), batch.target);  // fp32 (autocast policy)
      optimizer.zero_grad();
      scaler.scale(loss).backward();
      if (!scaler.step(optimizer)) ++skipped;  // skipped when a gradient overflowed
      scaler.update();
      loss_sum += loss.item<double>();
      ++batches;
      ++step;
    }
    tc::NoGradGuard no_grad;
    const tc::Tensor pred = tc::argmax(forward(x_test), 1);
    const double acc = tc::eq(pred, y_test).to(tc::kFloat32).mean().item<double>();
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("epoch %d  train loss %.4f  test accuracy %.2f%%  loss scale %g  skipped %lld  %.1f s\n", epoch,
                loss_sum / std::max<int64_t>(batches, 1), 100 * acc, scaler.get_scale(),
                static_cast<long long>(skipped), secs);
  }
  std::printf("peak tensor memory %.1f MiB\n", tc::memory_stats().peak_bytes / 1048576.0);
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "error: %s\n", e.what());
  return 1;
}
