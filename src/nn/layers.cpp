// Linear, Flatten, Conv2d, pooling, activations, Dropout, Embedding and Sequential:
// the layers that are one op plus their parameters.
#include <cmath>
#include <cstddef>
#include <optional>
#include <ostream>

#include "tensorcast/amp/autocast.h"
#include "tensorcast/amp/fp8.h"
#include "tensorcast/nn/activation.h"
#include "tensorcast/nn/container.h"
#include "tensorcast/nn/conv.h"
#include "tensorcast/nn/dropout.h"
#include "tensorcast/nn/embedding.h"
#include "tensorcast/nn/init.h"
#include "tensorcast/nn/linear.h"
#include "tensorcast/nn/pooling.h"
#include "tensorcast/ops.h"

namespace tc::nn {

// ---------------------------------------------------------------- Linear
LinearImpl::LinearImpl(const LinearOptions& o) : Module("Linear"), options(o) {
  TC_CHECK(o.in_features() > 0 && o.out_features() > 0, "nn",
           "Linear: in_features and out_features must be positive, got ", o.in_features(), " and ", o.out_features());
  weight = register_parameter("weight", tc::empty({o.out_features(), o.in_features()}));
  bias = register_parameter("bias", o.bias() ? tc::empty({o.out_features()}) : Tensor());
  reset_parameters();
}

void LinearImpl::reset_parameters() {
  // kaiming_uniform_(a = sqrt(5)) is U(-1/sqrt(fan_in), 1/sqrt(fan_in)): PyTorch's default.
  init::kaiming_uniform_(weight, std::sqrt(5.0));
  if (bias.defined()) {
    const double bound = 1.0 / std::sqrt(static_cast<double>(options.in_features()));
    init::uniform_(bias, -bound, bound);
  }
}

namespace {

// The activation as its own op, as the ReLU and GELU modules run it.
Tensor activate(Activation act, const Tensor& h) {
  switch (act) {
    case Activation::kRelu:
      return tc::relu(h);
    case Activation::kGelu:
      return tc::gelu(h, "none");
    case Activation::kGeluTanh:
      return tc::gelu(h, "tanh");
  }
  TC_FAIL("nn", "Linear: activation must be Activation::kRelu, kGelu or kGeluTanh, got the value ",
          static_cast<int>(act));
}

// Whether tc::linear_activation gives the bits of tc::linear then `act`'s op for input x: a
// GELU of a 16-bit product (under CPU autocast, or of 16-bit input with weight and bias of
// its dtype) is looked up in the table the gelu op reads. A float32 GELU in the GEMM's
// epilogue is oneDNN's erf, and ReLU on the float32 accumulators is rounded after the
// activation rather than before: neither is promised to give the two ops' bits.
bool fused_gives_same_bits(Activation act, const Tensor& x, const Tensor& weight, const Tensor& bias) {
  if (act == Activation::kRelu) return false;
  if (x.device().is_cpu() && amp::is_autocast_enabled(kCPU)) return true;
  const bool same_dtypes = x.dtype() == weight.dtype() && (!bias.defined() || bias.dtype() == weight.dtype());
  return is_reduced_float(x.dtype()) && same_dtypes;
}

}  // namespace

// Fused where that changes no bit: without a graph the GELU is then looked up as the AMX
// kernel writes the product (no pass of its own over it), or in place after it; recorded
// it is the composition either way.
Tensor LinearImpl::forward(const Tensor& input) {
  TC_CHECK(input.defined() && input.dim() >= 1 && input.size(-1) == options.in_features(), "nn", "Linear(",
           options.in_features(), ", ", options.out_features(), ") expects input of shape (*, ", options.in_features(),
           "), got ", input.defined() ? shape_str(input.sizes()) : "an undefined tensor");
  const std::optional<Activation> act = options.activation();
  if (const std::optional<fp8::Recipe> recipe = fp8::active_recipe()) {
    init_fp8_state(*recipe);
    if (fp8::observing() && !fp8_stats) fp8_stats = std::make_shared<fp8::LinearStats>();
    const Tensor y = fp8::linear(input, weight, bias, *recipe, fp8_state.get(), fp8_stats);
    return act ? activate(*act, y) : y;
  }
  if (!act) return tc::linear(input, weight, bias);
  if (fused_gives_same_bits(*act, input, weight, bias)) return tc::linear_activation(input, weight, bias, *act);
  return activate(*act, tc::linear(input, weight, bias));
}

void LinearImpl::init_fp8_state(const fp8::Recipe& recipe) {
  if (recipe.scaling != fp8::Scaling::kDelayed || fp8_state) return;
  fp8_state = std::make_shared<fp8::LinearState>(recipe.amax_history_len);
  register_buffer("fp8_amax_history", fp8_state->amax_history);
  register_buffer("fp8_scale", fp8_state->scale);
}

std::vector<std::pair<std::string, std::shared_ptr<fp8::LinearStats>>> named_fp8_stats(const Module& model) {
  std::vector<std::pair<std::string, std::shared_ptr<fp8::LinearStats>>> out;
  if (const auto* self = dynamic_cast<const LinearImpl*>(&model); self && self->fp8_stats)
    out.emplace_back("", self->fp8_stats);
  for (const auto& [name, m] : model.named_modules())
    if (const auto* fc = dynamic_cast<const LinearImpl*>(m.get()); fc && fc->fp8_stats)
      out.emplace_back(name, fc->fp8_stats);
  return out;
}

void init_fp8_state(Module& model, const fp8::Recipe& recipe) {
  if (auto* self = dynamic_cast<LinearImpl*>(&model)) self->init_fp8_state(recipe);
  for (const auto& [name, m] : model.named_modules())
    if (auto* fc = dynamic_cast<LinearImpl*>(m.get())) fc->init_fp8_state(recipe);
}

void LinearImpl::pretty_print(std::ostream& os) const {
  os << "Linear(in_features=" << options.in_features() << ", out_features=" << options.out_features()
     << ", bias=" << (options.bias() ? "true" : "false");
  if (options.activation()) os << ", activation=" << activation_name(*options.activation());
  os << ")";
}

void FlattenImpl::pretty_print(std::ostream& os) const {
  os << "Flatten(start_dim=" << options.start_dim() << ", end_dim=" << options.end_dim() << ")";
}

// ---------------------------------------------------------------- Conv2d
Conv2dImpl::Conv2dImpl(const Conv2dOptions& o) : Module("Conv2d"), options(o) {
  TC_CHECK(o.in_channels() > 0 && o.out_channels() > 0 && o.groups() > 0, "nn",
           "Conv2d: in_channels, out_channels and groups must be positive");
  TC_CHECK(o.in_channels() % o.groups() == 0 && o.out_channels() % o.groups() == 0, "nn", "Conv2d: in_channels (",
           o.in_channels(), ") and out_channels (", o.out_channels(), ") must be divisible by groups (", o.groups(),
           ")");
  const auto k = o.kernel_size();
  weight = register_parameter("weight", tc::empty({o.out_channels(), o.in_channels() / o.groups(), k.h, k.w}));
  bias = register_parameter("bias", o.bias() ? tc::empty({o.out_channels()}) : Tensor());
  reset_parameters();
}

void Conv2dImpl::reset_parameters() {
  init::kaiming_uniform_(weight, std::sqrt(5.0));
  if (bias.defined()) {
    const double bound = 1.0 / std::sqrt(static_cast<double>(init::calculate_fan_in_and_fan_out(weight).first));
    init::uniform_(bias, -bound, bound);
  }
}

Tensor Conv2dImpl::forward(const Tensor& input) {
  return tc::conv2d(input, weight, bias, options.stride().shape(), options.padding().shape(),
                    options.dilation().shape(), options.groups());
}

void Conv2dImpl::pretty_print(std::ostream& os) const {
  os << "Conv2d(" << options.in_channels() << ", " << options.out_channels()
     << ", kernel_size=" << pair_str(options.kernel_size()) << ", stride=" << pair_str(options.stride());
  if (!(options.padding() == ExpandingArray2(0))) os << ", padding=" << pair_str(options.padding());
  if (!(options.dilation() == ExpandingArray2(1))) os << ", dilation=" << pair_str(options.dilation());
  if (options.groups() != 1) os << ", groups=" << options.groups();
  if (!options.bias()) os << ", bias=false";
  os << ")";
}

// ---------------------------------------------------------------- pooling
Tensor MaxPool2dImpl::forward(const Tensor& input) {
  return tc::max_pool2d(input, options.kernel_size().shape(), options.stride().shape(), options.padding().shape(),
                        options.dilation().shape(), options.ceil_mode());
}
void MaxPool2dImpl::pretty_print(std::ostream& os) const {
  os << "MaxPool2d(kernel_size=" << pair_str(options.kernel_size()) << ", stride=" << pair_str(options.stride())
     << ", padding=" << pair_str(options.padding()) << ", dilation=" << pair_str(options.dilation())
     << ", ceil_mode=" << (options.ceil_mode() ? "true" : "false") << ")";
}

Tensor AvgPool2dImpl::forward(const Tensor& input) {
  return tc::avg_pool2d(input, options.kernel_size().shape(), options.stride().shape(), options.padding().shape(),
                        options.ceil_mode(), options.count_include_pad());
}
void AvgPool2dImpl::pretty_print(std::ostream& os) const {
  os << "AvgPool2d(kernel_size=" << pair_str(options.kernel_size()) << ", stride=" << pair_str(options.stride())
     << ", padding=" << pair_str(options.padding()) << ")";
}

Tensor AdaptiveAvgPool2dImpl::forward(const Tensor& input) {
  return tc::adaptive_avg_pool2d(input, options.output_size().shape());
}
void AdaptiveAvgPool2dImpl::pretty_print(std::ostream& os) const {
  os << "AdaptiveAvgPool2d(output_size=" << pair_str(options.output_size()) << ")";
}

// ---------------------------------------------------------------- activations
Tensor ReLUImpl::forward(const Tensor& input) { return tc::relu(input); }

GELUImpl::GELUImpl(const GELUOptions& o) : Module("GELU"), options(o) {
  TC_CHECK(o.approximate() == "none" || o.approximate() == "tanh", "nn",
           "GELU: approximate must be 'none' or 'tanh', got '", o.approximate(), "'");
}
Tensor GELUImpl::forward(const Tensor& input) { return tc::gelu(input, options.approximate()); }
void GELUImpl::pretty_print(std::ostream& os) const { os << "GELU(approximate='" << options.approximate() << "')"; }

Tensor SiLUImpl::forward(const Tensor& input) { return tc::silu(input); }

// ---------------------------------------------------------------- Dropout
DropoutImpl::DropoutImpl(const DropoutOptions& o) : Module("Dropout"), options(o) {
  TC_CHECK(o.p() >= 0.0 && o.p() <= 1.0, "nn", "Dropout: probability p must be in [0, 1], got ", o.p());
}
Tensor DropoutImpl::forward(const Tensor& input) { return tc::dropout(input, options.p(), is_training()); }
void DropoutImpl::pretty_print(std::ostream& os) const { os << "Dropout(p=" << options.p() << ")"; }

// ---------------------------------------------------------------- Embedding
EmbeddingImpl::EmbeddingImpl(const EmbeddingOptions& o) : Module("Embedding"), options(o) {
  TC_CHECK(o.num_embeddings() > 0 && o.embedding_dim() > 0, "nn", "Embedding: sizes must be positive, got (",
           o.num_embeddings(), ", ", o.embedding_dim(), ")");
  weight = register_parameter("weight", tc::empty({o.num_embeddings(), o.embedding_dim()}));
  reset_parameters();
}
void EmbeddingImpl::reset_parameters() { init::normal_(weight, 0.0, 1.0); }
Tensor EmbeddingImpl::forward(const Tensor& indices) { return tc::embedding(weight, indices); }
void EmbeddingImpl::pretty_print(std::ostream& os) const {
  os << "Embedding(" << options.num_embeddings() << ", " << options.embedding_dim() << ")";
}

// ---------------------------------------------------------------- Sequential
Tensor SequentialImpl::forward(const Tensor& input) {
  TC_CHECK(!forwards_.empty(), "nn", "Sequential::forward called on an empty Sequential");
  Tensor x = input;
  for (const auto& forward : forwards_) x = forward(x);
  return x;
}

Tensor SequentialImpl::forward(const Tensor& input, const std::function<Tensor(size_t, const Tensor&)>& after) {
  TC_CHECK(!forwards_.empty(), "nn", "Sequential::forward called on an empty Sequential");
  Tensor x = input;
  for (size_t i = 0; i < forwards_.size(); ++i) x = after(i, forwards_[i](x));
  return x;
}

void SequentialImpl::erase(size_t index) {
  const std::shared_ptr<Module>& module = ptr(index);
  for (const auto& [name, child] : named_children())
    if (child == module) {
      unregister_module(name);
      break;
    }
  modules_.erase(modules_.begin() + static_cast<std::ptrdiff_t>(index));
  forwards_.erase(forwards_.begin() + static_cast<std::ptrdiff_t>(index));
  fusions_.erase(fusions_.begin() + static_cast<std::ptrdiff_t>(index));
}

size_t fuse_linear_activation(SequentialImpl& sequential) {
  size_t fused = 0;
  for (size_t i = 0; i + 1 < sequential.size(); ++i) {
    LinearImpl* linear = sequential.fusions_[i].linear;
    const auto& activation = sequential.fusions_[i + 1].activation;
    if (linear == nullptr || !activation || linear->options.activation()) continue;
    linear->options.activation(activation());
    sequential.erase(i + 1);
    ++fused;
  }
  return fused;
}

const std::shared_ptr<Module>& SequentialImpl::ptr(size_t index) const {
  TC_CHECK(index < modules_.size(), "nn", "Sequential: index ", index, " is out of range for a Sequential of ",
           modules_.size(), " modules");
  return modules_[index];
}

}  // namespace tc::nn
