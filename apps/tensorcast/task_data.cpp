// Loading each model's data (see task_data.h).
#include "task_data.h"

#include <tensorcast/data/mnist.h>
#include <tensorcast/data/text.h>
#include <tensorcast/error.h>
#include <tensorcast/ops.h>

#include <filesystem>

#include "models.h"

namespace tcli {
namespace fs = std::filesystem;

namespace {

constexpr int64_t kSyntheticTrain = 16384, kSyntheticTest = 2048, kSyntheticDim = 1024, kClasses = 10;

// x ~ N(0, 1) in 1024 dims; the class is the argmax of a fixed random linear "teacher"
// plus a little noise, so the task is learnable but not trivial. Drawn from the global
// generator under its own seed, then the generator is reseeded by the caller.
TaskData synthetic_task(uint64_t seed) {
  tc::manual_seed(seed * 0x9E3779B97F4A7C15ull + 0x5EED);
  const tc::Tensor teacher = tc::randn({kSyntheticDim, kClasses});
  auto make = [&](int64_t n) {
    tc::Tensor x = tc::randn({n, kSyntheticDim});
    tc::Tensor y = tc::argmax(tc::matmul(x, teacher) + tc::randn({n, kClasses}) * 2.0, 1);
    return std::make_shared<tc::data::TensorDataset>(x, y);
  };
  TaskData t;
  t.train = make(kSyntheticTrain);
  t.test = make(kSyntheticTest);
  t.description = "synthetic classification: 1024-dim Gaussian inputs, 10 classes, " + std::to_string(kSyntheticTrain) +
                  " train / " + std::to_string(kSyntheticTest) + " test examples (seeded)";
  return t;
}

TaskData fashion_mnist(const std::string& dir) {
  const std::string hint =
      "pass --data DIR with the four Fashion-MNIST IDX files, or install them with 'apt-get install "
      "dataset-fashion-mnist'";
  std::error_code ec;
  if (!fs::exists(dir, ec)) throw tc::Error("[data] dataset directory " + dir + " does not exist; " + hint);
  if (!fs::is_directory(dir, ec)) throw tc::Error("[data] " + dir + " is not a directory; " + hint);
  TaskData t;
  t.train = std::make_shared<tc::data::FashionMNIST>(dir, /*train=*/true);
  t.test = std::make_shared<tc::data::FashionMNIST>(dir, /*train=*/false);
  t.description = "Fashion-MNIST from " + dir + ": " + std::to_string(t.train->size()) + " train / " +
                  std::to_string(t.test->size()) + " test images";
  return t;
}

TaskData text(const std::string& path) {
  const std::string hint = "pass --data FILE with any text file (e.g. a book in plain text)";
  std::error_code ec;
  if (!fs::exists(path, ec)) throw tc::Error("[data] text file " + path + " does not exist; " + hint);
  if (fs::is_directory(path, ec))
    throw tc::Error("[data] " + path + " is a directory, --model gpt reads one text file; " + hint);
  const tc::Tensor bytes = tc::data::read_bytes(path);
  const int64_t n = bytes.numel();
  const int64_t held_out = std::max<int64_t>(n / 10, kGptContext + 1);
  if (n - held_out < 4 * (kGptContext + 1))
    throw tc::Error("[data] " + path + " has " + std::to_string(n) + " bytes, too few for --model gpt (context " +
                    std::to_string(kGptContext) + "); " + hint + " of at least 10 KB");
  TaskData t;
  t.train = std::make_shared<tc::data::TextDataset>(bytes.narrow(0, 0, n - held_out).contiguous(), kGptContext);
  t.test = std::make_shared<tc::data::TextDataset>(bytes.narrow(0, n - held_out, held_out).contiguous(), kGptContext);
  t.description = "text " + path + ": " + std::to_string(n - held_out) + " train bytes, " + std::to_string(held_out) +
                  " held-out bytes (the last 10%), windows of " + std::to_string(kGptContext);
  return t;
}

}  // namespace

std::string default_data_path(ModelKind model) {
  if (model == ModelKind::kGpt) return "/usr/share/common-licenses/GPL-3";
  if (model == ModelKind::kMlpLarge) return "";
  return "/usr/share/datasets/fashion-mnist";
}

TaskData load_task_data(ModelKind model, const std::string& data, uint64_t seed) {
  const std::string path = data.empty() ? default_data_path(model) : data;
  if (model == ModelKind::kMlpLarge) return synthetic_task(seed);
  if (model == ModelKind::kGpt) return text(path);
  return fashion_mnist(path);
}

}  // namespace tcli
