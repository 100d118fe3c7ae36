// Gradient penalty: the norm of the gradient joins the loss, so the second backward runs
// through the first one (create_graph). The gradients autograd::grad returns are of the
// scaled loss: they are unscaled by hand before the penalty is formed, and the penalized
// loss is scaled again for its own backward.
//
//   with autocast(...):
//       loss = loss_fn(model(input), target)
//   scaled_grads = torch.autograd.grad(scaler.scale(loss), model.parameters(), create_graph=True)
//   grads = [g * (1.0 / scaler.get_scale()) for g in scaled_grads]
//   with autocast(...):
//       loss = loss + sum(g.pow(2).sum() for g in grads).sqrt()
//   scaler.scale(loss).backward()
//   scaler.step(optimizer)
//   scaler.update()
//
// Usage: amp_recipe_gradient_penalty [--precision bf16|fp16]; prints a JSON trace (recipe.h).
#include "recipe.h"

int main(int argc, char** argv) {
  const recipe::Precision precision = recipe::parse_precision(argc, argv);
  constexpr int kModel = 0;
  recipe::Mlp model(kModel);
  tc::optim::SGD opt(model->parameters(), tc::optim::SGDOptions(0.2).momentum(0.9));
  tc::amp::GradScaler scaler = recipe::make_scaler(precision);
  recipe::Trace trace("gradient_penalty", precision);
  for (int step = 0; step < recipe::kSteps; ++step) {
    auto [x, y] = recipe::batch(step, /*inf=*/step == recipe::kInfStep);
    opt.zero_grad();
    tc::Tensor loss;
    {
      tc::amp::AutocastGuard autocast(tc::kCPU, precision.dtype);
      loss = tc::cross_entropy(model->forward(x), y);
    }
    const std::vector<tc::Tensor> scaled_grads =
        tc::autograd::grad({scaler.scale(loss)}, model->parameters(), {}, std::nullopt, /*create_graph=*/true);
    const double inv_scale = 1.0 / scaler.get_scale();
    {
      tc::amp::AutocastGuard autocast(tc::kCPU, precision.dtype);
      tc::Tensor sum_of_squares;
      for (const tc::Tensor& g : scaled_grads) {
        const tc::Tensor s = (g * inv_scale).pow(2.0).sum();
        sum_of_squares = sum_of_squares.defined() ? sum_of_squares + s : s;
      }
      loss = loss + sum_of_squares.sqrt();
    }
    scaler.scale(loss).backward();
    const bool stepped = scaler.step(opt);
    scaler.update();
    trace.step(loss.item_double(), {!stepped}, scaler.get_scale());
  }
  trace.tensors("weights", recipe::weights(*model));
}
