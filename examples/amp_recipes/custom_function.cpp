// A custom autograd function inside an autocast region, with custom_fwd(cast_inputs=
// torch.float32) / custom_bwd: its inputs are cast to fp32 and it runs, forward and
// backward, with autocast off, whatever the region around it.
//
//   class MyMM(torch.autograd.Function):
//       @staticmethod
//       @custom_fwd(device_type=..., cast_inputs=torch.float32)
//       def forward(ctx, a, b):
//           ctx.save_for_backward(a, b)
//           return a.mm(b)
//       @staticmethod
//       @custom_bwd(device_type=...)
//       def backward(ctx, grad):
//           a, b = ctx.saved_tensors
//           return grad.mm(b.t()), a.t().mm(grad)
//
//   with autocast(device_type, dtype):
//       output = MyMM.apply(model.hidden(input), w2)    # an fp32 product in the region
//
// Usage: amp_recipe_custom_function [--precision bf16|fp16]; prints a JSON trace (recipe.h).
#include "recipe.h"

namespace {

struct MyMM : tc::autograd::Function<MyMM> {
  static constexpr const char* name = "MyMM";
  static constexpr std::optional<tc::DType> autocast_cast_inputs = tc::kFloat32;
  static tc::Tensor forward(tc::autograd::AutogradContext* ctx, const tc::Tensor& a, const tc::Tensor& b) {
    ctx->save_for_backward({a, b});
    return tc::mm(a, b);
  }
  static std::vector<tc::Tensor> backward(tc::autograd::AutogradContext* ctx, std::vector<tc::Tensor> grad) {
    const tc::Tensor& a = ctx->get_saved_variables()[0];
    const tc::Tensor& b = ctx->get_saved_variables()[1];
    return {tc::mm(grad[0], b.t()), tc::mm(a.t(), grad[0])};
  }
};

}  // namespace

int main(int argc, char** argv) {
  const recipe::Precision precision = recipe::parse_precision(argc, argv);
  constexpr int kModel = 0;
  recipe::Mlp model(kModel);
  // The output layer's weight, stored (hidden, out) for MyMM; fc2's bias is unused.
  tc::Tensor w2 = model->fc2->weight.detach().t().contiguous();
  w2.requires_grad_(true);
  std::vector<tc::Tensor> params{model->fc1->weight, model->fc1->bias, w2};
  tc::optim::SGD opt(params, tc::optim::SGDOptions(0.2).momentum(0.9));
  tc::amp::GradScaler scaler = recipe::make_scaler(precision);
  recipe::Trace trace("custom_function", precision);
  for (int step = 0; step < recipe::kSteps; ++step) {
    auto [x, y] = recipe::batch(step, /*inf=*/step == recipe::kInfStep);
    opt.zero_grad();
    tc::Tensor loss;
    {
      tc::amp::AutocastGuard autocast(tc::kCPU, precision.dtype);
      tc::Tensor out = MyMM::apply(model->hidden(x), w2);
      loss = tc::cross_entropy(out, y);
    }
    scaler.scale(loss).backward();
    const bool stepped = scaler.step(opt);
    scaler.update();
    trace.step(loss.item_double(), {!stepped}, scaler.get_scale());
  }
  trace.tensors("weights", {{"fc1.weight", model->fc1->weight}, {"fc1.bias", model->fc1->bias}, {"w2", w2}});
}
