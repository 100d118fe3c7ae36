// Several models, losses and optimizers with one scaler: each loss is scaled and backed
// through; each optimizer has its own step (which may skip on its own gradients); update()
// runs once, after every step of the iteration.
//
//   with autocast(device_type, dtype):
//       output0 = model0(input); output1 = model1(input)
//       loss0 = loss_fn(2 * output0 + 3 * output1, target)
//       loss1 = loss_fn(3 * output0 - 5 * output1, target)
//   scaler.scale(loss0).backward(retain_graph=True)
//   scaler.scale(loss1).backward()
//   scaler.unscale_(optimizer0)        # e.g. to look at or clip model0's gradients
//   scaler.step(optimizer0); scaler.step(optimizer1)
//   scaler.update()
//
// Usage: amp_recipe_multiple_models [--precision bf16|fp16]; prints a JSON trace
// (recipe.h) with both optimizers' skips; its loss is loss0 + loss1.
#include "recipe.h"

int main(int argc, char** argv) {
  const recipe::Precision precision = recipe::parse_precision(argc, argv);
  constexpr int kModel0 = 0, kModel1 = 1;
  recipe::Mlp model0(kModel0), model1(kModel1);
  tc::optim::SGD opt0(model0->parameters(), tc::optim::SGDOptions(0.05).momentum(0.9));
  tc::optim::AdamW opt1(model1->parameters(), tc::optim::AdamWOptions(0.01).weight_decay(0.01));
  tc::amp::GradScaler scaler = recipe::make_scaler(precision);
  recipe::Trace trace("multiple_models", precision);
  for (int step = 0; step < recipe::kSteps; ++step) {
    auto [x, y] = recipe::batch(step, /*inf=*/step == recipe::kInfStep);
    std::vector<float> one_hot(static_cast<size_t>(recipe::kBatch * recipe::kOut), 0.0f);
    const std::vector<double> classes = y.to_vector();
    for (size_t n = 0; n < classes.size(); ++n) one_hot[n * recipe::kOut + static_cast<size_t>(classes[n])] = 1.0f;
    const tc::Tensor target = tc::tensor(one_hot, {recipe::kBatch, recipe::kOut});
    opt0.zero_grad();
    opt1.zero_grad();
    tc::Tensor loss0, loss1;
    {
      tc::amp::AutocastGuard autocast(tc::kCPU, precision.dtype);
      tc::Tensor out0 = model0->forward(x), out1 = model1->forward(x);
      loss0 = tc::mse_loss(2 * out0 + 3 * out1, target);
      loss1 = tc::mse_loss(3 * out0 - 5 * out1, target);
    }
    scaler.scale(loss0).backward(tc::Tensor(), /*retain_graph=*/true);
    scaler.scale(loss1).backward();
    scaler.unscale_(opt0);
    const bool stepped0 = scaler.step(opt0);
    const bool stepped1 = scaler.step(opt1);
    scaler.update();
    trace.step(loss0.item_double() + loss1.item_double(), {!stepped0, !stepped1}, scaler.get_scale());
  }
  auto named = recipe::weights(*model0, "model0.");
  for (auto& w : recipe::weights(*model1, "model1.")) named.push_back(w);
  trace.tensors("weights", named);
}
