// BatchNorm2d and LayerNorm.
#pragma once
#include <optional>

#include "tensorcast/nn/module.h"
#include "tensorcast/ops.h"

namespace tc::nn {

struct BatchNorm2dOptions {
  BatchNorm2dOptions(int64_t num_features) : num_features_(num_features) {}  // NOLINT
  TC_ARG(int64_t, num_features);
  TC_ARG(double, eps) = 1e-5;
  TC_ARG(double, momentum) = 0.1;  // running = (1 - momentum) * running + momentum * batch
  TC_ARG(bool, affine) = true;
  TC_ARG(bool, track_running_stats) = true;
};

// Input (N, C, H, W). Parameters "weight" (ones) and "bias" (zeros) when affine; buffers
// "running_mean" (zeros), "running_var" (ones) and "num_batches_tracked" (int64, 0-d)
// when tracking running stats: PyTorch's names, so state dicts map one to one.
// Training mode normalizes with the batch's statistics and updates the running ones;
// eval mode uses the running ones (or the batch's when not tracking).
class BatchNorm2dImpl : public Module {
 public:
  explicit BatchNorm2dImpl(const BatchNorm2dOptions& options);
  explicit BatchNorm2dImpl(int64_t num_features) : BatchNorm2dImpl(BatchNorm2dOptions(num_features)) {}
  Tensor forward(const Tensor& input);
  void reset_running_stats();
  void reset_parameters();
  void pretty_print(std::ostream& os) const override;

  BatchNorm2dOptions options;
  Tensor weight, bias;
  Tensor running_mean, running_var, num_batches_tracked;
};
TC_MODULE(BatchNorm2d);

struct LayerNormOptions {
  LayerNormOptions(Shape normalized_shape) : normalized_shape_(std::move(normalized_shape)) {}  // NOLINT
  TC_ARG(Shape, normalized_shape);
  TC_ARG(double, eps) = 1e-5;
  TC_ARG(bool, elementwise_affine) = true;
  TC_ARG(bool, bias) = true;  // only with elementwise_affine, as torch 2.1+
};

// Normalizes over the trailing `normalized_shape` dims; weight ones, bias zeros.
class LayerNormImpl : public Module {
 public:
  explicit LayerNormImpl(const LayerNormOptions& options);
  explicit LayerNormImpl(int64_t normalized_size) : LayerNormImpl(LayerNormOptions({normalized_size})) {}
  Tensor forward(const Tensor& input);
  // (input + residual, forward(input + residual)) in one pass (tc::add_layer_norm): the
  // residual stream of a transformer into this norm. The normalized rows round once to
  // normalized_dtype (default: the sum's dtype).
  TensorPair forward_add(const Tensor& input, const Tensor& residual,
                         std::optional<DType> normalized_dtype = std::nullopt);
  void reset_parameters();
  void pretty_print(std::ostream& os) const override;

  LayerNormOptions options;
  Tensor weight, bias;
};
TC_MODULE(LayerNorm);

}  // namespace tc::nn
