// Built against an installed tensorcast's libtorch adapter: a libtorch model trained in fp16
// autocast with tensorcast's GradScaler on a learnable synthetic target. Step 0 forces an
// overflow (an inf gradient), which the scaler must skip and back off from, as Python's.
// Exits 0 only if that happened and the loss then fell by more than half.
#include <torch/torch.h>

#include <cmath>
#include <cstdio>
#include <limits>

#include "tensorcast/torch/amp.h"

int main() {
  torch::manual_seed(0);
  torch::nn::Sequential model(torch::nn::Linear(16, 32), torch::nn::ReLU(), torch::nn::Linear(32, 1));
  torch::optim::Adam optimizer(model->parameters(), torch::optim::AdamOptions(1e-2));
  tc::torch_amp::GradScaler scaler("cpu");
  const torch::Tensor teacher = torch::randn({16, 1});

  double first = 0, last = 0, scale0 = scaler.get_scale();
  bool skipped_overflow = false;
  for (int step = 0; step < 200; ++step) {
    const torch::Tensor x = torch::randn({64, 16});
    const torch::Tensor y = torch::sigmoid(x.matmul(teacher));
    optimizer.zero_grad();
    torch::Tensor loss;
    {
      tc::torch_amp::AutocastGuard autocast(torch::kCPU, torch::kFloat16);
      loss = torch::mse_loss(torch::sigmoid(model->forward(x)).to(torch::kFloat32), y);
    }
    scaler.scale(loss).backward();
    if (step == 0) {  // an overflow, as a too-large scale gives in fp16
      torch::NoGradGuard no_grad;
      model->parameters()[0].mutable_grad().fill_(std::numeric_limits<float>::infinity());
    }
    const bool stepped = scaler.step(optimizer);
    scaler.update();
    if (step == 0) skipped_overflow = !stepped && scaler.get_scale() == scale0 / 2;
    if (step == 1) first = loss.item<double>();
    last = loss.item<double>();
  }
  std::printf("consumer_torch: step 0 %s (scale %g -> %g), loss %.5f -> %.5f, %lld steps skipped\n",
              skipped_overflow ? "skipped" : "NOT skipped", scale0, scale0 / 2, first, last,
              static_cast<long long>(scaler.steps_skipped()));
  return skipped_overflow && last < 0.5 * first ? 0 : 1;
}
