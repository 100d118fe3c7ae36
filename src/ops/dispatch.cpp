// The public ops of ops.h: each hands its implementation (tc::impl, src/ops/impl.h) to the
// dispatcher, which applies autocast (src/amp/dispatch.h) before autograd and the kernel.
// Outside an autocast region the cost is one thread-local bool test.
// Factories, comparisons, result_type and the thread settings are defined where they
// live: they have nothing to cast.
#include "amp/dispatch.h"
#include "ops/impl.h"

namespace tc {

// The implementation as a callable (some impl names are overloaded, so not a pointer).
#define TC_IMPL(name) [](const auto&... xs) -> decltype(auto) { return impl::name(xs...); }
#define TC_DISPATCH(name, ...) return amp::dispatch<#name>(TC_IMPL(name), __VA_ARGS__)

// ---------------------------------------------------------------- elementwise
Tensor add(const Tensor& a, const Tensor& b, double alpha) { TC_DISPATCH(add, a, b, alpha); }
Tensor sub(const Tensor& a, const Tensor& b, double alpha) { TC_DISPATCH(sub, a, b, alpha); }
Tensor mul(const Tensor& a, const Tensor& b) { TC_DISPATCH(mul, a, b); }
Tensor div(const Tensor& a, const Tensor& b) { TC_DISPATCH(div, a, b); }
Tensor add(const Tensor& a, double b) { TC_DISPATCH(add, a, b); }
Tensor sub(const Tensor& a, double b) { TC_DISPATCH(sub, a, b); }
Tensor mul(const Tensor& a, double b) { TC_DISPATCH(mul, a, b); }
Tensor div(const Tensor& a, double b) { TC_DISPATCH(div, a, b); }
Tensor pow(const Tensor& a, double exponent) { TC_DISPATCH(pow, a, exponent); }
Tensor pow(const Tensor& a, const Tensor& exponent) { TC_DISPATCH(pow, a, exponent); }
Tensor maximum(const Tensor& a, const Tensor& b) { TC_DISPATCH(maximum, a, b); }
Tensor minimum(const Tensor& a, const Tensor& b) { TC_DISPATCH(minimum, a, b); }
Tensor neg(const Tensor& x) { TC_DISPATCH(neg, x); }
Tensor abs(const Tensor& x) { TC_DISPATCH(abs, x); }
Tensor exp(const Tensor& x) { TC_DISPATCH(exp, x); }
Tensor log(const Tensor& x) { TC_DISPATCH(log, x); }
Tensor log1p(const Tensor& x) { TC_DISPATCH(log1p, x); }
Tensor sqrt(const Tensor& x) { TC_DISPATCH(sqrt, x); }
Tensor rsqrt(const Tensor& x) { TC_DISPATCH(rsqrt, x); }
Tensor reciprocal(const Tensor& x) { TC_DISPATCH(reciprocal, x); }
Tensor tanh(const Tensor& x) { TC_DISPATCH(tanh, x); }
Tensor sigmoid(const Tensor& x) { TC_DISPATCH(sigmoid, x); }
Tensor relu(const Tensor& x) { TC_DISPATCH(relu, x); }
Tensor gelu(const Tensor& x, std::string_view approximate) { TC_DISPATCH(gelu, x, approximate); }
Tensor silu(const Tensor& x) { TC_DISPATCH(silu, x); }
Tensor clamp(const Tensor& x, std::optional<double> min, std::optional<double> max) { TC_DISPATCH(clamp, x, min, max); }
Tensor where(const Tensor& condition, const Tensor& a, const Tensor& b) { TC_DISPATCH(where, condition, a, b); }

// ---------------------------------------------------------------- reductions
Tensor sum(const Tensor& x) { TC_DISPATCH(sum, x); }
Tensor sum(const Tensor& x, const Shape& dims, bool keepdim) { TC_DISPATCH(sum, x, dims, keepdim); }
Tensor mean(const Tensor& x) { TC_DISPATCH(mean, x); }
Tensor mean(const Tensor& x, const Shape& dims, bool keepdim) { TC_DISPATCH(mean, x, dims, keepdim); }
Tensor var(const Tensor& x, const Shape& dims, int64_t correction, bool keepdim) { TC_DISPATCH(var, x, dims, correction, keepdim); }
Tensor max(const Tensor& x) { TC_DISPATCH(max, x); }
Tensor min(const Tensor& x) { TC_DISPATCH(min, x); }
std::tuple<Tensor, Tensor> max(const Tensor& x, int64_t dim, bool keepdim) { TC_DISPATCH(max, x, dim, keepdim); }
std::tuple<Tensor, Tensor> min(const Tensor& x, int64_t dim, bool keepdim) { TC_DISPATCH(min, x, dim, keepdim); }
Tensor argmax(const Tensor& x, std::optional<int64_t> dim, bool keepdim) { TC_DISPATCH(argmax, x, dim, keepdim); }
Tensor argmin(const Tensor& x, std::optional<int64_t> dim, bool keepdim) { TC_DISPATCH(argmin, x, dim, keepdim); }
Tensor sum_to_size(const Tensor& x, const Shape& size) { TC_DISPATCH(sum_to_size, x, size); }

// ---------------------------------------------------------------- linear algebra, convolution, pooling
Tensor matmul(const Tensor& a, const Tensor& b) { TC_DISPATCH(matmul, a, b); }
Tensor mm(const Tensor& a, const Tensor& b) { TC_DISPATCH(mm, a, b); }
Tensor bmm(const Tensor& a, const Tensor& b) { TC_DISPATCH(bmm, a, b); }
Tensor linear(const Tensor& input, const Tensor& weight, const Tensor& bias) { TC_DISPATCH(linear, input, weight, bias); }
Tensor conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias, Shape stride, Shape padding,
              Shape dilation, int64_t groups) {
  TC_DISPATCH(conv2d, input, weight, bias, stride, padding, dilation, groups);
}
Tensor max_pool2d(const Tensor& input, Shape kernel_size, Shape stride, Shape padding, Shape dilation,
                  bool ceil_mode) {
  TC_DISPATCH(max_pool2d, input, kernel_size, stride, padding, dilation, ceil_mode);
}
Tensor avg_pool2d(const Tensor& input, Shape kernel_size, Shape stride, Shape padding, bool ceil_mode,
                  bool count_include_pad) {
  TC_DISPATCH(avg_pool2d, input, kernel_size, stride, padding, ceil_mode, count_include_pad);
}
Tensor adaptive_avg_pool2d(const Tensor& input, Shape output_size) { TC_DISPATCH(adaptive_avg_pool2d, input, output_size); }

// ---------------------------------------------------------------- neural-network ops
Tensor softmax(const Tensor& x, int64_t dim) { TC_DISPATCH(softmax, x, dim); }
Tensor log_softmax(const Tensor& x, int64_t dim) { TC_DISPATCH(log_softmax, x, dim); }
Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight, const Tensor& bias,
                  double eps) {
  TC_DISPATCH(layer_norm, x, normalized_shape, weight, bias, eps);
}
Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var, const Tensor& weight,
                  const Tensor& bias, bool training, double momentum, double eps) {
  TC_DISPATCH(batch_norm, x, running_mean, running_var, weight, bias, training, momentum, eps);
}
Tensor dropout(const Tensor& x, double p, bool training) { TC_DISPATCH(dropout, x, p, training); }
Tensor embedding(const Tensor& weight, const Tensor& indices) { TC_DISPATCH(embedding, weight, indices); }
Tensor cat(const std::vector<Tensor>& tensors, int64_t dim) { TC_DISPATCH(cat, tensors, dim); }
Tensor stack(const std::vector<Tensor>& tensors, int64_t dim) { TC_DISPATCH(stack, tensors, dim); }

// ---------------------------------------------------------------- losses
Tensor cross_entropy(const Tensor& input, const Tensor& target, const Tensor& weight, int64_t ignore_index,
                     Reduction reduction, double label_smoothing) {
  TC_DISPATCH(cross_entropy, input, target, weight, ignore_index, reduction, label_smoothing);
}
Tensor nll_loss(const Tensor& input, const Tensor& target, const Tensor& weight, int64_t ignore_index,
                Reduction reduction) {
  TC_DISPATCH(nll_loss, input, target, weight, ignore_index, reduction);
}
Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction) { TC_DISPATCH(mse_loss, input, target, reduction); }
Tensor binary_cross_entropy_with_logits(const Tensor& input, const Tensor& target, const Tensor& weight,
                                        const Tensor& pos_weight, Reduction reduction) {
  TC_DISPATCH(binary_cross_entropy_with_logits, input, target, weight, pos_weight, reduction);
}

#undef TC_DISPATCH
#undef TC_IMPL

}  // namespace tc
