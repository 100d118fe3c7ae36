/// \file
/// FP8 training: the recipes of Transformer Engine and torchao.float8 for the linear layers'
/// matrix products. Master weights stay float32 and everything else runs under the bf16
/// autocast policy; only the three GEMMs of a linear layer (forward, input gradient, weight
/// gradient) take 8-bit operands:
///
/// \code{.cpp}
///   tc::fp8::AutocastGuard fp8(tc::fp8::Recipe::tensorwise());   // every nn::Linear in scope
///   tc::amp::AutocastGuard bf16(tc::kCPU, tc::kBFloat16);         // the rest of the model
///   auto loss = model->forward(x) ...;
/// \endcode
///
/// A tensor is quantized as its recipe says (the scale s multiplies the values before the
/// saturating cast, so x ~ codes / s; an MXFP8 block's E8M0 scale divides them, x ~ codes * s):
/// \verbatim
///   tensorwise  s = max_fp8 / max(amax, 1e-12), amax over the tensor, computed in float64
///               then rounded to float32 (torchao's amax_to_scale; TE's current scaling)
///   delayed     s = (max_fp8 / amax) / 2^margin in float32, amax the max (or the most
///               recent) of the last history_len steps' amaxes; the previous scale where that
///               amax is 0 or not finite; 1 before any step (TE's DelayedScaling)
///   rowwise     tensorwise's formula per row of the GEMM operand (along the reduced
///               dimension), rounded down to a power of two (torchao's rowwise)
///   mxfp8       one E8M0 scale per 32 consecutive elements along the reduced dimension: the
///               smallest power of two >= amax / max_fp8 (TE's and torchao's RCEIL), so no
///               element saturates
/// \endverbatim
/// The CPU path: tensors are quantized in passes that read the 16- or 32-bit values and
/// write the codes (no float32 copy). An 8-bit value is exact in float32 and so is the
/// product of two, so the GEMM widens the codes, multiplies in float32 with float32
/// accumulation (oneDNN) and applies the scales in the epilogue, which is what an fp8 GEMM with float32 accumulation
/// gives, up to the order of the additions. It is not faster than bf16 on a CPU without fp8
/// units; what backward keeps of a linear layer is 8-bit, half of bf16's bytes.
#pragma once
#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "tensorcast/tensor.h"

namespace tc::fp8 {

/// How a tensor's scale is chosen (see the top of this file).
enum class Scaling : uint8_t { kTensorwise, kDelayed, kRowwise, kMXFP8 };
/// How delayed scaling reduces its amax history: its maximum, or its most recent entry.
enum class AmaxAlgo : uint8_t { kMax, kMostRecent };

/// "tensorwise", "delayed", "rowwise", "mxfp8".
std::string_view scaling_name(Scaling s);
/// The Scaling named `name`; nullopt for anything else.
std::optional<Scaling> parse_scaling(std::string_view name);

/// An FP8 recipe: what is scaled how, and in which 8-bit format.
struct Recipe {
  Scaling scaling = Scaling::kTensorwise;  ///< the scale's granularity and timing
  DType forward_dtype = kFloat8_e4m3fn;    ///< activations and weights
  DType backward_dtype = kFloat8_e5m2;     ///< the output gradient (E5M2: TE's HYBRID format)
  int64_t amax_history_len = 1024;         ///< delayed: steps of amax history kept
  AmaxAlgo amax_algo = AmaxAlgo::kMax;     ///< delayed: how the history gives the amax
  int margin = 0;                          ///< delayed: the scale is divided by 2^margin
  bool power_of_two_scales = false;        ///< tensorwise/rowwise: scales rounded down to 2^k
  bool weight_grad_in_bf16 = false;        ///< the weight gradient's GEMM in bf16 (rowwise_with_gw_hp)

  /// torchao's tensorwise and TE's Float8CurrentScaling: E4M3 forward, E5M2 gradients.
  static Recipe tensorwise();
  /// TE's DelayedScaling (HYBRID): E4M3 forward, E5M2 gradients.
  static Recipe delayed(int64_t amax_history_len = 1024, AmaxAlgo algo = AmaxAlgo::kMax, int margin = 0);
  /// torchao's rowwise: E4M3 everywhere, power-of-two scales per row.
  static Recipe rowwise();
  /// TE's MXFP8BlockScaling: E4M3 everywhere, an E8M0 scale per 32 elements.
  static Recipe mxfp8();
  /// The recipe named by scaling_name (the command line's --fp8-recipe); an error naming the
  /// choices for anything else.
  static Recipe named(std::string_view name);
};

/// The elements an MXFP8 scale covers.
inline constexpr int64_t kMXBlock = 32;

/// A GEMM operand in 8 bits: `data` (rows, K) holds the codes of the rows to be reduced
/// along K. `scale` is float32, a scalar (tensorwise, delayed) or (rows, 1) (rowwise), with
/// x ~ data / scale; for MXFP8 it is float8_e8m0fnu (rows, K / 32) with x ~ data * scale
/// (K rounded up to a multiple of 32, the codes padded with zeros).
struct Quantized {
  Tensor data;                             ///< the 8-bit codes
  Tensor scale;                            ///< see above
  Scaling scaling = Scaling::kTensorwise;  ///< which of the two scale conventions
  /// The values the codes stand for, float32 (exact where the scales are powers of two).
  Tensor dequantize() const;
  /// The operand transposed: (K, rows). Only a scalar scale survives a transpose; rowwise and
  /// MXFP8 operands are quantized again along the other dimension instead.
  Quantized t() const;
};

/// torchao's amax_to_scale: max_fp8 / max(amax, 1e-12) in float64, rounded to float32, then
/// down to a power of two if asked.
float amax_to_scale(double amax, DType fp8_dtype, bool power_of_two = false);
/// TE's delayed-scaling update: (max_fp8 / amax) / 2^margin in float32; `previous` where amax
/// is 0 or not finite; float32's largest value where the quotient overflows.
float delayed_scale(float amax, float previous, DType fp8_dtype, int margin = 0);
/// The E8M0 scale of an MXFP8 block with this amax: the smallest power of two >= amax /
/// max_fp8, within 2^-127 .. 2^127; NaN for an amax that is NaN or infinite.
Float8_e8m0fnu mx_scale(float amax, DType fp8_dtype = kFloat8_e4m3fn);

/// x (any floating dtype; 2-D (rows, K), or more, flattened to rows) scaled and cast with
/// saturation to `fp8_dtype`, one scale for the whole tensor.
Quantized quantize_tensorwise(const Tensor& x, DType fp8_dtype, bool power_of_two = false);
/// The same with a given scale (delayed scaling's).
Quantized quantize_with_scale(const Tensor& x, DType fp8_dtype, float scale);
/// One scale per row (along the last dimension).
Quantized quantize_rowwise(const Tensor& x, DType fp8_dtype, bool power_of_two = true);
/// One E8M0 scale per 32 elements along the last dimension. Where that dimension does not
/// divide by 32 the codes are padded with zeros to the next multiple (so `data` has that
/// many columns): a zero changes neither a block's amax nor a product.
Quantized quantize_mxfp8(const Tensor& x, DType fp8_dtype = kFloat8_e4m3fn);
/// x quantized as `recipe` quantizes a tensor of a GEMM (not delayed scaling, which needs
/// its state: quantize_with_scale).
Quantized quantize(const Tensor& x, Scaling scaling, DType fp8_dtype, bool power_of_two);
/// quantize(x^T) for x (rows, K), the same codes and scales, without a transposed copy: the
/// operand of a GEMM that reduces along x's first dimension (the backward GEMMs).
Quantized quantize_columns(const Tensor& x, Scaling scaling, DType fp8_dtype, bool power_of_two);

/// a (M, K) and b (N, K), both 8-bit: a b^T in float32, float32 accumulation, the scales
/// applied as an fp8 GEMM applies them (scalar and per-row scales in the epilogue; MXFP8's
/// per block, exactly).
Tensor scaled_mm(const Quantized& a, const Quantized& b);

/// The recipe in force on this thread inside an AutocastGuard (nullopt outside one).
std::optional<Recipe> active_recipe();

/// Puts every nn::Linear called on this thread inside the guard's scope on `recipe`'s fp8
/// GEMMs (as Transformer Engine's te.autocast(recipe=...)); nests, restores on exit.
class AutocastGuard {
 public:
  /// fp8 on with `recipe`; `enabled` false turns it off inside the scope.
  explicit AutocastGuard(const Recipe& recipe, bool enabled = true);
  ~AutocastGuard();
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  std::optional<Recipe> previous_;
};

/// Delayed scaling's state of a linear layer: for each tensor it quantizes (input, weight,
/// output gradient) the amaxes of the last history_len steps and the scale the next step
/// uses. They are tensors so that a module registers them as buffers and checkpoints hold
/// them: a resumed run continues with the same scales (nn::LinearImpl::fp8_state).
struct LinearState {
  /// The rows of the state: which tensor of the layer.
  enum Role : int { kInput = 0, kWeight = 1, kGradOutput = 2 };
  /// Zero histories and unit scales, as before a first step (CPU, float32).
  explicit LinearState(int64_t history_len);
  Tensor amax_history;  ///< (3, history_len) float32: a row per Role, column 0 the most recent
  Tensor scale;         ///< (3) float32: the scale each Role's next quantization uses
  /// The scale the next quantization of `role` uses.
  float scale_of(Role role) const;
  /// Records this step's amax of `role` (the history shifts by one) and computes its next
  /// scale: delayed_scale of the history's max (or its most recent entry, as the recipe says).
  void update(Role role, float amax, const Recipe& recipe, DType fp8_dtype);
};

/// What quantization did to one tensor of a linear layer, summed over the quantizations
/// counted since the last clear().
struct QuantizationStats {
  int64_t quantizations = 0;  ///< tensors quantized
  int64_t total = 0;          ///< values quantized
  int64_t saturated = 0;      ///< values past the format's range once scaled, clamped to its largest
  int64_t flushed = 0;        ///< nonzero values whose code is zero
  float amax = 0;             ///< the largest |x| seen
  /// The last quantization's smallest scale, as the factor x is multiplied by before the
  /// cast (MXFP8: the reciprocal of an E8M0 scale).
  float scale_min = 0;
  float scale_max = 0;  ///< its largest (equal to scale_min for one scale per tensor)
  /// count / total (0 before any value was counted).
  double share(int64_t count) const { return total > 0 ? double(count) / double(total) : 0.0; }
};

/// The statistics of a linear layer's quantized tensors, indexed by LinearState::Role: the
/// input and the weight as the forward GEMM takes them, the output gradient as the input
/// gradient's GEMM takes it.
struct LinearStats {
  std::array<QuantizationStats, 3> roles;  ///< input, weight, output gradient
  /// Zeroes every count, for the next step.
  void clear() { roles = {}; }
};

/// "input", "weight", "grad_output".
std::string_view role_name(LinearState::Role role);

/// Counts what the quantizations of x into `q` did into `stats` (host passes over the
/// values, so only on the steps a report samples).
void count_quantization(const Tensor& x, const Quantized& q, DType fp8_dtype, QuantizationStats& stats);

/// Inside its scope, every fp8::linear called on this thread counts its quantizations
/// (forward and, later, backward) into the LinearStats it was handed. Off by default:
/// counting costs a pass over each tensor.
class ObserveGuard {
 public:
  /// Counting on (or off, with `enabled` false) until destroyed; nests.
  explicit ObserveGuard(bool enabled = true);
  ~ObserveGuard();
  ObserveGuard(const ObserveGuard&) = delete;
  ObserveGuard& operator=(const ObserveGuard&) = delete;

 private:
  bool previous_;
};
/// Whether fp8::linear counts its quantizations on this thread (inside an ObserveGuard).
bool observing();

/// y = x w^T + b with the GEMMs in fp8 as `recipe` says: x (..., K) any floating dtype, w
/// (N, K) the float32 master (or any floating dtype), b (N) or undefined. The output has x's
/// dtype (bf16 under autocast). `state` holds delayed scaling's amax histories (required for
/// it, with the recipe's history length; ignored otherwise): a forward with grad mode on
/// (a training step) and its backward add their amaxes to it; one without (evaluation)
/// uses its scales and leaves it as it is. Inside an ObserveGuard, a non-null `stats`
/// receives the counts of this forward's quantizations and of its backward's. Differentiable
/// in x, w and b.
Tensor linear(const Tensor& x, const Tensor& w, const Tensor& b, const Recipe& recipe, LinearState* state = nullptr,
              std::shared_ptr<LinearStats> stats = nullptr);

}  // namespace tc::fp8
