// Internal: the implementations behind the public ops of ops.h, in namespace tc::impl.
//
// The public functions (src/ops/dispatch.cpp) are one-liners that hand these to the
// dispatcher (src/amp/dispatch.h), which applies autocast before calling them. Code
// inside an op that needs another op calls the impl:: form: it is already below the
// autocast layer, and a composite op must not be re-cast piece by piece.
// Factories, comparisons, result_type and the thread settings are not dispatched and
// stay in namespace tc.
#pragma once
#include <optional>
#include <string_view>
#include <tuple>
#include <vector>

#include "tensorcast/ops.h"

namespace tc::impl {

// elementwise.cpp
Tensor add(const Tensor& a, const Tensor& b, double alpha = 1.0);
Tensor sub(const Tensor& a, const Tensor& b, double alpha = 1.0);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor add(const Tensor& a, double b);
Tensor sub(const Tensor& a, double b);
Tensor mul(const Tensor& a, double b);
Tensor div(const Tensor& a, double b);
Tensor pow(const Tensor& a, double exponent);
Tensor pow(const Tensor& a, const Tensor& exponent);
Tensor maximum(const Tensor& a, const Tensor& b);
Tensor minimum(const Tensor& a, const Tensor& b);
Tensor neg(const Tensor& x);
Tensor abs(const Tensor& x);
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor log1p(const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor rsqrt(const Tensor& x);
Tensor reciprocal(const Tensor& x);
Tensor tanh(const Tensor& x);
Tensor sigmoid(const Tensor& x);
Tensor relu(const Tensor& x);
Tensor gelu(const Tensor& x, std::string_view approximate = "none");
Tensor silu(const Tensor& x);
Tensor clamp(const Tensor& x, std::optional<double> min, std::optional<double> max);
Tensor where(const Tensor& condition, const Tensor& a, const Tensor& b);

// reduction.cpp
Tensor sum(const Tensor& x);
Tensor sum(const Tensor& x, const Shape& dims, bool keepdim = false);
Tensor mean(const Tensor& x);
Tensor mean(const Tensor& x, const Shape& dims, bool keepdim = false);
Tensor var(const Tensor& x, const Shape& dims, int64_t correction = 1, bool keepdim = false);
Tensor max(const Tensor& x);
Tensor min(const Tensor& x);
std::tuple<Tensor, Tensor> max(const Tensor& x, int64_t dim, bool keepdim = false);
std::tuple<Tensor, Tensor> min(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor argmax(const Tensor& x, std::optional<int64_t> dim = std::nullopt, bool keepdim = false);
Tensor argmin(const Tensor& x, std::optional<int64_t> dim = std::nullopt, bool keepdim = false);
Tensor sum_to_size(const Tensor& x, const Shape& size);

// linalg.cpp
Tensor matmul(const Tensor& a, const Tensor& b);
Tensor mm(const Tensor& a, const Tensor& b);
Tensor bmm(const Tensor& a, const Tensor& b);
Tensor linear(const Tensor& input, const Tensor& weight, const Tensor& bias = Tensor());

// conv.cpp, pool.cpp
Tensor conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias, Shape stride, Shape padding,
              Shape dilation, int64_t groups);
Tensor max_pool2d(const Tensor& input, Shape kernel_size, Shape stride, Shape padding, Shape dilation,
                  bool ceil_mode);
Tensor avg_pool2d(const Tensor& input, Shape kernel_size, Shape stride, Shape padding, bool ceil_mode,
                  bool count_include_pad);
Tensor adaptive_avg_pool2d(const Tensor& input, Shape output_size);

// softmax.cpp, norm.cpp, dropout.cpp, embedding.cpp, shape_ops.cpp
Tensor softmax(const Tensor& x, int64_t dim);
Tensor log_softmax(const Tensor& x, int64_t dim);
Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight, const Tensor& bias,
                  double eps);
Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var, const Tensor& weight,
                  const Tensor& bias, bool training, double momentum, double eps);
Tensor dropout(const Tensor& x, double p, bool training);
Tensor embedding(const Tensor& weight, const Tensor& indices);
Tensor cat(const std::vector<Tensor>& tensors, int64_t dim = 0);
Tensor stack(const std::vector<Tensor>& tensors, int64_t dim = 0);

// loss.cpp, loss_pointwise.cpp
Tensor cross_entropy(const Tensor& input, const Tensor& target, const Tensor& weight, int64_t ignore_index,
                     Reduction reduction, double label_smoothing);
Tensor nll_loss(const Tensor& input, const Tensor& target, const Tensor& weight, int64_t ignore_index,
                Reduction reduction);
Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction);
Tensor binary_cross_entropy_with_logits(const Tensor& input, const Tensor& target, const Tensor& weight,
                                        const Tensor& pos_weight, Reduction reduction);

}  // namespace tc::impl
