// The public ops. Every op: checks its inputs (tc::Error naming op, shapes and dtypes),
// promotes dtypes, records an autograd node when an input requires grad, and runs the
// device's kernel. Floating math on bfloat16/float16 computes in float32 and rounds once.
#pragma once
#include <optional>
#include <string_view>
#include <tuple>
#include <vector>

#include "tensorcast/tensor.h"

namespace tc {

// ---------------------------------------------------------------- factories
Tensor empty(const Shape& size, TensorOptions options = {});
Tensor zeros(const Shape& size, TensorOptions options = {});
Tensor ones(const Shape& size, TensorOptions options = {});
Tensor full(const Shape& size, double value, TensorOptions options = {});
Tensor arange(double end, TensorOptions options = {});
Tensor arange(double start, double end, double step = 1.0, TensorOptions options = {});
Tensor rand(const Shape& size, TensorOptions options = {});   // U[0, 1)
Tensor randn(const Shape& size, TensorOptions options = {});  // N(0, 1)
Tensor randint(int64_t low, int64_t high, const Shape& size, TensorOptions options = kInt64);
Tensor randperm(int64_t n, TensorOptions options = kInt64);  // a seeded permutation of 0..n-1
Tensor empty_like(const Tensor& t);
Tensor zeros_like(const Tensor& t);
Tensor ones_like(const Tensor& t);
Tensor full_like(const Tensor& t, double value);
Tensor rand_like(const Tensor& t);
Tensor randn_like(const Tensor& t);

// Copies `values` into a new tensor of `size` (default: 1-d) and dtype (default: T's).
template <class T>
Tensor tensor(const std::vector<T>& values, const Shape& size = {}, std::optional<DType> dtype = {});
Tensor tensor(std::initializer_list<double> values, TensorOptions options = {});
Tensor scalar_tensor(double value, TensorOptions options = {});  // 0-d

// Wraps caller-owned memory without copying; the caller keeps it alive. Strides default
// to contiguous. Not counted by memory_stats.
Tensor from_blob(void* data, const Shape& size, TensorOptions options = {});
Tensor from_blob(void* data, const Shape& size, const Shape& strides, TensorOptions options = {});

// Seeds the generator behind rand, randn, randint and dropout.
void manual_seed(uint64_t seed);
// The generator's full state as a uint8 tensor (portable across platforms), and back:
// set_rng_state(get_rng_state()) makes the following draws repeat exactly (resume).
Tensor get_rng_state();
void set_rng_state(const Tensor& state);

// ---------------------------------------------------------------- elementwise
// Binary ops broadcast (NumPy rules) and promote (promote_types); a double scalar
// takes the tensor's floating dtype, as a Python scalar does in PyTorch.
// The dtype of a binary op on a and b (torch.result_type): promote_types, except that a
// 0-d tensor does not widen a dimensioned one of the same category (bf16 (N) * f32 () -> bf16).
DType result_type(const Tensor& a, const Tensor& b);
Tensor add(const Tensor& a, const Tensor& b, double alpha = 1.0);  // a + alpha * b
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
// approximate: "none" (erf form) or "tanh".
Tensor gelu(const Tensor& x, std::string_view approximate = "none");
Tensor silu(const Tensor& x);
Tensor clamp(const Tensor& x, std::optional<double> min, std::optional<double> max);
Tensor where(const Tensor& condition, const Tensor& a, const Tensor& b);

// Comparisons give kBool tensors and carry no gradient.
Tensor eq(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, const Tensor& b);
Tensor eq(const Tensor& a, double b);
Tensor ne(const Tensor& a, double b);
Tensor lt(const Tensor& a, double b);
Tensor le(const Tensor& a, double b);
Tensor gt(const Tensor& a, double b);
Tensor ge(const Tensor& a, double b);
Tensor isnan(const Tensor& x);
Tensor isfinite(const Tensor& x);

Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator+(const Tensor& a, double b);
Tensor operator-(const Tensor& a, double b);
Tensor operator*(const Tensor& a, double b);
Tensor operator/(const Tensor& a, double b);
Tensor operator+(double a, const Tensor& b);
Tensor operator-(double a, const Tensor& b);
Tensor operator*(double a, const Tensor& b);
Tensor operator/(double a, const Tensor& b);
Tensor operator-(const Tensor& x);
Tensor operator==(const Tensor& a, const Tensor& b);
Tensor operator!=(const Tensor& a, const Tensor& b);
Tensor operator<(const Tensor& a, const Tensor& b);
Tensor operator<=(const Tensor& a, const Tensor& b);
Tensor operator>(const Tensor& a, const Tensor& b);
Tensor operator>=(const Tensor& a, const Tensor& b);
Tensor operator==(const Tensor& a, double b);
Tensor operator!=(const Tensor& a, double b);
Tensor operator<(const Tensor& a, double b);
Tensor operator<=(const Tensor& a, double b);
Tensor operator>(const Tensor& a, double b);
Tensor operator>=(const Tensor& a, double b);

// ---------------------------------------------------------------- reductions
// Accumulate in float32 for 16-bit and float32 inputs, float64 for float64 (and integers);
// the result has the input's dtype (sum of integers/bool: int64). Empty dims = all dims.
Tensor sum(const Tensor& x);
Tensor sum(const Tensor& x, const Shape& dims, bool keepdim = false);
Tensor mean(const Tensor& x);
Tensor mean(const Tensor& x, const Shape& dims, bool keepdim = false);
// Unbiased by default (correction = 1), like torch.var.
Tensor var(const Tensor& x, const Shape& dims, int64_t correction = 1, bool keepdim = false);
Tensor max(const Tensor& x);  // over all elements
Tensor min(const Tensor& x);
// (values, indices) along dim; the first index wins ties; NaN propagates and wins.
std::tuple<Tensor, Tensor> max(const Tensor& x, int64_t dim, bool keepdim = false);
std::tuple<Tensor, Tensor> min(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor argmax(const Tensor& x, std::optional<int64_t> dim = std::nullopt, bool keepdim = false);
Tensor argmin(const Tensor& x, std::optional<int64_t> dim = std::nullopt, bool keepdim = false);
// Sums `x` down to `size` (the reverse of broadcasting); used by broadcast backward.
Tensor sum_to_size(const Tensor& x, const Shape& size);

// ---------------------------------------------------------------- linear algebra (oneDNN)
// float32, bfloat16 and float16 with float32 accumulation (a 16-bit dtype without native
// math on this CPU, such as bfloat16 without AVX-512, is computed through float32 and the
// result rounds once).
Tensor matmul(const Tensor& a, const Tensor& b);  // numpy semantics, batch broadcasting
Tensor mm(const Tensor& a, const Tensor& b);      // (n, k) x (k, m)
Tensor bmm(const Tensor& a, const Tensor& b);     // (b, n, k) x (b, k, m)
Tensor linear(const Tensor& input, const Tensor& weight, const Tensor& bias = Tensor());

// ---------------------------------------------------------------- convolution and pooling
Tensor conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias = Tensor(),
              Shape stride = {1, 1}, Shape padding = {0, 0}, Shape dilation = {1, 1},
              int64_t groups = 1);
Tensor max_pool2d(const Tensor& input, Shape kernel_size, Shape stride = {},
                  Shape padding = {0, 0}, Shape dilation = {1, 1}, bool ceil_mode = false);
Tensor avg_pool2d(const Tensor& input, Shape kernel_size, Shape stride = {},
                  Shape padding = {0, 0}, bool ceil_mode = false, bool count_include_pad = true);
Tensor adaptive_avg_pool2d(const Tensor& input, Shape output_size);

// ---------------------------------------------------------------- neural-network ops
Tensor softmax(const Tensor& x, int64_t dim);
Tensor log_softmax(const Tensor& x, int64_t dim);
Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight = Tensor(),
                  const Tensor& bias = Tensor(), double eps = 1e-5);
// Training mode normalizes with batch statistics and updates running_mean/var in place
// (unbiased variance, PyTorch's momentum convention); eval mode uses the running stats.
Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var,
                  const Tensor& weight, const Tensor& bias, bool training, double momentum = 0.1,
                  double eps = 1e-5);
Tensor dropout(const Tensor& x, double p = 0.5, bool training = true);
Tensor embedding(const Tensor& weight, const Tensor& indices);
Tensor cat(const std::vector<Tensor>& tensors, int64_t dim = 0);
Tensor stack(const std::vector<Tensor>& tensors, int64_t dim = 0);

// ---------------------------------------------------------------- losses
enum class Reduction : uint8_t { None, Mean, Sum };
inline constexpr Reduction kNone = Reduction::None;
inline constexpr Reduction kMean = Reduction::Mean;
inline constexpr Reduction kSum = Reduction::Sum;

// input (N, C) or (N, C, d1, ...) logits; target int64 class indices (N) or (N, d1, ...).
Tensor cross_entropy(const Tensor& input, const Tensor& target, const Tensor& weight = Tensor(),
                     int64_t ignore_index = -100, Reduction reduction = kMean,
                     double label_smoothing = 0.0);
Tensor nll_loss(const Tensor& input, const Tensor& target, const Tensor& weight = Tensor(),
                int64_t ignore_index = -100, Reduction reduction = kMean);
Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction = kMean);
Tensor binary_cross_entropy_with_logits(const Tensor& input, const Tensor& target,
                                        const Tensor& weight = Tensor(),
                                        const Tensor& pos_weight = Tensor(),
                                        Reduction reduction = kMean);

// ---------------------------------------------------------------- threads
// Far above any core count; the OpenMP runtime itself fails (or crashes) on tens of
// thousands of threads, so larger requests are refused with an error.
inline constexpr int kMaxThreads = 1024;
void set_num_threads(int n);  // intra-op threads for CPU kernels (and oneDNN), 1..kMaxThreads
int get_num_threads();

}  // namespace tc
