/// \file
/// Linear, Identity and Flatten.
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tensorcast/nn/module.h"
#include "tensorcast/ops.h"

namespace tc::fp8 {
struct LinearState;
struct LinearStats;
struct Recipe;
}  // namespace tc::fp8

namespace tc::nn {

/// Options of Linear (torch.nn.Linear's arguments).
struct LinearOptions {
  /// A layer from in_features to out_features.
  LinearOptions(int64_t in_features, int64_t out_features) : in_features_(in_features), out_features_(out_features) {}
  TC_ARG(int64_t, in_features);   ///< the input's last dimension
  TC_ARG(int64_t, out_features);  ///< the output's last dimension
  TC_ARG(bool, bias) = true;      ///< whether to learn an additive bias
  /// An activation applied to the output: activation(x W^T + b), through the fused op
  /// tc::linear_activation where that gives the bits of the two ops in turn (see
  /// LinearImpl::forward). Unset: the plain linear layer.
  TC_ARG(std::optional<Activation>, activation) = std::nullopt;
};

/// y = x W^T + b, or activation(x W^T + b) with LinearOptions::activation; weight (out, in)
/// and bias U(-1/sqrt(in), 1/sqrt(in)) as in PyTorch.
///
/// \code{.cpp}
///   tc::nn::Linear fc(tc::nn::LinearOptions(1024, 4096).activation(tc::Activation::kGelu));
/// \endcode
class LinearImpl : public Module {
 public:
  /// A layer from in_features to out_features, with bias.
  LinearImpl(int64_t in_features, int64_t out_features) : LinearImpl(LinearOptions(in_features, out_features)) {}
  /// From options.
  explicit LinearImpl(const LinearOptions& options);
  /// input (..., in) -> input weight^T + bias (..., out), then the activation if set. With an
  /// activation the layer runs tc::linear_activation where that op gives the same bits as
  /// tc::linear then the activation's op (a GELU of a 16-bit product: under CPU autocast, or
  /// of 16-bit input and weights, its GELU is looked up in the table the gelu op reads), and
  /// the two ops otherwise (a float32 GELU in the GEMM's epilogue is oneDNN's erf, whose
  /// bits differ from the gelu op's). Without a graph to record, the fused op applies the
  /// GELU as the product is written instead of in a pass of its own.
  Tensor forward(const Tensor& input);
  /// Weight and bias drawn again as PyTorch's (uniform in +-1/sqrt(in_features)).
  void reset_parameters();
  void pretty_print(std::ostream& os) const override;

  LinearOptions options;  ///< as constructed
  Tensor weight;          ///< (out_features, in_features)
  Tensor bias;            ///< undefined with .bias(false)
  /// Delayed fp8 scaling's amax histories and scales (tensorcast/amp/fp8.h), registered as
  /// the buffers fp8_amax_history and fp8_scale: made by the first forward under a delayed
  /// recipe, or beforehand by init_fp8_state (so that a checkpoint's state loads into them).
  std::shared_ptr<fp8::LinearState> fp8_state;
  /// Makes fp8_state for `recipe` if it is delayed scaling and the layer has none.
  void init_fp8_state(const fp8::Recipe& recipe);
  /// What the fp8 quantizations of the forwards run inside an fp8::ObserveGuard (and their
  /// backwards) did, since the caller last cleared it; made by the first such forward.
  std::shared_ptr<fp8::LinearStats> fp8_stats;
};
TC_MODULE(Linear);

/// Gives every Linear in `model` (itself included) its delayed-scaling state now, when
/// `recipe` is delayed scaling: the state then shows in state_dict(), so a checkpoint of an
/// fp8 run loads into a fresh model. Other recipes keep no state; nothing happens.
void init_fp8_state(Module& model, const fp8::Recipe& recipe);

/// The fp8 statistics of every Linear in `model` (itself included, as "") that has counted
/// any, by module name in registration order (fp8::ObserveGuard).
std::vector<std::pair<std::string, std::shared_ptr<fp8::LinearStats>>> named_fp8_stats(const Module& model);

/// Returns its input (a placeholder layer); TC_MODULE(Identity) is its holder.
class IdentityImpl : public Module {
 public:
  IdentityImpl() : Module("Identity") {}
  /// input, unchanged.
  Tensor forward(const Tensor& input) { return input; }
};
TC_MODULE(Identity);

/// Options of Flatten.
struct FlattenOptions {
  TC_ARG(int64_t, start_dim) = 1;  ///< first dimension merged
  TC_ARG(int64_t, end_dim) = -1;   ///< last dimension merged
};

/// Flattens dims start_dim..end_dim (default: all but the batch dim) into one.
class FlattenImpl : public Module {
 public:
  /// From options (default: every dimension after the batch's).
  explicit FlattenImpl(const FlattenOptions& options = {}) : Module("Flatten"), options(options) {}
  /// Merges start_dim..end_dim.
  FlattenImpl(int64_t start_dim, int64_t end_dim)
      : FlattenImpl(FlattenOptions().start_dim(start_dim).end_dim(end_dim)) {}
  /// input.flatten(start_dim, end_dim).
  Tensor forward(const Tensor& input) { return input.flatten(options.start_dim(), options.end_dim()); }
  void pretty_print(std::ostream& os) const override;

  FlattenOptions options;  ///< as constructed
};
TC_MODULE(Flatten);

}  // namespace tc::nn
