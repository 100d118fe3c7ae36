// Gradient accumulation: each optimizer step takes the gradients of kAccumulate
// micro-batches, each loss divided by kAccumulate; the scale must not change within the
// effective batch, so step and update run once per kAccumulate backward passes.
//
//   for i, (input, target) in enumerate(data):
//       with autocast(device_type, dtype):
//           loss = loss_fn(model(input), target) / iters_to_accumulate
//       scaler.scale(loss).backward()
//       if (i + 1) % iters_to_accumulate == 0:
//           scaler.step(optimizer); scaler.update(); optimizer.zero_grad()
//
// Usage: amp_recipe_accumulation [--precision bf16|fp16]; prints a JSON trace (recipe.h):
// one entry per optimizer step, its loss the sum of the micro-batches' divided losses.
#include "recipe.h"

int main(int argc, char** argv) {
  const recipe::Precision precision = recipe::parse_precision(argc, argv);
  constexpr int kModel = 0, kAccumulate = 4;
  recipe::Mlp model(kModel);
  tc::optim::SGD opt(model->parameters(), tc::optim::SGDOptions(0.2).momentum(0.9));
  tc::amp::GradScaler scaler = recipe::make_scaler(precision);
  recipe::Trace trace("accumulation", precision);
  for (int step = 0; step < recipe::kSteps; ++step) {
    opt.zero_grad();
    double total = 0;
    for (int micro = 0; micro < kAccumulate; ++micro) {
      // The inf goes into the second micro-batch of step kInfStep: one bad micro-batch
      // skips the whole effective batch.
      auto [x, y] = recipe::batch(step * kAccumulate + micro, /*inf=*/step == recipe::kInfStep && micro == 1);
      tc::Tensor loss;
      {
        tc::amp::AutocastGuard autocast(tc::kCPU, precision.dtype);
        loss = tc::cross_entropy(model->forward(x), y) / kAccumulate;
      }
      scaler.scale(loss).backward();
      total += loss.item_double();
    }
    const bool stepped = scaler.step(opt);
    scaler.update();
    trace.step(total, {!stepped}, scaler.get_scale());
  }
  trace.tensors("weights", recipe::weights(*model));
}
