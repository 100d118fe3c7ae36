/// \file
/// BatchNorm2d and LayerNorm.
#pragma once
#include <optional>

#include "tensorcast/nn/module.h"
#include "tensorcast/ops.h"

namespace tc::nn {

/// Options of BatchNorm2d (torch.nn.BatchNorm2d's arguments).
struct BatchNorm2dOptions {
  /// Normalizes num_features channels.
  BatchNorm2dOptions(int64_t num_features) : num_features_(num_features) {}  // NOLINT
  /// C of the (N, C, H, W) input.
  TC_ARG(int64_t, num_features);
  /// Added to the variance.
  TC_ARG(double, eps) = 1e-5;
  TC_ARG(double, momentum) = 0.1;            ///< running = (1 - momentum) * running + momentum * batch
  TC_ARG(bool, affine) = true;               ///< learned per-channel weight and bias
  TC_ARG(bool, track_running_stats) = true;  ///< keep running statistics (else batch statistics in eval too)
};

/// Input (N, C, H, W). Parameters "weight" (ones) and "bias" (zeros) when affine; buffers
/// "running_mean" (zeros), "running_var" (ones) and "num_batches_tracked" (int64, 0-d)
/// when tracking running stats: PyTorch's names, so state dicts map one to one.
/// Training mode normalizes with the batch's statistics and updates the running ones;
/// eval mode uses the running ones (or the batch's when not tracking).
class BatchNorm2dImpl : public Module {
 public:
  /// From options.
  explicit BatchNorm2dImpl(const BatchNorm2dOptions& options);
  /// Normalizes num_features channels.
  explicit BatchNorm2dImpl(int64_t num_features) : BatchNorm2dImpl(BatchNorm2dOptions(num_features)) {}
  /// (N, C, H, W) normalized per channel: batch statistics in training mode, the running ones in eval mode.
  Tensor forward(const Tensor& input);
  /// Running mean 0, running variance 1, num_batches_tracked 0.
  void reset_running_stats();
  /// Weight 1, bias 0, and the running statistics reset.
  void reset_parameters();
  void pretty_print(std::ostream& os) const override;

  BatchNorm2dOptions options;  ///< as constructed
  /// \name Parameters
  /// @{

  /// The affine parameters (C), undefined without affine.
  Tensor weight, bias;
  /// @}
  /// \name Buffers
  /// @{

  /// The running statistics (buffers, saved in the state dict), undefined without track_running_stats.
  Tensor running_mean, running_var, num_batches_tracked;
  /// @}
};
TC_MODULE(BatchNorm2d);

/// Options of LayerNorm (torch.nn.LayerNorm's arguments).
struct LayerNormOptions {
  /// Normalizes over the trailing dimensions normalized_shape.
  LayerNormOptions(Shape normalized_shape) : normalized_shape_(std::move(normalized_shape)) {}  // NOLINT
  TC_ARG(Shape, normalized_shape);          ///< the trailing dimensions normalized over
  TC_ARG(double, eps) = 1e-5;               ///< added to the variance
  TC_ARG(bool, elementwise_affine) = true;  ///< learned per-element weight (and bias)
  TC_ARG(bool, bias) = true;                ///< only with elementwise_affine, as torch 2.1+
};

/// Normalizes over the trailing `normalized_shape` dims; weight ones, bias zeros.
class LayerNormImpl : public Module {
 public:
  /// From options.
  explicit LayerNormImpl(const LayerNormOptions& options);
  /// Normalizes over a last dimension of normalized_size.
  explicit LayerNormImpl(int64_t normalized_size) : LayerNormImpl(LayerNormOptions({normalized_size})) {}
  /// The input normalized over its trailing normalized_shape dimensions, scaled and shifted.
  Tensor forward(const Tensor& input);
  /// (input + residual, forward(input + residual)) in one pass (tc::add_layer_norm): the
  /// residual stream of a transformer into this norm. The normalized rows round once to
  /// normalized_dtype (default: the sum's dtype).
  TensorPair forward_add(const Tensor& input, const Tensor& residual,
                         std::optional<DType> normalized_dtype = std::nullopt);
  /// Weight 1, bias 0.
  void reset_parameters();
  void pretty_print(std::ostream& os) const override;

  LayerNormOptions options;  ///< as constructed
  /// \name Parameters
  /// @{

  /// The affine parameters, of normalized_shape (undefined without them).
  Tensor weight, bias;
  /// @}
};
TC_MODULE(LayerNorm);

}  // namespace tc::nn
