// PyTorch's mixed-precision recipe ported line by line to libtorch, with tensorcast's
// GradScaler and autocast guard (libtensorcast_torch; docs/libtorch.md). It trains an MLP on
// Fashion-MNIST in fp16 on the CPU; the Python it ports is on the right:
//
//   model = nn.Sequential(nn.Flatten(), nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 10))
//   opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
//   scaler = torch.amp.GradScaler("cpu")
//   for x, y in loader:
//       opt.zero_grad()
//       with torch.autocast("cpu", dtype=torch.float16):
//           loss = F.cross_entropy(model(x), y)
//       scaler.scale(loss).backward()
//       scaler.step(opt)
//       scaler.update()
//
//   libtorch_amp [--data DIR] [--epochs N] [--max-steps S] [--dtype fp16|bf16]
// DIR holds the four *-ubyte.gz files (default: Debian's dataset-fashion-mnist package).
#include <torch/torch.h>
#include <zlib.h>

#include <cstdio>
#include <string>

#include "tensorcast/torch/amp.h"

namespace {

// An IDX file (gzip): images (N, 1, 28, 28) in [0, 1] or labels (N).
torch::Tensor read_idx(const std::string& path, bool images) {
  gzFile f = gzopen(path.c_str(), "rb");
  if (!f) throw std::runtime_error("cannot open " + path + " (install dataset-fashion-mnist or pass --data DIR)");
  std::vector<unsigned char> bytes;
  unsigned char buf[1 << 16];
  for (int n; (n = gzread(f, buf, sizeof buf)) > 0;) bytes.insert(bytes.end(), buf, buf + n);
  gzclose(f);
  const size_t header = images ? 16 : 8;
  auto be32 = [&](size_t at) {
    return (uint32_t{bytes[at]} << 24) | (uint32_t{bytes[at + 1]} << 16) | (uint32_t{bytes[at + 2]} << 8) |
           bytes[at + 3];
  };
  if (bytes.size() < header || be32(0) != (images ? 0x803u : 0x801u))
    throw std::runtime_error(path + " is not an IDX " + (images ? "image" : "label") + " file");
  const int64_t n = be32(4), per = images ? 28 * 28 : 1;
  if (bytes.size() != header + static_cast<size_t>(n * per)) throw std::runtime_error(path + " is truncated");
  auto t = torch::from_blob(bytes.data() + header, {n * per}, torch::kUInt8).clone();
  return images ? t.view({n, 1, 28, 28}).to(torch::kFloat32).div_(255.0) : t.to(torch::kInt64);
}

}  // namespace

int main(int argc, char** argv) try {
  std::string data = "/usr/share/datasets/fashion-mnist", dtype_name = "fp16";
  int epochs = 1;
  int64_t max_steps = -1;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--data")
      data = v;
    else if (k == "--epochs")
      epochs = std::stoi(v);
    else if (k == "--max-steps")
      max_steps = std::stoll(v);
    else if (k == "--dtype")
      dtype_name = v;
    else
      throw std::runtime_error("unknown flag " + k);
  }
  const auto dtype = dtype_name == "bf16" ? torch::kBFloat16 : torch::kFloat16;
  torch::manual_seed(0);
  const auto x_train = read_idx(data + "/train-images-idx3-ubyte.gz", true);
  const auto y_train = read_idx(data + "/train-labels-idx1-ubyte.gz", false);
  const auto x_test = read_idx(data + "/t10k-images-idx3-ubyte.gz", true);
  const auto y_test = read_idx(data + "/t10k-labels-idx1-ubyte.gz", false);

  torch::nn::Sequential model(torch::nn::Flatten(), torch::nn::Linear(784, 256), torch::nn::ReLU(),
                              torch::nn::Linear(256, 10));
  torch::optim::AdamW opt(model->parameters(), torch::optim::AdamWOptions(1e-3));
  tc::torch_amp::GradScaler scaler("cpu");
  scaler.set_parameter_names(model->named_parameters());  // names the culprit of a skipped step

  const int64_t batch = 128, n = x_train.size(0);
  int64_t step = 0;
  double first_loss = 0, running = 0;
  for (int epoch = 0; epoch < epochs && step != max_steps; ++epoch) {
    const auto perm = torch::randperm(n);
    for (int64_t i = 0; i + batch <= n && step != max_steps; i += batch, ++step) {
      const auto idx = perm.slice(0, i, i + batch);
      const auto x = x_train.index_select(0, idx), y = y_train.index_select(0, idx);
      opt.zero_grad();
      torch::Tensor loss;
      {
        tc::torch_amp::AutocastGuard autocast(torch::kCPU, dtype);
        loss = torch::nn::functional::cross_entropy(model->forward(x), y);
      }
      scaler.scale(loss).backward();
      scaler.step(opt);
      if (scaler.last_step().skipped)
        std::printf("step %lld skipped at scale %g: %s\n", static_cast<long long>(step), scaler.get_scale(),
                    scaler.last_step().first_nonfinite.value_or("?").c_str());
      scaler.update();
      const double l = loss.item<double>();
      if (step == 0) first_loss = l;
      running = step == 0 ? l : 0.98 * running + 0.02 * l;
      if (step % 100 == 0)
        std::printf("epoch %d step %5lld  loss %.4f  scale %g\n", epoch, static_cast<long long>(step), running,
                    scaler.get_scale());
    }
  }
  torch::NoGradGuard no_grad;
  torch::Tensor logits;
  {
    tc::torch_amp::AutocastGuard autocast(torch::kCPU, dtype);
    logits = model->forward(x_test);
  }
  const double accuracy = logits.argmax(1).eq(y_test).to(torch::kFloat64).mean().item<double>();
  std::printf(
      "%s autocast + GradScaler: %lld steps, loss %.4f -> %.4f, %lld skipped, final scale %g, "
      "test accuracy %.2f%%\n",
      dtype_name.c_str(), static_cast<long long>(step), first_loss, running,
      static_cast<long long>(scaler.steps_skipped()), scaler.get_scale(), 100 * accuracy);
  return running < first_loss ? 0 : 1;  // the loss must fall
} catch (const std::exception& e) {
  std::fprintf(stderr, "libtorch_amp: %s\n", e.what());
  return 1;
}
