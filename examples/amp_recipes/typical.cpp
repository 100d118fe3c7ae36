// PyTorch's typical mixed-precision loop ("Automatic Mixed Precision examples"):
//
//   for input, target in data:
//       optimizer.zero_grad()
//       with autocast(device_type, dtype):
//           loss = loss_fn(model(input), target)
//       scaler.scale(loss).backward()
//       scaler.step(optimizer)
//       scaler.update()
//
// Usage: amp_recipe_typical [--precision bf16|fp16]; prints a JSON trace (recipe.h).
#include "recipe.h"

int main(int argc, char** argv) {
  const recipe::Precision precision = recipe::parse_precision(argc, argv);
  constexpr int kModel = 0;
  recipe::Mlp model(kModel);
  tc::optim::SGD opt(model->parameters(), tc::optim::SGDOptions(0.2).momentum(0.9));
  tc::amp::GradScaler scaler = recipe::make_scaler(precision);
  recipe::Trace trace("typical", precision);
  for (int step = 0; step < recipe::kSteps; ++step) {
    auto [x, y] = recipe::batch(step, /*inf=*/step == recipe::kInfStep);
    opt.zero_grad();
    tc::Tensor loss;
    {
      tc::amp::AutocastGuard autocast(tc::kCPU, precision.dtype);
      loss = tc::cross_entropy(model->forward(x), y);
    }
    scaler.scale(loss).backward();
    const bool stepped = scaler.step(opt);
    scaler.update();
    trace.step(loss.item_double(), {!stepped}, scaler.get_scale());
  }
  trace.tensors("weights", recipe::weights(*model));
}
