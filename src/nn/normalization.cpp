// BatchNorm2d and LayerNorm.
#include "tensorcast/nn/normalization.h"

#include <limits>
#include <ostream>

#include "tensorcast/autograd.h"
#include "tensorcast/nn/init.h"
#include "tensorcast/ops.h"

namespace tc::nn {

BatchNorm2dImpl::BatchNorm2dImpl(const BatchNorm2dOptions& o) : Module("BatchNorm2d"), options(o) {
  TC_CHECK(o.num_features() > 0, "nn", "BatchNorm2d: num_features must be positive, got ", o.num_features());
  TC_CHECK(o.momentum() >= 0.0 && o.momentum() <= 1.0, "nn", "BatchNorm2d: momentum must be in [0, 1], got ",
           o.momentum());
  const int64_t c = o.num_features();
  weight = register_parameter("weight", o.affine() ? tc::empty({c}) : Tensor());
  bias = register_parameter("bias", o.affine() ? tc::empty({c}) : Tensor());
  if (o.track_running_stats()) {
    running_mean = register_buffer("running_mean", tc::zeros({c}));
    running_var = register_buffer("running_var", tc::ones({c}));
    num_batches_tracked = register_buffer("num_batches_tracked", tc::zeros({}, kInt64));
  }
  reset_parameters();
}

void BatchNorm2dImpl::reset_running_stats() {
  if (!options.track_running_stats()) return;
  init::zeros_(running_mean);
  init::ones_(running_var);
  init::zeros_(num_batches_tracked);
}

void BatchNorm2dImpl::reset_parameters() {
  reset_running_stats();
  if (options.affine()) {
    init::ones_(weight);
    init::zeros_(bias);
  }
}

Tensor BatchNorm2dImpl::forward(const Tensor& input) {
  TC_CHECK(input.defined() && input.dim() == 4, "nn", "BatchNorm2d expects input of shape (N, C, H, W), got ",
           input.defined() ? shape_str(input.sizes()) : "an undefined tensor");
  TC_CHECK(input.size(1) == options.num_features(), "nn", "BatchNorm2d(", options.num_features(),
           ") got input of shape ", shape_str(input.sizes()), " with ", input.size(1), " channels");
  const bool use_running = options.track_running_stats();
  if (is_training() && use_running) {
    NoGradGuard no_grad;
    if (!num_batches_tracked.device().is_cpu()) {
      // On the device, without reading it back (no sync per forward): an int64 add, as
      // PyTorch's num_batches_tracked.add_(1).
      num_batches_tracked.add_(
          ones({}, TensorOptions(num_batches_tracked.dtype()).device(num_batches_tracked.device())));
    } else if (num_batches_tracked.dtype() == kInt64) {
      // In integers (a double loses counts above 2^53) and saturating: a loaded state may
      // hold the largest int64, and one more would overflow.
      int64_t* n = num_batches_tracked.data_ptr<int64_t>();
      if (*n < std::numeric_limits<int64_t>::max()) ++*n;
    } else {
      num_batches_tracked.fill_(num_batches_tracked.item_double() + 1.0);
    }
  }
  // Without running stats the op normalizes with the batch's statistics in both modes.
  return tc::batch_norm(input, use_running ? running_mean : Tensor(), use_running ? running_var : Tensor(), weight,
                        bias, is_training(), options.momentum(), options.eps());
}

void BatchNorm2dImpl::pretty_print(std::ostream& os) const {
  os << "BatchNorm2d(" << options.num_features() << ", eps=" << options.eps() << ", momentum=" << options.momentum()
     << ", affine=" << (options.affine() ? "true" : "false")
     << ", track_running_stats=" << (options.track_running_stats() ? "true" : "false") << ")";
}

LayerNormImpl::LayerNormImpl(const LayerNormOptions& o) : Module("LayerNorm"), options(o) {
  TC_CHECK(!o.normalized_shape().empty(), "nn", "LayerNorm: normalized_shape must not be empty");
  for (int64_t d : o.normalized_shape())
    TC_CHECK(d > 0, "nn", "LayerNorm: normalized_shape ", shape_str(o.normalized_shape()), " must be positive");
  const bool affine = o.elementwise_affine();
  weight = register_parameter("weight", affine ? tc::empty(o.normalized_shape()) : Tensor());
  bias = register_parameter("bias", affine && o.bias() ? tc::empty(o.normalized_shape()) : Tensor());
  reset_parameters();
}

void LayerNormImpl::reset_parameters() {
  if (weight.defined()) init::ones_(weight);
  if (bias.defined()) init::zeros_(bias);
}

Tensor LayerNormImpl::forward(const Tensor& input) {
  return tc::layer_norm(input, options.normalized_shape(), weight, bias, options.eps());
}

TensorPair LayerNormImpl::forward_add(const Tensor& input, const Tensor& residual,
                                      std::optional<DType> normalized_dtype) {
  return tc::add_layer_norm(input, residual, options.normalized_shape(), weight, bias, options.eps(), normalized_dtype);
}

void LayerNormImpl::pretty_print(std::ostream& os) const {
  os << "LayerNorm(" << shape_str(options.normalized_shape()) << ", eps=" << options.eps()
     << ", elementwise_affine=" << (options.elementwise_affine() ? "true" : "false") << ")";
}

}  // namespace tc::nn
