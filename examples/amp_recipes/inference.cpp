// Autocast inference: no scaler, no gradients; the model in eval mode, its forward in the
// autocast region (the 16-bit products and PyTorch's fp32 ops, as in training).
//
//   model.eval()
//   with torch.no_grad(), autocast(device_type, dtype):
//       output = model(input)
//
// Usage: amp_recipe_inference [--precision bf16|fp16]; prints a JSON trace (recipe.h): per
// batch the loss (scale 1, nothing skipped), the weights, and the last batch's outputs.
#include "recipe.h"

int main(int argc, char** argv) {
  const recipe::Precision precision = recipe::parse_precision(argc, argv);
  constexpr int kModel = 0;
  recipe::Mlp model(kModel);
  model->eval();
  recipe::Trace trace("inference", precision);
  tc::Tensor out;
  for (int step = 0; step < recipe::kSteps; ++step) {
    auto [x, y] = recipe::batch(step);
    tc::NoGradGuard no_grad;
    tc::amp::AutocastGuard autocast(tc::kCPU, precision.dtype);
    out = model->forward(x);
    trace.step(tc::cross_entropy(out, y).item_double(), {}, 1.0);
  }
  trace.tensors("weights", recipe::weights(*model));
  trace.outputs(out);
}
