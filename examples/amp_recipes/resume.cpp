// Saving and resuming mid-run: the scaler's state dict is saved with the model's and the
// optimizer's, and loaded into fresh objects, which continue exactly as the run would have.
//
//   checkpoint = {"model": model.state_dict(), "optimizer": optimizer.state_dict(),
//                 "scaler": scaler.state_dict()}
//   ...
//   model.load_state_dict(checkpoint["model"])
//   optimizer.load_state_dict(checkpoint["optimizer"])
//   scaler.load_state_dict(checkpoint["scaler"])
//
// Here the checkpoint goes through safetensors bytes in memory (a file in a real run), the
// resumed objects are built with other weights and the scaler's default options, and the
// program also runs the same steps without the interruption and fails unless the final
// weights are bit-identical.
//
// Usage: amp_recipe_resume [--precision bf16|fp16]; prints a JSON trace (recipe.h).
#include "recipe.h"

namespace {

constexpr int kResumeAt = 12;

void train(recipe::Mlp& model, tc::optim::AdamW& opt, tc::amp::GradScaler& scaler, const recipe::Precision& p,
           int first, int last, recipe::Trace* trace) {
  for (int step = first; step < last; ++step) {
    auto [x, y] = recipe::batch(step, /*inf=*/step == recipe::kInfStep);
    opt.zero_grad();
    tc::Tensor loss;
    {
      tc::amp::AutocastGuard autocast(tc::kCPU, p.dtype);
      loss = tc::cross_entropy(model->forward(x), y);
    }
    scaler.scale(loss).backward();
    const bool stepped = scaler.step(opt);
    scaler.update();
    if (trace) trace->step(loss.item_double(), {!stepped}, scaler.get_scale());
  }
}

tc::optim::AdamW make_optimizer(recipe::Mlp& model) {
  return tc::optim::AdamW(model->parameters(), tc::optim::AdamWOptions(0.01).weight_decay(0.01));
}

}  // namespace

int main(int argc, char** argv) {
  const recipe::Precision precision = recipe::parse_precision(argc, argv);
  constexpr int kModel = 0, kOtherModel = 5;
  recipe::Trace trace("resume", precision);

  recipe::Mlp model(kModel);
  tc::optim::AdamW opt = make_optimizer(model);
  tc::amp::GradScaler scaler = recipe::make_scaler(precision);
  train(model, opt, scaler, precision, 0, kResumeAt, &trace);
  std::string model_bytes = tc::io::serialize_safetensors(model->state_dict());
  std::string opt_bytes = tc::io::serialize_safetensors(opt.state_dict());
  std::string scaler_bytes = tc::io::serialize_safetensors(scaler.state_dict());

  recipe::Mlp resumed(kOtherModel);
  tc::optim::AdamW resumed_opt = make_optimizer(resumed);
  tc::amp::GradScaler resumed_scaler;
  resumed->load_state_dict(tc::io::parse_safetensors(model_bytes).tensors);
  resumed_opt.load_state_dict(tc::io::parse_safetensors(opt_bytes).tensors);
  resumed_scaler.load_state_dict(tc::io::parse_safetensors(scaler_bytes).tensors);
  train(resumed, resumed_opt, resumed_scaler, precision, kResumeAt, recipe::kSteps, &trace);

  // The run without the interruption, which the resumed one must reproduce bit for bit.
  recipe::Mlp straight(kModel);
  tc::optim::AdamW straight_opt = make_optimizer(straight);
  tc::amp::GradScaler straight_scaler = recipe::make_scaler(precision);
  train(straight, straight_opt, straight_scaler, precision, 0, recipe::kSteps, nullptr);
  const auto a = resumed->parameters(), b = straight->parameters();
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].to_vector() != b[i].to_vector()) {
      std::fprintf(stderr, "resume: parameter %zu differs from the uninterrupted run\n", i);
      return 1;
    }
  }
  if (resumed_scaler.get_scale() != straight_scaler.get_scale()) {
    std::fprintf(stderr, "resume: the scale differs from the uninterrupted run\n");
    return 1;
  }
  trace.tensors("weights", recipe::weights(*resumed));
}
