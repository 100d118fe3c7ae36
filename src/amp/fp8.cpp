// FP8 recipes: the scale formulas, quantization, the scaled GEMM and the fp8 linear layer
// (tensorcast/amp/fp8.h). Scales are computed on the host from the amaxes (a scalar, or one
// per row or block); the element work is tensor ops, so it runs wherever those run.
#include "tensorcast/amp/fp8.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <string>

#include "backend/cpu/loops/fp8_quantize.h"
#include "tensorcast/amp/autocast.h"
#include "tensorcast/autograd_function.h"
#include "tensorcast/factories.h"
#include "tensorcast/ops.h"

namespace tc::fp8 {
namespace {

constexpr const char* kOp = "fp8";

constexpr std::array<std::pair<Scaling, std::string_view>, 4> kScalingNames = {{
    {Scaling::kTensorwise, "tensorwise"},
    {Scaling::kDelayed, "delayed"},
    {Scaling::kRowwise, "rowwise"},
    {Scaling::kMXFP8, "mxfp8"},
}};

thread_local std::optional<Recipe> t_recipe;
thread_local bool t_observing = false;

double fp8_max(DType dt) {
  TC_CHECK(dt == kFloat8_e4m3fn || dt == kFloat8_e5m2, kOp,
           "expected float8_e4m3fn or float8_e5m2 for a GEMM operand, got ", dtype_name(dt));
  return traits(dt).max;
}

float round_down_to_power_of_two(float s) {
  if (!(s > 0.0f) || std::isinf(s)) return s;
  return std::ldexp(1.0f, std::ilogb(s));
}

void check_quantizable(const Tensor& x) {
  TC_CHECK(x.defined() && x.dim() >= 1 && is_floating(x.dtype()) && !is_float8(x.dtype()), kOp,
           "expected a floating tensor of at least one dimension to quantize, got ",
           x.defined() ? dtype_name(x.dtype()) : std::string_view("an undefined tensor"));
  TC_CHECK(x.device().is_cpu(), kOp, "the fp8 recipes run on the CPU; got a tensor on ", x.device(),
           " (cuBLASLt fp8 GEMMs are not implemented)");
}

// x as the quantization passes read it: (rows, K), contiguous, float32, bf16 or fp16 (a
// view of x where it already is one; float64 is narrowed to float32 first).
Tensor kernel_rows(const Tensor& x) {
  check_quantizable(x);
  const Tensor f = x.dtype() == kFloat64 ? x.to(kFloat32) : x;
  return (f.dim() == 2 ? f : f.reshape({-1, f.size(-1)})).contiguous();
}

// x as float32 rows (rows, K), contiguous: for counting, not on the training path.
Tensor as_rows(const Tensor& x) { return kernel_rows(x).to(kFloat32); }

// max |x| over the tensor, NaN when it holds one.
float amax_of_rows(const Tensor& rows) {
  std::vector<float> amax(static_cast<size_t>(rows.size(0)));
  cpu::fp8_row_block_amax(rows, std::max<int64_t>(rows.size(1), 1), amax.data());
  float a = 0.0f;
  for (const float v : amax) a = (std::isnan(a) || std::isnan(v)) ? v + a : std::max(a, v);
  return a;
}

float amax_of(const Tensor& x) { return amax_of_rows(kernel_rows(x)); }

int64_t round_up(int64_t n, int64_t m) { return (n + m - 1) / m * m; }

// MXFP8's E8M0 scales for block amaxes, and the factors the values are multiplied by (the
// reciprocals: multiplying by 2^-e rounds as dividing by 2^e does).
Tensor mx_scales(const std::vector<float>& amax, int64_t rows, int64_t blocks, DType dt, std::vector<float>& factor) {
  Tensor scale = empty({rows, blocks}, kFloat8_e8m0fnu);
  auto* codes = static_cast<Float8_e8m0fnu*>(scale.raw_data());
  factor.resize(amax.size());
  for (size_t i = 0; i < amax.size(); ++i) {
    codes[i] = mx_scale(amax[i], dt);
    factor[i] = 1.0f / static_cast<float>(codes[i]);
  }
  return scale;
}

}  // namespace

std::string_view scaling_name(Scaling s) {
  for (const auto& [v, n] : kScalingNames)
    if (v == s) return n;
  return "?";
}

std::optional<Scaling> parse_scaling(std::string_view name) {
  for (const auto& [v, n] : kScalingNames)
    if (n == name) return v;
  return std::nullopt;
}

Recipe Recipe::tensorwise() { return Recipe{}; }

Recipe Recipe::delayed(int64_t amax_history_len, AmaxAlgo algo, int margin) {
  TC_CHECK(amax_history_len >= 1, kOp, "amax_history_len must be at least 1, got ", amax_history_len);
  Recipe r;
  r.scaling = Scaling::kDelayed;
  r.amax_history_len = amax_history_len;
  r.amax_algo = algo;
  r.margin = margin;
  return r;
}

Recipe Recipe::rowwise() {
  Recipe r;
  r.scaling = Scaling::kRowwise;
  r.backward_dtype = kFloat8_e4m3fn;
  r.power_of_two_scales = true;
  return r;
}

Recipe Recipe::mxfp8() {
  Recipe r;
  r.scaling = Scaling::kMXFP8;
  r.backward_dtype = kFloat8_e4m3fn;
  return r;
}

Recipe Recipe::named(std::string_view name) {
  const std::optional<Scaling> s = parse_scaling(name);
  TC_CHECK(s.has_value(), kOp, "unknown fp8 recipe '", name, "' (expected tensorwise, delayed, rowwise or mxfp8)");
  switch (*s) {
    case Scaling::kDelayed:
      return delayed();
    case Scaling::kRowwise:
      return rowwise();
    case Scaling::kMXFP8:
      return mxfp8();
    default:
      return tensorwise();
  }
}

float amax_to_scale(double amax, DType dt, bool power_of_two) {
  const float s = static_cast<float>(fp8_max(dt) / std::max(amax, 1e-12));
  return power_of_two ? round_down_to_power_of_two(s) : s;
}

float delayed_scale(float amax, float previous, DType dt, int margin) {
  if (!(amax > 0.0f) || !std::isfinite(amax)) return previous;
  float s = static_cast<float>(fp8_max(dt)) / amax;
  s = std::ldexp(s, -margin);  // exact: the division by 2^margin
  return std::isinf(s) ? std::numeric_limits<float>::max() : s;
}

Float8_e8m0fnu mx_scale(float amax, DType dt) {
  if (!std::isfinite(amax)) return Float8_e8m0fnu(0xff, Float8_e8m0fnu::from_bits());
  const double q = static_cast<double>(amax) / fp8_max(dt);  // exact enough: only its exponent and
  int e = -127;                                              // whether it is a power of two matter
  if (q > 0) {
    int exp2 = 0;
    const double m = std::frexp(q, &exp2);  // q = m * 2^exp2, m in [0.5, 1)
    e = m == 0.5 ? exp2 - 1 : exp2;         // ceil(log2(q))
  }
  e = std::clamp(e, -127, 127);
  return Float8_e8m0fnu(static_cast<uint8_t>(e + 127), Float8_e8m0fnu::from_bits());
}

Quantized quantize_with_scale(const Tensor& x, DType dt, float scale) {
  const Tensor rows = kernel_rows(x);
  const int64_t r = rows.size(0), k = rows.size(1);
  Tensor data = empty({r, k}, dt);
  fp8_max(dt);  // refuses a dtype other than the two formats
  cpu::fp8_quantize_rows(rows, &scale, 0, std::max<int64_t>(k, 1), dt, data.raw_data(), k);
  return {data, scalar_tensor(scale, kFloat32), Scaling::kTensorwise};
}

Quantized quantize_tensorwise(const Tensor& x, DType dt, bool power_of_two) {
  const Tensor rows = kernel_rows(x);
  return quantize_with_scale(rows, dt, amax_to_scale(amax_of_rows(rows), dt, power_of_two));
}

Quantized quantize_rowwise(const Tensor& x, DType dt, bool power_of_two) {
  const Tensor rows = kernel_rows(x);
  const int64_t r = rows.size(0), k = rows.size(1);
  std::vector<float> scale(static_cast<size_t>(r));
  cpu::fp8_row_block_amax(rows, std::max<int64_t>(k, 1), scale.data());
  for (float& s : scale) s = amax_to_scale(s, dt, power_of_two);
  Tensor data = empty({r, k}, dt);
  cpu::fp8_quantize_rows(rows, scale.data(), 1, std::max<int64_t>(k, 1), dt, data.raw_data(), k);
  return {data, tensor(scale, {r, 1}), Scaling::kRowwise};
}

Quantized quantize_mxfp8(const Tensor& x, DType dt) {
  const Tensor rows = kernel_rows(x);
  fp8_max(dt);
  // A last, partial block is padded with zeros, which change neither amax nor product.
  const int64_t r = rows.size(0), k = rows.size(1), kp = round_up(k, kMXBlock), nb = kp / kMXBlock;
  std::vector<float> amax(static_cast<size_t>(r * nb)), factor;
  cpu::fp8_row_block_amax(rows, kMXBlock, amax.data());
  Tensor scale = mx_scales(amax, r, nb, dt, factor);
  Tensor data = empty({r, kp}, dt);
  cpu::fp8_quantize_rows(rows, factor.data(), nb, kMXBlock, dt, data.raw_data(), kp);
  return {data, scale, Scaling::kMXFP8};
}

Quantized quantize(const Tensor& x, Scaling scaling, DType dt, bool power_of_two) {
  switch (scaling) {
    case Scaling::kRowwise:
      return quantize_rowwise(x, dt, power_of_two);
    case Scaling::kMXFP8:
      return quantize_mxfp8(x, dt);
    case Scaling::kTensorwise:
      return quantize_tensorwise(x, dt, power_of_two);
    case Scaling::kDelayed:
      break;
  }
  TC_FAIL(kOp, "delayed scaling quantizes with its state's scale (quantize_with_scale)");
}

Quantized quantize_columns(const Tensor& x, Scaling scaling, DType dt, bool power_of_two) {
  if (scaling == Scaling::kTensorwise) return quantize_tensorwise(x, dt, power_of_two).t();
  TC_CHECK(scaling == Scaling::kRowwise || scaling == Scaling::kMXFP8, kOp,
           "delayed scaling quantizes with its state's scale (quantize_with_scale)");
  const Tensor rows = kernel_rows(x);
  fp8_max(dt);
  const int64_t m = rows.size(0), k = rows.size(1);
  if (scaling == Scaling::kRowwise) {
    std::vector<float> scale(static_cast<size_t>(k));
    cpu::fp8_column_block_amax(rows, std::max<int64_t>(m, 1), scale.data());
    for (float& s : scale) s = amax_to_scale(s, dt, power_of_two);
    Tensor data = empty({k, m}, dt);
    cpu::fp8_quantize_columns(rows, scale.data(), std::max<int64_t>(m, 1), dt, data.raw_data(), m);
    return {data, tensor(scale, {k, 1}), Scaling::kRowwise};
  }
  const int64_t mp = round_up(m, kMXBlock), nb = mp / kMXBlock;
  std::vector<float> amax(static_cast<size_t>(k * nb)), factor;
  cpu::fp8_column_block_amax(rows, kMXBlock, amax.data());
  Tensor scale = mx_scales(amax, k, nb, dt, factor);
  Tensor data = empty({k, mp}, dt);
  cpu::fp8_quantize_columns(rows, factor.data(), kMXBlock, dt, data.raw_data(), mp);
  return {data, scale, Scaling::kMXFP8};
}

Tensor Quantized::dequantize() const {
  const Tensor f = data.to(kFloat32);
  if (scaling == Scaling::kMXFP8) {
    const int64_t r = f.size(0), k = f.size(1);
    return (f.reshape({r, k / kMXBlock, kMXBlock}) * scale.to(kFloat32).unsqueeze(2)).reshape({r, k});
  }
  return f / scale;
}

Quantized Quantized::t() const {
  TC_CHECK(scale.dim() == 0, kOp, "only a tensorwise-scaled operand can be transposed; quantize ",
           scaling_name(scaling), " operands along the other dimension instead");
  return {data.t().contiguous(), scale, scaling};
}

Tensor scaled_mm(const Quantized& a, const Quantized& b) {
  TC_CHECK(a.data.dim() == 2 && b.data.dim() == 2 && a.data.size(1) == b.data.size(1), kOp,
           "scaled_mm expects a (M, K) and b (N, K), got ", shape_str(a.data.sizes()), " and ",
           shape_str(b.data.sizes()));
  const bool mx_a = a.scaling == Scaling::kMXFP8, mx_b = b.scaling == Scaling::kMXFP8;
  amp::AutocastGuard off(kCPU, kBFloat16, false);  // float32 products, whatever the caller's region
  TC_CHECK(mx_a == mx_b, kOp, "scaled_mm: an MXFP8 operand multiplies only another MXFP8 operand");
  if (mx_a) return a.dequantize().matmul(b.dequantize().t());  // per-block scales: exact powers of two
  // Codes are exact in float32 and so are their products: a float32 GEMM with float32
  // accumulation, then scale_inv(a) * scale_inv(b) in the epilogue, as cuBLASLt applies them.
  const Tensor acc = a.data.to(kFloat32).matmul(b.data.to(kFloat32).t());
  const Tensor inv_a = tc::reciprocal(a.scale), inv_b = tc::reciprocal(b.scale);
  return acc * (inv_a * (inv_b.dim() == 0 ? inv_b : inv_b.reshape({1, -1})));
}

LinearState::LinearState(int64_t history_len)
    : amax_history(zeros({3, history_len}, kFloat32)), scale(ones({3}, kFloat32)) {
  TC_CHECK(history_len >= 1, kOp, "amax_history_len must be at least 1, got ", history_len);
}

float LinearState::scale_of(Role role) const { return static_cast<const float*>(scale.raw_data())[role]; }

void LinearState::update(Role role, float amax, const Recipe& recipe, DType dt) {
  const int64_t len = amax_history.size(1);
  TC_CHECK(amax_history.device().is_cpu() && amax_history.dtype() == kFloat32 && amax_history.is_contiguous() &&
               scale.device().is_cpu() && scale.dtype() == kFloat32 && scale.numel() == 3,
           kOp, "the delayed-scaling state must be float32 tensors on the CPU");
  TC_CHECK(len == recipe.amax_history_len, kOp, "this layer's amax history holds ", len,
           " steps but the recipe asks for ", recipe.amax_history_len);
  float* h = static_cast<float*>(amax_history.raw_data()) + role * len;
  std::copy_backward(h, h + len - 1, h + len);  // the oldest entry drops out
  h[0] = amax;
  float a = h[0];
  if (recipe.amax_algo == AmaxAlgo::kMax)
    for (int64_t i = 1; i < len; ++i) a = (std::isnan(h[i]) || h[i] > a) ? h[i] : a;  // a NaN keeps the scale
  float* s = static_cast<float*>(scale.raw_data()) + role;
  *s = delayed_scale(a, *s, dt, recipe.margin);
}

std::optional<Recipe> active_recipe() { return t_recipe; }

std::string_view role_name(LinearState::Role role) {
  switch (role) {
    case LinearState::kInput:
      return "input";
    case LinearState::kWeight:
      return "weight";
    case LinearState::kGradOutput:
      return "grad_output";
  }
  return "?";
}

void count_quantization(const Tensor& x, const Quantized& q, DType dt, QuantizationStats& stats) {
  Tensor rows = as_rows(x).to(kCPU);
  const int64_t r = rows.size(0), k = q.data.size(1);
  if (rows.size(1) != k) {  // MXFP8's zero padding, which counts as neither saturated nor flushed
    Tensor padded = zeros({r, k}, kFloat32);
    padded.narrow(1, 0, rows.size(1)).copy_(rows);
    rows = padded;
  }
  // The factor each value was multiplied by before the cast, per row and per block.
  Tensor factor = q.scale.to(kCPU).to(kFloat32);
  if (q.scaling == Scaling::kMXFP8)
    factor = tc::reciprocal(factor).unsqueeze(2).expand({r, k / kMXBlock, kMXBlock}).reshape({r, k});
  const Tensor scaled = (rows * factor).contiguous();
  const Tensor codes = q.data.to(kCPU).to(kFloat32).contiguous();
  const auto* xv = static_cast<const float*>(rows.raw_data());
  const auto* sv = static_cast<const float*>(scaled.raw_data());
  const auto* cv = static_cast<const float*>(codes.raw_data());
  // Saturated: a finite value that rounding to nearest even would take past the largest
  // code, so the cast clamps it: above 464 in E4M3 (448 + half its last step of 32), from
  // 61440 in E5M2 (57344 + 4096, a tie that goes to the even 65536).
  const bool tie_overflows = dt == kFloat8_e5m2;
  const float past = tie_overflows ? 61440.0f : 464.0f;
  fp8_max(dt);  // refuses any other dtype
  const auto overflows = [past, tie_overflows](float v) {
    const float a = std::abs(v);
    return std::isfinite(a) && (a > past || (tie_overflows && a == past));
  };
  const int64_t n = rows.numel();
  int64_t saturated = 0, flushed = 0;
  float amax = stats.amax;
  for (int64_t i = 0; i < n; ++i) {
    amax = std::max(amax, std::abs(xv[i]));
    saturated += overflows(sv[i]);
    flushed += xv[i] != 0.0f && cv[i] == 0.0f;
  }
  const Tensor f = factor.contiguous();
  const auto* fv = static_cast<const float*>(f.raw_data());
  stats.quantizations += 1;
  stats.total += n - (k - x.size(-1)) * r;  // the padding is not the tensor's
  stats.saturated += saturated;
  stats.flushed += flushed;
  stats.amax = amax;
  if (f.numel() > 0) {
    const auto [lo, hi] = std::minmax_element(fv, fv + f.numel());
    stats.scale_min = *lo;
    stats.scale_max = *hi;
  }
}

ObserveGuard::ObserveGuard(bool enabled) : previous_(t_observing) { t_observing = enabled; }

ObserveGuard::~ObserveGuard() { t_observing = previous_; }

bool observing() { return t_observing; }

AutocastGuard::AutocastGuard(const Recipe& recipe, bool enabled) : previous_(t_recipe) {
  if (enabled)
    t_recipe = recipe;
  else
    t_recipe.reset();
}

AutocastGuard::~AutocastGuard() { t_recipe = previous_; }

namespace {

// Quantizes for a GEMM as the recipe says; delayed scaling uses the role's scale and, when
// `record`, adds this amax to its history (`state` is null for the other recipes).
// `stats` (null unless observed) counts what the quantization did.
Quantized quantize_role(const Tensor& x, const Recipe& recipe, DType dt, LinearState* state, LinearState::Role role,
                        bool record, LinearStats* stats) {
  const bool delayed = recipe.scaling == Scaling::kDelayed;
  Quantized q = delayed ? quantize_with_scale(x, dt, state->scale_of(role))
                        : quantize(x, recipe.scaling, dt, recipe.power_of_two_scales);
  if (stats) count_quantization(x, q, dt, stats->roles[role]);
  if (delayed && record) state->update(role, amax_of(x), recipe, dt);
  return q;
}

struct LinearFunction : autograd::Function<LinearFunction> {
  static constexpr const char* name = "Fp8LinearBackward";

  static Tensor forward(autograd::AutogradContext* ctx, const Tensor& x, const Tensor& w, const Tensor& b,
                        const Recipe& recipe, LinearState* state, DType out_dtype, bool record,
                        const std::shared_ptr<LinearStats>& stats) {
    const Tensor x2 = x.reshape({-1, x.size(-1)});
    const Quantized xq =
        quantize_role(x2, recipe, recipe.forward_dtype, state, LinearState::kInput, record, stats.get());
    const Quantized wq =
        quantize_role(w, recipe, recipe.forward_dtype, state, LinearState::kWeight, record, stats.get());
    Tensor y = scaled_mm(xq, wq);
    if (b.defined()) y = y + b.to(kFloat32);
    // What backward needs of x and w, 8-bit where the recipe allows: a tensorwise operand is
    // transposed as it is; rowwise and MXFP8 ones are quantized along the other dimension.
    const bool by_tensor = recipe.scaling == Scaling::kTensorwise || recipe.scaling == Scaling::kDelayed;
    if (recipe.weight_grad_in_bf16)
      ctx->saved_data["x"] = x2.to(kBFloat16);
    else
      ctx->saved_data["xt"] =
          by_tensor ? xq.t() : quantize_columns(x2, recipe.scaling, recipe.forward_dtype, recipe.power_of_two_scales);
    if (by_tensor) ctx->saved_data["wt"] = wq.t();
    ctx->save_for_backward({w});
    ctx->saved_data["recipe"] = recipe;
    ctx->saved_data["state"] = state;
    ctx->saved_data["stats"] = stats;
    ctx->saved_data["x_sizes"] = Shape(x.sizes());
    ctx->saved_data["x_dtype"] = x.dtype();
    ctx->saved_data["has_bias"] = b.defined();
    Shape out = x.sizes();
    out.back() = w.size(0);
    return y.reshape(out).to(out_dtype);
  }

  static std::vector<Tensor> backward(autograd::AutogradContext* ctx, std::vector<Tensor> g) {
    const auto recipe = std::any_cast<Recipe>(ctx->saved_data["recipe"]);
    auto* state = std::any_cast<LinearState*>(ctx->saved_data["state"]);
    const auto stats = std::any_cast<std::shared_ptr<LinearStats>>(ctx->saved_data["stats"]);
    const auto x_sizes = std::any_cast<Shape>(ctx->saved_data["x_sizes"]);
    const auto x_dtype = std::any_cast<DType>(ctx->saved_data["x_dtype"]);
    const Tensor& w = ctx->get_saved_variables()[0];
    const Tensor gy = g[0].reshape({-1, g[0].size(-1)});
    const bool by_tensor = recipe.scaling == Scaling::kTensorwise || recipe.scaling == Scaling::kDelayed;
    const DType bdt = recipe.backward_dtype;
    // dx = gy w: gy (M, N) reduced along N with w^T (K, N).
    const Quantized gq = quantize_role(gy, recipe, bdt, state, LinearState::kGradOutput, true, stats.get());
    const Quantized wt = by_tensor
                             ? std::any_cast<Quantized>(ctx->saved_data["wt"])
                             : quantize_columns(w, recipe.scaling, recipe.forward_dtype, recipe.power_of_two_scales);
    Tensor dx, dw, db;
    if (ctx->needs_input_grad(0)) dx = scaled_mm(gq, wt).reshape(x_sizes).to(x_dtype);
    if (ctx->needs_input_grad(1)) {
      // dw = gy^T x: both reduced along M.
      if (recipe.weight_grad_in_bf16) {
        const Tensor x = std::any_cast<Tensor>(ctx->saved_data["x"]);
        dw = gy.to(kBFloat16).t().matmul(x).to(kFloat32);
      } else {
        const Quantized gt = by_tensor ? gq.t() : quantize_columns(gy, recipe.scaling, bdt, recipe.power_of_two_scales);
        dw = scaled_mm(gt, std::any_cast<Quantized>(ctx->saved_data["xt"]));
      }
      dw = dw.to(w.dtype());
    }
    if (ctx->needs_input_grad(2) && std::any_cast<bool>(ctx->saved_data["has_bias"]))
      db = gy.to(kFloat32).sum({0}).to(w.dtype());
    return {dx, dw, db};
  }
};

}  // namespace

Tensor linear(const Tensor& x, const Tensor& w, const Tensor& b, const Recipe& recipe, LinearState* state,
              std::shared_ptr<LinearStats> stats) {
  TC_CHECK(x.defined() && w.defined() && w.dim() == 2 && x.dim() >= 1 && x.size(-1) == w.size(1), kOp,
           "linear expects x (*, K) and w (N, K), got ", x.defined() ? shape_str(x.sizes()) : "undefined", " and ",
           w.defined() ? shape_str(w.sizes()) : "undefined");
  TC_CHECK(recipe.scaling != Scaling::kDelayed || state != nullptr, kOp,
           "delayed scaling needs the layer's LinearState (its amax histories)");
  // The output dtype a bf16/fp16 linear gives under CPU autocast, else x's.
  const DType out = amp::is_autocast_enabled(kCPU) ? amp::get_autocast_dtype(kCPU) : x.dtype();
  // Delayed scaling learns from training steps only: a forward without grad mode
  // (evaluation) uses the scales and leaves the histories as they are.
  const bool record = is_grad_enabled();
  amp::AutocastGuard off(kCPU, kBFloat16, false);  // the GEMMs are the recipe's, not autocast's
  if (!t_observing) stats.reset();
  return LinearFunction::apply(x, w, b, recipe, recipe.scaling == Scaling::kDelayed ? state : nullptr, out, record,
                               stats);
}

}  // namespace tc::fp8
