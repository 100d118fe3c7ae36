// tc::nn::init: random values are drawn in float64 (53-bit uniforms) and rounded once
// into the tensor's dtype, so bounds hold exactly and every dtype sees the same draws.
#include "tensorcast/nn/init.h"

#include <cmath>

#include "tensorcast/autograd.h"
#include "tensorcast/ops.h"

namespace tc::nn::init {
namespace {

Tensor fill_from(Tensor tensor, const Tensor& values, const char* fn) {
  TC_CHECK(tensor.defined(), "nn.init", fn, ": the tensor is undefined");
  NoGradGuard no_grad;
  tensor.copy_(values);
  return tensor;
}

void check_floating(const Tensor& t, const char* fn) {
  TC_CHECK(t.defined(), "nn.init", fn, ": the tensor is undefined");
  TC_CHECK(t.is_floating_point(), "nn.init", fn, ": expected a floating tensor, got ", dtype_name(t.dtype()));
}

double fan(const Tensor& t, FanMode mode) {
  auto [in, out] = calculate_fan_in_and_fan_out(t);
  return static_cast<double>(mode == FanMode::FanIn ? in : out);
}

}  // namespace

Tensor uniform_(Tensor tensor, double a, double b) {
  check_floating(tensor, "uniform_");
  TC_CHECK(a <= b, "nn.init", "uniform_: expected a <= b, got a=", a, " b=", b);
  return fill_from(tensor, tc::rand(tensor.sizes(), kFloat64) * (b - a) + a, "uniform_");
}

Tensor normal_(Tensor tensor, double mean, double std) {
  check_floating(tensor, "normal_");
  TC_CHECK(std >= 0, "nn.init", "normal_: expected std >= 0, got ", std);
  return fill_from(tensor, tc::randn(tensor.sizes(), kFloat64) * std + mean, "normal_");
}

Tensor constant_(Tensor tensor, double value) {
  TC_CHECK(tensor.defined(), "nn.init", "constant_: the tensor is undefined");
  NoGradGuard no_grad;
  tensor.fill_(value);
  return tensor;
}
Tensor zeros_(Tensor tensor) { return constant_(std::move(tensor), 0.0); }
Tensor ones_(Tensor tensor) { return constant_(std::move(tensor), 1.0); }

std::pair<int64_t, int64_t> calculate_fan_in_and_fan_out(const Tensor& t) {
  TC_CHECK(t.defined() && t.dim() >= 2, "nn.init",
           "fan in and fan out can not be computed for a tensor with fewer than 2 dimensions",
           t.defined() ? ", got shape " + shape_str(t.sizes()) : std::string());
  int64_t receptive = 1;
  for (int64_t d = 2; d < t.dim(); ++d) receptive *= t.size(d);
  return {t.size(1) * receptive, t.size(0) * receptive};
}

double calculate_gain(std::string_view nl, double param) {
  if (nl == "linear" || nl == "conv1d" || nl == "conv2d" || nl == "conv3d" || nl == "sigmoid") return 1.0;
  if (nl == "tanh") return 5.0 / 3.0;
  if (nl == "relu") return std::sqrt(2.0);
  if (nl == "leaky_relu") return std::sqrt(2.0 / (1.0 + param * param));
  if (nl == "selu") return 3.0 / 4.0;
  TC_FAIL("nn.init", "calculate_gain: unsupported nonlinearity '", nl, "'");
}

Tensor kaiming_uniform_(Tensor tensor, double a, FanMode mode, std::string_view nonlinearity) {
  check_floating(tensor, "kaiming_uniform_");
  const double bound = calculate_gain(nonlinearity, a) * std::sqrt(3.0 / fan(tensor, mode));
  return uniform_(std::move(tensor), -bound, bound);
}

Tensor kaiming_normal_(Tensor tensor, double a, FanMode mode, std::string_view nonlinearity) {
  check_floating(tensor, "kaiming_normal_");
  const double std = calculate_gain(nonlinearity, a) / std::sqrt(fan(tensor, mode));
  return normal_(std::move(tensor), 0.0, std);
}

Tensor xavier_uniform_(Tensor tensor, double gain) {
  check_floating(tensor, "xavier_uniform_");
  auto [in, out] = calculate_fan_in_and_fan_out(tensor);
  const double bound = gain * std::sqrt(6.0 / static_cast<double>(in + out));
  return uniform_(std::move(tensor), -bound, bound);
}

Tensor xavier_normal_(Tensor tensor, double gain) {
  check_floating(tensor, "xavier_normal_");
  auto [in, out] = calculate_fan_in_and_fan_out(tensor);
  return normal_(std::move(tensor), 0.0, gain * std::sqrt(2.0 / static_cast<double>(in + out)));
}

}  // namespace tc::nn::init
