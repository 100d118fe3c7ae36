// The tensor factories that fill their tensor through kernels (full/zeros/ones, arange,
// rand/randn/randint/randperm, the *_like forms, tensor(), scalar_tensor) and the
// generator's state as a tensor. empty, empty_like and from_blob are core's
// (core/factories.cpp); the generator itself is core/random.cpp.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <locale>
#include <sstream>

#include "backend/cpu/loops/elementwise.h"
#include "backend/kernels.h"
#include "core/random.h"
#include "core/tensor_impl.h"
#include "tensorcast/ops.h"

namespace tc {

// The state travels as the engine's standard text form (the 312 words of the
// mt19937_64 state in decimal, which the C++ standard fixes), so a checkpoint written on
// one platform resumes the same draws on any other. The classic locale keeps digits plain.
Tensor get_rng_state() {
  Generator& g = default_generator();
  std::ostringstream os;
  os.imbue(std::locale::classic());
  {
    std::lock_guard<std::mutex> lock(g.mutex);
    os << g.engine;
  }
  const std::string text = os.str();
  Tensor t = make_tensor({static_cast<int64_t>(text.size())}, kUInt8, Device{});
  std::memcpy(t.raw_data(), text.data(), text.size());
  return t;
}

void set_rng_state(const Tensor& state) {
  TC_CHECK(state.defined() && state.dtype() == kUInt8 && state.dim() == 1, "rng",
           "set_rng_state expects a 1-d uint8 tensor from get_rng_state");
  TC_CHECK(state.numel() <= (1 << 16), "rng", "state of ", state.numel(), " bytes is too long");
  const Tensor c = state.to(Device{}).contiguous();
  const std::string text(static_cast<const char*>(c.raw_data()), static_cast<size_t>(c.numel()));
  const bool plain =
      std::all_of(text.begin(), text.end(), [](char ch) { return (ch >= '0' && ch <= '9') || ch == ' '; });
  std::istringstream is(text);
  is.imbue(std::locale::classic());
  std::mt19937_64 engine;
  is >> engine;
  TC_CHECK(plain && !is.fail() && (is >> std::ws).eof(), "rng", "not a generator state (", text.size(), " bytes)");
  Generator& g = default_generator();
  std::lock_guard<std::mutex> lock(g.mutex);
  g.engine = engine;
}

namespace {

Tensor finish(Tensor t, const TensorOptions& o) {
  if (o.requires_grad()) t.requires_grad_(true);
  return t;
}

// Fills t (contiguous) from doubles made by gen(i), sequentially so results depend on
// the seed only, never on the thread count.
template <class Gen>
Tensor fill_generated(Tensor t, Gen gen) {
  const int64_t n = t.numel();
  std::vector<double> vals(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) vals[i] = gen(i);
  const Tensor host = from_blob(vals.data(), t.sizes(), kFloat64);
  // The same draws on every device, converted there by the same rules.
  backend::kernels_for(t.device()).copy_into(t, host.to(t.device()));
  return t;
}

}  // namespace

Tensor full(const Shape& size, double value, TensorOptions o) {
  Tensor t = make_tensor(size, o.dtype(), o.device());
  t.fill_(value);
  t.impl()->storage->version = 0;  // a new tensor, not an in-place write (torch.zeros(2)._version == 0)
  return finish(t, o);
}
Tensor zeros(const Shape& size, TensorOptions o) { return full(size, 0.0, o); }
Tensor ones(const Shape& size, TensorOptions o) { return full(size, 1.0, o); }

Tensor arange(double end, TensorOptions o) { return arange(0.0, end, 1.0, o); }
Tensor arange(double start, double end, double step, TensorOptions o) {
  TC_CHECK(step != 0, "arange", "step must be nonzero");
  TC_CHECK(std::isfinite(start) && std::isfinite(end), "arange", "unsupported range: ", start, " -> ", end);
  TC_CHECK((end - start) / step >= 0, "arange", "upper bound and larger bound inconsistent with step sign");
  const auto n = static_cast<int64_t>(std::ceil((end - start) / step));
  return finish(fill_generated(make_tensor({n}, o.dtype(), o.device()),
                               [&](int64_t i) { return start + static_cast<double>(i) * step; }),
                o);
}

Tensor rand(const Shape& size, TensorOptions o) {
  TC_CHECK(is_floating(o.dtype()), "rand", "expected a floating dtype, got ", dtype_name(o.dtype()));
  Generator& g = default_generator();
  std::lock_guard<std::mutex> lock(g.mutex);
  Tensor t = fill_generated(make_tensor(size, o.dtype(), o.device()), [&](int64_t) { return g.uniform(); });
  if (o.dtype() != kFloat64) {  // rounding a draw near 1 to float or 16 bits may give 1.0; keep [0, 1)
    t = where(ge(t, 1.0), zeros({}, TensorOptions(o.dtype()).device(o.device())), t);
  }
  return finish(t, o);
}

Tensor randn(const Shape& size, TensorOptions o) {
  TC_CHECK(is_floating(o.dtype()), "randn", "expected a floating dtype, got ", dtype_name(o.dtype()));
  Generator& g = default_generator();
  std::lock_guard<std::mutex> lock(g.mutex);
  double spare = 0;
  bool has_spare = false;
  Tensor t = fill_generated(make_tensor(size, o.dtype(), o.device()), [&](int64_t) {
    if (has_spare) {
      has_spare = false;
      return spare;
    }
    // Box-Muller: two normals from two uniforms (u1 in (0, 1] so log is finite).
    const double u1 = 1.0 - g.uniform(), u2 = g.uniform();
    const double r = std::sqrt(-2.0 * std::log(u1));
    spare = r * std::sin(2.0 * M_PI * u2);
    has_spare = true;
    return r * std::cos(2.0 * M_PI * u2);
  });
  return finish(t, o);
}

Tensor randint(int64_t low, int64_t high, const Shape& size, TensorOptions o) {
  TC_CHECK(low < high, "randint", "expected low < high, got low=", low, ", high=", high);
  Generator& g = default_generator();
  std::lock_guard<std::mutex> lock(g.mutex);
  const auto range = static_cast<uint64_t>(high - low);
  Tensor t = make_tensor(size, kInt64);  // drawn on the host, then moved: the CPU's values on any device
  int64_t* p = t.data_ptr<int64_t>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = low + static_cast<int64_t>(g.engine() % range);
  return finish((o.dtype() == kInt64 ? t : t.to(o.dtype())).to(o.device()), o);
}

Tensor randperm(int64_t n, TensorOptions o) {
  TC_CHECK(n >= 0, "randperm", "n must be non-negative, got ", n);
  Generator& g = default_generator();
  std::lock_guard<std::mutex> lock(g.mutex);
  Tensor t = make_tensor({n}, kInt64);  // drawn on the host, then moved
  int64_t* p = t.data_ptr<int64_t>();
  for (int64_t i = 0; i < n; ++i) p[i] = i;
  for (int64_t i = n - 1; i > 0; --i)  // Fisher-Yates
    std::swap(p[i], p[static_cast<int64_t>(g.engine() % static_cast<uint64_t>(i + 1))]);
  return finish((o.dtype() == kInt64 ? t : t.to(o.dtype())).to(o.device()), o);
}

Tensor zeros_like(const Tensor& t) { return zeros(t.sizes(), TensorOptions(t.dtype()).device(t.device())); }
Tensor ones_like(const Tensor& t) { return ones(t.sizes(), TensorOptions(t.dtype()).device(t.device())); }
Tensor full_like(const Tensor& t, double v) { return full(t.sizes(), v, TensorOptions(t.dtype()).device(t.device())); }
Tensor rand_like(const Tensor& t) { return rand(t.sizes(), TensorOptions(t.dtype()).device(t.device())); }
Tensor randn_like(const Tensor& t) { return randn(t.sizes(), TensorOptions(t.dtype()).device(t.device())); }

template <class T>
Tensor tensor(const std::vector<T>& values, const Shape& size, std::optional<DType> dtype) {
  const Shape shape = size.empty() ? Shape{static_cast<int64_t>(values.size())} : size;
  TC_CHECK(shape_numel(shape) == static_cast<int64_t>(values.size()), "tensor", "shape ", shape_str(shape), " needs ",
           shape_numel(shape), " values, got ", values.size());
  Tensor t = make_tensor(shape, dtype.value_or(dtype_of<T>));
  if constexpr (std::is_same_v<T, bool>) {
    std::vector<uint8_t> bytes(values.begin(), values.end());
    cpu::copy_into(t, from_blob(bytes.data(), shape, kBool));
  } else {
    cpu::copy_into(t, from_blob(const_cast<T*>(values.data()), shape, dtype_of<T>));
  }
  return t;
}
template Tensor tensor<float>(const std::vector<float>&, const Shape&, std::optional<DType>);
template Tensor tensor<double>(const std::vector<double>&, const Shape&, std::optional<DType>);
template Tensor tensor<int64_t>(const std::vector<int64_t>&, const Shape&, std::optional<DType>);
template Tensor tensor<int32_t>(const std::vector<int32_t>&, const Shape&, std::optional<DType>);
template Tensor tensor<uint8_t>(const std::vector<uint8_t>&, const Shape&, std::optional<DType>);
template Tensor tensor<bool>(const std::vector<bool>&, const Shape&, std::optional<DType>);
template Tensor tensor<BFloat16>(const std::vector<BFloat16>&, const Shape&, std::optional<DType>);
template Tensor tensor<Half>(const std::vector<Half>&, const Shape&, std::optional<DType>);

Tensor tensor(std::initializer_list<double> values, TensorOptions o) {
  return finish(tensor(std::vector<double>(values), {}, o.dtype()).to(o.device()), o);
}

Tensor scalar_tensor(double value, TensorOptions o) { return full({}, value, o); }

}  // namespace tc
