// The program shown in README.md ("Using it"), built with the examples so it stays true.
#include <tensorcast/tensorcast.h>

#include <iostream>

int main() {
  namespace nn = tc::nn;
  tc::manual_seed(0);
  nn::Sequential model(nn::Flatten(), nn::Linear(784, 512), nn::ReLU(), nn::Linear(512, 10));
  tc::data::DataLoader loader(tc::data::FashionMNIST(),  // /usr/share/datasets/fashion-mnist
                              tc::data::DataLoaderOptions().batch_size(128).shuffle(true));
  tc::optim::AdamW optimizer(model->parameters(), tc::optim::AdamWOptions(1e-3).weight_decay(0.0));
  tc::amp::GradScaler scaler;  // loss scaling: essential for fp16, harmless with bf16

  int step = 0;
  for (auto& batch : loader) {
    optimizer.zero_grad();
    tc::Tensor loss;
    {
      tc::amp::AutocastGuard autocast(tc::kCPU, tc::kBFloat16);  // Linear in bf16, loss in fp32
      loss = tc::nn::functional::cross_entropy(model->forward(batch.data), batch.target);
    }
    scaler.scale(loss).backward();  // parameters get fp32 gradients
    scaler.step(optimizer);
    scaler.update();
    if (++step % 100 == 0) std::cout << "step " << step << "  loss " << loss.item<double>() << "\n";
  }
  std::cout << "peak tensor memory " << tc::memory_stats().peak_bytes / (1 << 20) << " MiB\n";
}
