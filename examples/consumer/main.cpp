// Built against an *installed* tensorcast: a two-layer network on random data; exits 0
// only if the loss falls by more than half.
#include <tensorcast/tensorcast.h>

#include <cstdio>

int main() {
  tc::manual_seed(1);
  const tc::Tensor x = tc::randn({256, 16});
  const tc::Tensor y = tc::sigmoid(tc::matmul(x, tc::randn({16, 1})));  // a learnable target
  tc::Tensor w1 = (tc::randn({32, 16}) * 0.25).detach().requires_grad_();
  tc::Tensor b1 = tc::zeros({32}, tc::TensorOptions().requires_grad(true));
  tc::Tensor w2 = (tc::randn({1, 32}) * 0.25).detach().requires_grad_();
  double first = 0, last = 0;
  for (int step = 0; step < 300; ++step) {
    tc::Tensor pred = tc::sigmoid(tc::linear(tc::tanh(tc::linear(x, w1, b1)), w2));
    tc::Tensor loss = tc::mse_loss(pred, y);
    for (tc::Tensor* p : {&w1, &b1, &w2}) p->set_grad(tc::Tensor());
    loss.backward();
    tc::NoGradGuard ng;
    for (tc::Tensor* p : {&w1, &b1, &w2}) p->add_(p->grad(), -2.0);
    if (step == 0) first = loss.item<double>();
    last = loss.item<double>();
  }
  std::printf("consumer: loss %.5f -> %.5f\n", first, last);
  return last < 0.5 * first ? 0 : 1;
}
