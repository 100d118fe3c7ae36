#include "common/testing.h"

#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <random>
#include <sstream>

namespace tc::testing {

Tol tol_for(DType dt, double ulps) {
  switch (dt) {
    case DType::Float64:
      return {1e-10, 1e-10};
    case DType::Float32:
      return {ulps * 0x1p-23 * 4, ulps * 0x1p-23 * 4};  // float32 math inside
    case DType::BFloat16:
      return {ulps * 0x1p-8, ulps * 0x1p-8};
    case DType::Float16:
      return {ulps * 0x1p-11, ulps * 0x1p-11};
    default:
      return {0, 0};
  }
}

Tensor uniform(const Shape& shape, DType dt, double lo, double hi, uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  int64_t n = 1;
  for (auto s : shape) n *= s;
  std::vector<double> v(static_cast<size_t>(n));
  for (auto& x : v) x = dist(gen);
  // Built 1-d then reshaped: tensor() reads an empty shape as "1-d", but {} here means 0-d.
  return tensor(v, {n}, kFloat64).reshape(shape).to(dt);
}

std::vector<int64_t> random_targets(int64_t n, int64_t classes, int64_t ignore, uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::vector<int64_t> t(static_cast<size_t>(n));
  for (auto& v : t) v = static_cast<int64_t>(gen() % classes);
  if (n > 2) t[1] = ignore;  // always exercise ignore_index
  return t;
}

namespace {
bool matches(double a, double e, Tol tol) {
  if (std::isnan(e)) return std::isnan(a);
  if (std::isinf(e)) return a == e;
  return std::fabs(a - e) <= tol.atol + tol.rtol * std::fabs(e);
}
}  // namespace

::testing::AssertionResult all_close(const Tensor& actual, const std::vector<double>& expected, Tol tol) {
  if (!actual.defined()) return ::testing::AssertionFailure() << "tensor is undefined";
  std::vector<double> a = actual.to_vector();
  if (a.size() != expected.size())
    return ::testing::AssertionFailure() << "size " << a.size() << " != expected " << expected.size();
  int bad = 0;
  std::ostringstream os;
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!matches(a[i], expected[i], tol)) {
      if (bad < 8) os << "\n  [" << i << "] got " << a[i] << ", expected " << expected[i];
      worst = std::max(worst, std::fabs(a[i] - expected[i]));
      ++bad;
    }
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << bad << " of " << a.size() << " elements differ (dtype "
                                       << dtype_name(actual.dtype()) << ", atol " << tol.atol << ", rtol " << tol.rtol
                                       << ", worst abs error " << worst << "):" << os.str();
}

::testing::AssertionResult all_close(const Tensor& actual, const Tensor& expected, Tol tol) {
  if (actual.sizes() != expected.sizes())
    return ::testing::AssertionFailure() << "shape " << shape_str(actual.sizes()) << " != expected "
                                         << shape_str(expected.sizes());
  return all_close(actual, expected.to_vector(), tol);
}

::testing::AssertionResult equal(const Tensor& actual, const Tensor& expected) {
  if (actual.sizes() != expected.sizes())
    return ::testing::AssertionFailure() << "shape " << shape_str(actual.sizes()) << " != expected "
                                         << shape_str(expected.sizes());
  return all_close(actual, expected.to_vector(), {0, 0});
}

std::vector<double> map_ref(const Tensor& x, const std::function<double(double)>& f) {
  std::vector<double> v = x.to_vector();
  for (auto& e : v) e = f(e);
  return v;
}

namespace {

// gradcheck; `undefined_is_zero`: an input that backward gives no gradient is compared as
// zeros (gradgradcheck, where a structurally zero second derivative is left undefined).
::testing::AssertionResult check_gradient(const Fn& f, const std::vector<Tensor>& inputs, Tol tol, double eps,
                                          bool undefined_is_zero) {
  // Analytic: backward of sum(f(x) * w) in the inputs' own dtypes.
  std::vector<Tensor> xs;
  for (const Tensor& t : inputs) {
    Tensor c = t.detach().clone();
    if (t.requires_grad()) c.requires_grad_(true);
    xs.push_back(c);
  }
  Tensor out = f(xs);
  if (!out.requires_grad()) return ::testing::AssertionFailure() << "output does not require grad";
  // Weights exactly representable in the output dtype, so both sides use the same ones.
  const DType wdt = is_floating(out.dtype()) ? out.dtype() : kFloat64;
  const Device dev = out.device();
  Tensor w = uniform(out.sizes(), wdt, 0.5, 1.5, 1234).to(dev);
  Tensor w64 = w.to(kFloat64);
  out.backward(w);

  // Numerical: central differences in float64 on the same values, perturbed in host copies
  // and evaluated on the inputs' devices (a CUDA op is differentiated on the GPU).
  std::vector<Tensor> x64;
  for (const Tensor& t : inputs) x64.push_back(t.detach().to(Device(kCPU)).to(kFloat64).contiguous().clone());
  auto loss = [&]() {
    NoGradGuard ng;
    std::vector<Tensor> in;
    for (size_t k = 0; k < x64.size(); ++k)
      in.push_back(inputs[k].device().is_cpu() ? x64[k] : x64[k].to(inputs[k].device()));
    return sum(mul(f(in).to(kFloat64), w64)).item<double>();
  };
  for (size_t k = 0; k < inputs.size(); ++k) {
    if (!inputs[k].requires_grad()) continue;
    Tensor& x = x64[k];
    double* p = x.data_ptr<double>();
    std::vector<double> num(static_cast<size_t>(x.numel()));
    double scale = 1.0;
    for (int64_t i = 0; i < x.numel(); ++i) {
      const double orig = p[i];
      const double h = eps * std::max(1.0, std::fabs(orig));
      p[i] = orig + h;
      const double lp = loss();
      p[i] = orig - h;
      const double lm = loss();
      p[i] = orig;
      num[i] = (lp - lm) / (2 * h);
      scale = std::max(scale, std::fabs(num[i]));
    }
    const Tensor g = xs[k].grad().defined() || !undefined_is_zero ? xs[k].grad() : zeros_like(inputs[k]);
    if (!g.defined()) return ::testing::AssertionFailure() << "input " << k << " got no gradient";
    if (g.dtype() != inputs[k].dtype())
      return ::testing::AssertionFailure() << "input " << k << " gradient has dtype " << dtype_name(g.dtype())
                                           << ", expected " << dtype_name(inputs[k].dtype());
    auto r = all_close(g, num, {tol.atol * scale, tol.rtol});
    if (!r) return ::testing::AssertionFailure() << "gradient of input " << k << ": " << r.message();
  }
  return ::testing::AssertionSuccess();
}

// Sets grad mode for a scope (gradcheck's numerical pass runs f under NoGradGuard).
struct GradEnabled {
  bool prev = is_grad_enabled();
  GradEnabled() { set_grad_enabled(true); }
  ~GradEnabled() { set_grad_enabled(prev); }
  GradEnabled(const GradEnabled&) = delete;
  GradEnabled& operator=(const GradEnabled&) = delete;
};

}  // namespace

::testing::AssertionResult gradcheck(const Fn& f, const std::vector<Tensor>& inputs, Tol tol, double eps) {
  return check_gradient(f, inputs, tol, eps, false);
}

::testing::AssertionResult gradgradcheck(const Fn& f, const std::vector<Tensor>& inputs, Tol tol, double eps) {
  std::vector<size_t> wrt;
  std::vector<Tensor> plain;
  for (size_t k = 0; k < inputs.size(); ++k) {
    if (inputs[k].requires_grad()) wrt.push_back(k);
    plain.push_back(inputs[k].defined() ? inputs[k].detach() : inputs[k]);
  }
  Tensor y;
  {
    NoGradGuard shape_only;
    y = f(plain);
  }
  const Device dev = y.device();
  std::vector<Tensor> v;
  for (size_t i = 0; i < wrt.size(); ++i)
    v.push_back(uniform(inputs[wrt[i]].sizes(), inputs[wrt[i]].dtype(), 0.5, 1.5, 77 + i).to(dev));
  // The last input is the incoming gradient w.
  const Fn first = [&](const std::vector<Tensor>& xw) {
    const GradEnabled on;
    std::vector<Tensor> xs(xw.begin(), xw.end() - 1), at;
    for (size_t k : wrt) {
      if (!xs[k].requires_grad()) xs[k] = xs[k].detach().requires_grad_();  // the numerical pass
      at.push_back(xs[k]);
    }
    const std::vector<Tensor> gs =
        autograd::grad({f(xs)}, at, {xw.back()}, /*retain_graph=*/true, /*create_graph=*/true, /*allow_unused=*/true);
    Tensor total = zeros({}, TensorOptions(kFloat64).device(dev));
    for (size_t i = 0; i < gs.size(); ++i)
      if (gs[i].defined()) total = add(total, sum(mul(gs[i].to(kFloat64), v[i].to(kFloat64))));
    return total;
  };
  std::vector<Tensor> xw = inputs;
  xw.push_back(uniform(y.sizes(), y.dtype(), 0.5, 1.5, 4321).to(dev).requires_grad_());
  return check_gradient(first, xw, tol, eps, true);
}

::testing::AssertionResult bits_equal(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.sizes() != b.sizes())
    return ::testing::AssertionFailure() << "dtype/shape differ: " << dtype_name(a.dtype()) << shape_str(a.sizes())
                                         << " vs " << dtype_name(b.dtype()) << shape_str(b.sizes());
  const Tensor ca = a.contiguous(), cb = b.contiguous();
  if (std::memcmp(ca.raw_data(), cb.raw_data(), ca.nbytes()) != 0)
    return ::testing::AssertionFailure() << "bits differ";
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult dicts_equal(const StateDict& a, const StateDict& b) {
  if (a.size() != b.size()) return ::testing::AssertionFailure() << a.size() << " vs " << b.size() << " entries";
  for (const auto& [k, t] : a) {
    auto it = b.find(k);
    if (it == b.end()) return ::testing::AssertionFailure() << "missing " << k;
    auto r = bits_equal(t, it->second);
    if (!r) return r << " at " << k;
  }
  return ::testing::AssertionSuccess();
}

Tensor make_param(const Shape& shape, DType dt, uint64_t seed) {
  Tensor p = uniform(shape, dt, -1.0, 1.0, seed);
  p.requires_grad_(true);
  return p;
}

Tensor grad_for(uint64_t seed_base, const Tensor& p, int step, int which) {
  return uniform(p.sizes(), p.dtype(), -1.0, 1.0, seed_base + 37 * step + which);
}

TempDir::TempDir(const std::string& prefix) {
  static std::atomic<int> counter{0};
  path = std::filesystem::temp_directory_path() /
         ("tc_" + prefix + "_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
  std::filesystem::remove_all(path);
  std::filesystem::create_directories(path);
}

TempDir::~TempDir() {
  std::error_code ec;  // never throw from a destructor
  std::filesystem::remove_all(path, ec);
}

RunResult run_with_resume(const MakeOptimizer& make, std::vector<Tensor> params, uint64_t seed_base, int steps,
                          int split) {
  auto opt = make(params);
  for (int s = 0; s < steps; ++s) {
    if (s == split) {
      const StateDict sd = opt->state_dict();
      std::vector<Tensor> copies;
      for (auto& p : params) copies.push_back(p.detach().clone().requires_grad_(true));
      params = copies;
      opt = make(params);
      opt->load_state_dict(sd);
    }
    for (size_t k = 0; k < params.size(); ++k)
      if (!(k == 2 && s < 2)) params[k].set_grad(grad_for(seed_base, params[k], s, static_cast<int>(k)));
    opt->step();
  }
  return {params, opt->state_dict()};
}

std::string read_file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

}  // namespace tc::testing
