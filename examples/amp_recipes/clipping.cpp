// Gradient clipping on unscaled gradients: unscale_ first, so that clip_grad_norm_ sees
// the true gradients and max_norm keeps its meaning whatever the scale.
//
//   scaler.scale(loss).backward()
//   scaler.unscale_(optimizer)
//   torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
//   scaler.step(optimizer)     # skips if the gradients hold inf/NaN, as it would have
//   scaler.update()
//
// Usage: amp_recipe_clipping [--precision bf16|fp16]; prints a JSON trace (recipe.h).
#include "recipe.h"

int main(int argc, char** argv) {
  const recipe::Precision precision = recipe::parse_precision(argc, argv);
  constexpr int kModel = 0;
  recipe::Mlp model(kModel);
  tc::optim::SGD opt(model->parameters(), tc::optim::SGDOptions(0.2).momentum(0.9));
  tc::amp::GradScaler scaler = recipe::make_scaler(precision);
  recipe::Trace trace("clipping", precision);
  for (int step = 0; step < recipe::kSteps; ++step) {
    auto [x, y] = recipe::batch(step, /*inf=*/step == recipe::kInfStep);
    opt.zero_grad();
    tc::Tensor loss;
    {
      tc::amp::AutocastGuard autocast(tc::kCPU, precision.dtype);
      loss = tc::cross_entropy(model->forward(x), y);
    }
    scaler.scale(loss).backward();
    scaler.unscale_(opt);
    // Small enough that most steps clip. A non-finite norm leaves the gradients as they are
    // (PyTorch multiplies them by NaN): the step is skipped either way.
    tc::nn::utils::clip_grad_norm_(model->parameters(), 0.25);
    const bool stepped = scaler.step(opt);
    scaler.update();
    trace.step(loss.item_double(), {!stepped}, scaler.get_scale());
  }
  trace.tensors("weights", recipe::weights(*model));
}
