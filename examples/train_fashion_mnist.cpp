// Trains a two-layer MLP on Fashion-MNIST with automatic mixed precision, exactly as the
// PyTorch recipe reads: fp32 parameters, an autocast region for the forward pass (matrix
// products in bf16/fp16, the loss in fp32), a GradScaler for fp16, and AdamW.
//
//   train_fashion_mnist [--precision fp32|bf16|fp16] [--epochs N] [--batch-size B]
//                       [--lr LR] [--data DIR] [--threads T] [--max-steps S] [--no-scaler]
#include <tensorcast/tensorcast.h>
#include <zlib.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <string>

namespace {

// Reads an IDX file (raw or gzip-compressed; zlib reads both) into a uint8 tensor.
tc::Tensor read_idx(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");
  if (!f) throw tc::Error("[data] cannot open " + path + " (install Debian's dataset-fashion-mnist or pass --data DIR)");
  auto read_exact = [&](void* dst, unsigned n) {
    if (gzread(f, dst, n) != static_cast<int>(n)) {
      gzclose(f);
      throw tc::Error("[data] " + path + " is truncated or not an IDX file");
    }
  };
  unsigned char magic[4];
  read_exact(magic, 4);
  const int ndim = magic[3];
  if (magic[0] != 0 || magic[1] != 0 || magic[2] != 0x08 || ndim < 1 || ndim > 4) {
    gzclose(f);
    throw tc::Error("[data] " + path + " is not an unsigned-byte IDX file");
  }
  tc::Shape shape;
  for (int i = 0; i < ndim; ++i) {
    unsigned char b[4];
    read_exact(b, 4);
    shape.push_back((int64_t(b[0]) << 24) | (b[1] << 16) | (b[2] << 8) | b[3]);
  }
  tc::Tensor t = tc::empty(shape, tc::kUInt8);
  read_exact(t.data_ptr<uint8_t>(), static_cast<unsigned>(t.numel()));
  gzclose(f);
  return t;
}

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
    if (k == "--precision") a.precision = next();
    else if (k == "--epochs") a.epochs = std::stoi(next());
    else if (k == "--batch-size") a.batch = std::stoi(next());
    else if (k == "--lr") a.lr = std::stod(next());
    else if (k == "--data") a.data = next();
    else if (k == "--threads") a.threads = std::stoi(next());
    else if (k == "--max-steps") a.max_steps = std::stoll(next());
    else if (k == "--no-scaler") a.scaler = false;
    else throw tc::Error("[args] unknown flag " + k + " (see the comment at the top of train_fashion_mnist.cpp)");
  }
  if (a.precision != "fp32" && a.precision != "bf16" && a.precision != "fp16")
    throw tc::Error("[args] --precision must be fp32, bf16 or fp16, got " + a.precision);
  return a;
}

}  // namespace

int main(int argc, char** argv) try {
  const Args args = parse(argc, argv);
  if (args.threads > 0) tc::set_num_threads(args.threads);
  const tc::DType compute = args.precision == "bf16" ? tc::kBFloat16 : args.precision == "fp16" ? tc::kFloat16 : tc::kFloat32;
  tc::manual_seed(0);

  auto images = [](const tc::Tensor& u8) {  // (N, 28, 28) uint8 -> (N, 784) normalized fp32
    return ((u8.to(tc::kFloat32) / 255.0 - 0.2860) / 0.3530).reshape({u8.size(0), 784});
  };
  const tc::Tensor x_train = images(read_idx(args.data + "/train-images-idx3-ubyte.gz"));
  // Labels as an (N, 1) float column so a batch is gathered like the images (embedding is a row gather).
  const tc::Tensor y_train = read_idx(args.data + "/train-labels-idx1-ubyte.gz").to(tc::kFloat32).unsqueeze(1);
  const tc::Tensor x_test = images(read_idx(args.data + "/t10k-images-idx3-ubyte.gz"));
  const tc::Tensor y_test = read_idx(args.data + "/t10k-labels-idx1-ubyte.gz").to(tc::kInt64);

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
  const int64_t n = x_train.size(0);
  int64_t step = 0;
  tc::reset_peak_memory_stats();
  const auto t0 = std::chrono::steady_clock::now();
  for (int epoch = 1; epoch <= args.epochs; ++epoch) {
    const tc::Tensor perm = tc::randperm(n);
    double loss_sum = 0;
    int64_t batches = 0, skipped = 0;
    for (int64_t b = 0; b + args.batch <= n; b += args.batch) {
      if (args.max_steps >= 0 && step >= args.max_steps) break;
      const tc::Tensor idx = perm.narrow(0, b, args.batch);
      const tc::Tensor xb = tc::embedding(x_train, idx);  // row gather
      const tc::Tensor yb = tc::embedding(y_train, idx).squeeze(1).to(tc::kInt64);
      tc::Tensor loss = tc::cross_entropy(forward(xb), yb);  // fp32 (autocast policy)
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
                loss_sum / std::max<int64_t>(batches, 1), 100 * acc, scaler.get_scale(), static_cast<long long>(skipped),
                secs);
  }
  std::printf("peak tensor memory %.1f MiB\n", tc::memory_stats().peak_bytes / 1048576.0);
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "error: %s\n", e.what());
  return 1;
}
