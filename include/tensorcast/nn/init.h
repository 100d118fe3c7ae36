/// \file
/// tc::nn::init: in-place initializers with torch.nn.init's names and formulas. They draw
/// from the generator tc::manual_seed seeds, so a seeded model is reproducible, and run
/// without recording autograd (parameters that require grad can be initialized).
#pragma once
#include <string_view>
#include <utility>

#include "tensorcast/tensor.h"

namespace tc::nn::init {

/// Which fan the Kaiming initializers scale by.
enum class FanMode : uint8_t { FanIn, FanOut };

Tensor uniform_(Tensor tensor, double a = 0.0, double b = 1.0);  ///< U(a, b)
/// N(mean, std), in place; returns tensor.
Tensor normal_(Tensor tensor, double mean = 0.0, double std = 1.0);
/// `value` everywhere, in place; returns tensor.
Tensor constant_(Tensor tensor, double value);
/// Zeros, in place; returns tensor.
Tensor zeros_(Tensor tensor);
/// Ones, in place; returns tensor.
Tensor ones_(Tensor tensor);

/// (fan_in, fan_out) of a weight: dim 1 and dim 0 sizes times the receptive field
/// (product of the dims after the second). Needs at least 2 dims.
std::pair<int64_t, int64_t> calculate_fan_in_and_fan_out(const Tensor& tensor);
/// torch.nn.init.calculate_gain: "linear", "conv2d", "sigmoid", "tanh", "relu", "leaky_relu"
/// (param = negative slope, default 0.01), "selu".
double calculate_gain(std::string_view nonlinearity, double param = 0.01);

/// U(-bound, bound), bound = gain * sqrt(3 / fan), gain = calculate_gain(nonlinearity, a).
/// With a = sqrt(5) (what Linear and Conv2d use) bound = 1 / sqrt(fan_in).
Tensor kaiming_uniform_(Tensor tensor, double a = 0.0, FanMode mode = FanMode::FanIn,
                        std::string_view nonlinearity = "leaky_relu");
/// As kaiming_uniform_, from a normal distribution.
Tensor kaiming_normal_(Tensor tensor, double a = 0.0, FanMode mode = FanMode::FanIn,
                       std::string_view nonlinearity = "leaky_relu");
/// U(-b, b), b = gain * sqrt(6 / (fan_in + fan_out)).
Tensor xavier_uniform_(Tensor tensor, double gain = 1.0);
/// As xavier_uniform_, from a normal distribution.
Tensor xavier_normal_(Tensor tensor, double gain = 1.0);

}  // namespace tc::nn::init
