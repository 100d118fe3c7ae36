// The op database (see op_db.h): the registry and the elementwise and reduction
// families; op_db_nn.cpp has the rest, op_db_helpers.h the shared sample makers.
// References are plain loops over the float64 values of the inputs (Tensor::to_vector,
// row-major in the logical shape); none of them calls the op under test. Those the
// hand-written tests use too are in common/references.h.
#include "common/op_db.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <utility>

#include "common/op_db_helpers.h"

namespace tc::testing {

bool Sample::noncontiguous() const {
  for (const Tensor& t : inputs)
    if (t.defined() && !t.is_contiguous()) return true;
  return false;
}

double accumulation_roundoff(DType dt) { return dt == kFloat64 ? 0x1p-53 : 0x1p-24; }

Tol OpInfo::forward_tolerance(DType dt) const {
  auto it = fwd_tol.find(dt);
  return it != fwd_tol.end() ? it->second : tol_for(dt, 4);
}

Tol OpInfo::gradcheck_tolerance(DType dt) const {
  auto it = grad_tol.find(dt);
  if (it != grad_tol.end()) return it->second;
  // float64: central differences with h = 1e-6 carry ~1e-10 relative rounding noise.
  return dt == kFloat64 ? Tol{1e-7, 1e-7} : tol_for(dt, 8);
}

namespace db {
namespace {

// ------------------------------------------------------------------ unary and binary families

struct UnaryFn {
  std::string desc;
  std::function<Tensor(const Tensor&)> op;
  std::function<double(double)> ref;
  double lo, hi;  // input range (away from poles and kinks)
  // false: the call is a composite whose autocast behaviour is another op's ("3 / x" is
  // mul(reciprocal(x), 3), as PyTorch's __rtruediv__, so it follows reciprocal's fp32).
  bool autocast = true;
};

std::vector<Sample> unary_samples(DType dt, const std::vector<UnaryFn>& fns) {
  std::vector<Sample> out;
  uint64_t seed = 100;
  for (const UnaryFn& f : fns) {
    auto add = [&](const std::string& layout, const Tensor& x, bool grad = true) {
      Sample s = make(
          f.desc + " " + layout, {x}, [op = f.op](const Ts& in) { return Ts{op(in[0])}; },
          [ref = f.ref](const Ts& in) {
            std::vector<double> v = in[0].to_vector();
            for (double& e : v) e = ref(e);
            return Refs{{in[0].sizes(), v}};
          });
      s.gradcheck = grad;
      s.autocast = f.autocast;
      out.push_back(std::move(s));
    };
    add("contiguous", U({4, 5}, dt, f.lo, f.hi, ++seed));
    add("long rows", U({5, 37}, dt, f.lo, f.hi, ++seed), false);  // vector body and tail
    add("transposed", Ut({4, 5}, dt, f.lo, f.hi, ++seed));
    add("sliced", U({6, 10}, dt, f.lo, f.hi, ++seed).slice(1, 1, 10, 3).slice(0, 0, 6, 2));
    add("expanded", U({3, 1}, dt, f.lo, f.hi, ++seed).expand({2, 3, 4}));
    add("expanded long rows", U({3, 1}, dt, f.lo, f.hi, ++seed).expand({2, 3, 300}), false);
    add("0-d", U({}, dt, f.lo, f.hi, ++seed));
    add("empty", U({0, 3}, dt, f.lo, f.hi, ++seed));
  }
  return out;
}

struct BinaryFn {
  std::string desc;
  std::function<Tensor(const Tensor&, const Tensor&)> op;
  std::function<double(double, double)> ref;
  double alo, ahi, blo, bhi;
};

std::vector<Sample> binary_samples(DType dt, const std::vector<BinaryFn>& fns) {
  std::vector<Sample> out;
  uint64_t seed = 200;
  for (const BinaryFn& f : fns) {
    auto add = [&](const std::string& layout, const Tensor& a, const Tensor& b) {
      out.push_back(make(
          f.desc + " " + layout, {a, b}, [op = f.op](const Ts& in) { return Ts{op(in[0], in[1])}; },
          [ref = f.ref](const Ts& in) {
            const Shape s = broadcast_shapes(in[0].sizes(), in[1].sizes());
            const std::vector<double> av = broadcast_values(in[0], s), bv = broadcast_values(in[1], s);
            std::vector<double> r(av.size());
            for (size_t i = 0; i < r.size(); ++i) r[i] = ref(av[i], bv[i]);
            return Refs{{s, r}};
          }));
    };
    const std::vector<std::pair<Shape, Shape>> patterns = {
        {{4, 5}, {4, 5}},    {{3, 1}, {1, 4}}, {{2, 3, 4}, {4}}, {{}, {2, 3}},  {{2, 3}, {}},
        {{4, 1, 3}, {2, 1}}, {{1}, {6}},       {{}, {}},         {{0, 3}, {3}}, {{2, 0, 3}, {1, 3}}};
    for (const auto& [sa, sb] : patterns) {
      add(shape_str(sa) + " x " + shape_str(sb), U(sa, dt, f.alo, f.ahi, seed + 1), U(sb, dt, f.blo, f.bhi, seed + 2));
      seed += 2;
    }
    // The vector body and tail of the kernels.
    add("(5, 37) x (5, 37)", U({5, 37}, dt, f.alo, f.ahi, seed + 1), U({5, 37}, dt, f.blo, f.bhi, seed + 2));
    seed += 2;
    out.back().gradcheck = false;
    add("transposed x strided", Ut({5, 6}, dt, f.alo, f.ahi, seed + 1), Us({5, 6}, dt, f.blo, f.bhi, seed + 2));
    seed += 2;
    add("expanded x transposed", U({5, 1}, dt, f.alo, f.ahi, seed + 1).expand({5, 6}),
        Ut({5, 6}, dt, f.blo, f.bhi, seed + 2));
    seed += 2;
  }
  return out;
}

double sigmoid_ref(double x) { return 1 / (1 + std::exp(-x)); }
double gelu_ref(double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }
double gelu_tanh_ref(double x) { return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x))); }

void add_elementwise(std::vector<OpInfo>& db) {
  using UF = std::vector<UnaryFn>;
  auto unary = [&](const std::string& name, const std::string& variant, CastPolicy p, UF fns) {
    db.push_back(entry(name, variant, p, {0}, [fns](DType dt) { return unary_samples(dt, fns); }));
  };
  const auto P = CastPolicy::Passthrough;
  const auto F = CastPolicy::Fp32;
  unary("neg", "", P,
        {{"neg", [](const Tensor& x) { return neg(x); }, [](double x) { return -x; }, -2, 2},
         {"operator-", [](const Tensor& x) { return -x; }, [](double x) { return -x; }, -2, 2}});
  unary("abs", "", P, {{"abs", [](const Tensor& x) { return abs(x); }, [](double x) { return std::fabs(x); }, -2, 2}});
  unary("exp", "", F, {{"exp", [](const Tensor& x) { return exp(x); }, [](double x) { return std::exp(x); }, -2, 2}});
  unary("log", "", F, {{"log", [](const Tensor& x) { return log(x); }, [](double x) { return std::log(x); }, 0.1, 4}});
  unary("log1p", "", F,
        {{"log1p", [](const Tensor& x) { return log1p(x); }, [](double x) { return std::log1p(x); }, -0.5, 3}});
  unary("sqrt", "", P,
        {{"sqrt", [](const Tensor& x) { return sqrt(x); }, [](double x) { return std::sqrt(x); }, 0.05, 4}});
  unary("rsqrt", "", F,
        {{"rsqrt", [](const Tensor& x) { return rsqrt(x); }, [](double x) { return 1 / std::sqrt(x); }, 0.1, 4}});
  unary("reciprocal", "", F,
        {{"positive", [](const Tensor& x) { return reciprocal(x); }, [](double x) { return 1 / x; }, 0.25, 4},
         {"negative", [](const Tensor& x) { return reciprocal(x); }, [](double x) { return 1 / x; }, -4, -0.25}});
  unary("tanh", "", P,
        {{"tanh", [](const Tensor& x) { return tanh(x); }, [](double x) { return std::tanh(x); }, -3, 3}});
  unary("sigmoid", "", P, {{"sigmoid", [](const Tensor& x) { return sigmoid(x); }, sigmoid_ref, -6, 6}});
  unary("relu", "", P,
        {{"relu", [](const Tensor& x) { return relu(x); }, [](double x) { return x > 0 ? x : 0.0; }, -2, 2}});
  unary("gelu", "", P,
        {{"none", [](const Tensor& x) { return gelu(x); }, gelu_ref, -3, 3},
         {"tanh", [](const Tensor& x) { return gelu(x, "tanh"); }, gelu_tanh_ref, -3, 3}});
  unary("silu", "", P,
        {{"silu", [](const Tensor& x) { return silu(x); }, [](double x) { return x * sigmoid_ref(x); }, -4, 4}});
  // (1 / beta) log(1 + exp(beta x)), x itself where beta x > threshold. The second
  // threshold puts the switch at x = 1.55, which no 16-bit input sits on.
  unary("softplus", "", F,
        {{"default", [](const Tensor& x) { return softplus(x); }, [](double x) { return std::log1p(std::exp(x)); }, -4,
          4},
         {"beta 2 threshold 3.1", [](const Tensor& x) { return softplus(x, 2.0, 3.1); },
          [](double x) { return 2 * x > 3.1 ? x : std::log1p(std::exp(2 * x)) / 2; }, -3, 3}});
  // Bounds that are not representable in a 16-bit dtype: no input sits on a kink.
  unary("clamp", "", P,
        {{"min and max", [](const Tensor& x) { return clamp(x, -0.55, 0.7); },
          [](double x) { return std::min(std::max(x, -0.55), 0.7); }, -2, 2},
         {"min only", [](const Tensor& x) { return clamp(x, 0.3, std::nullopt); },
          [](double x) { return std::max(x, 0.3); }, -2, 2},
         {"max only", [](const Tensor& x) { return clamp(x, std::nullopt, -0.3); },
          [](double x) { return std::min(x, -0.3); }, -2, 2}});
  unary("pow", "scalar", F,
        {{"^2", [](const Tensor& x) { return pow(x, 2.0); }, [](double x) { return x * x; }, -2, 2},
         {"^3", [](const Tensor& x) { return pow(x, 3.0); }, [](double x) { return x * x * x; }, -2, 2},
         {"^0.5", [](const Tensor& x) { return pow(x, 0.5); }, [](double x) { return std::sqrt(x); }, 0.1, 4},
         {"^-1.5", [](const Tensor& x) { return pow(x, -1.5); }, [](double x) { return std::pow(x, -1.5); }, 0.5, 3},
         {"^1", [](const Tensor& x) { return pow(x, 1.0); }, [](double x) { return x; }, -2, 2},
         {"^0", [](const Tensor& x) { return pow(x, 0.0); }, [](double) { return 1.0; }, -2, 2}});
  unary("add", "scalar", P,
        {{"add(x, 1.5)", [](const Tensor& x) { return add(x, 1.5); }, [](double x) { return x + 1.5; }, -2, 2},
         {"x + 2", [](const Tensor& x) { return x + 2.0; }, [](double x) { return x + 2; }, -2, 2},
         {"2 + x", [](const Tensor& x) { return 2.0 + x; }, [](double x) { return 2 + x; }, -2, 2}});
  unary("sub", "scalar", P,
        {{"sub(x, 0.75)", [](const Tensor& x) { return sub(x, 0.75); }, [](double x) { return x - 0.75; }, -2, 2},
         {"x - 2", [](const Tensor& x) { return x - 2.0; }, [](double x) { return x - 2; }, -2, 2},
         {"2 - x", [](const Tensor& x) { return 2.0 - x; }, [](double x) { return 2 - x; }, -2, 2}});
  unary("mul", "scalar", P,
        {{"mul(x, -3)", [](const Tensor& x) { return mul(x, -3.0); }, [](double x) { return -3 * x; }, -2, 2},
         {"x * 0.5", [](const Tensor& x) { return x * 0.5; }, [](double x) { return x * 0.5; }, -2, 2},
         {"0.5 * x", [](const Tensor& x) { return 0.5 * x; }, [](double x) { return 0.5 * x; }, -2, 2}});
  unary("div", "scalar", P,
        {{"div(x, 4)", [](const Tensor& x) { return div(x, 4.0); }, [](double x) { return x / 4; }, -2, 2},
         {"x / 8", [](const Tensor& x) { return x / 8.0; }, [](double x) { return x / 8; }, -2, 2},
         {"3 / x", [](const Tensor& x) { return 3.0 / x; }, [](double x) { return 3 / x; }, 0.5, 4, false}});

  using BF = std::vector<BinaryFn>;
  auto binary = [&](const std::string& name, CastPolicy p, BF fns) {
    db.push_back(entry(name, "", p, {0, 1}, [fns](DType dt) { return binary_samples(dt, fns); }));
  };
  using T = const Tensor&;
  binary("add", P,
         {{"add", [](T a, T b) { return add(a, b); }, [](double a, double b) { return a + b; }, -2, 2, -2, 2},
          {"alpha 0.5", [](T a, T b) { return add(a, b, 0.5); }, [](double a, double b) { return a + 0.5 * b; }, -2, 2,
           -2, 2},
          {"a + b", [](T a, T b) { return a + b; }, [](double a, double b) { return a + b; }, -2, 2, -2, 2}});
  binary(
      "sub", P,
      {{"sub", [](T a, T b) { return sub(a, b); }, [](double a, double b) { return a - b; }, -2, 2, -2, 2},
       {"alpha 2", [](T a, T b) { return sub(a, b, 2.0); }, [](double a, double b) { return a - 2 * b; }, -2, 2, -2, 2},
       {"a - b", [](T a, T b) { return a - b; }, [](double a, double b) { return a - b; }, -2, 2, -2, 2}});
  binary("mul", P,
         {{"mul", [](T a, T b) { return mul(a, b); }, [](double a, double b) { return a * b; }, -2, 2, -2, 2},
          {"a * b", [](T a, T b) { return a * b; }, [](double a, double b) { return a * b; }, -2, 2, -2, 2}});
  binary("div", P,
         {{"div", [](T a, T b) { return div(a, b); }, [](double a, double b) { return a / b; }, -2, 2, 0.5, 2},
          {"a / b", [](T a, T b) { return a / b; }, [](double a, double b) { return a / b; }, -2, 2, -2, -0.5}});
  binary("pow", F,
         {{"pow", [](T a, T b) { return pow(a, b); }, [](double a, double b) { return std::pow(a, b); }, 0.5, 2, -1.5,
           1.5}});
  binary("maximum", P,
         {{"maximum", [](T a, T b) { return maximum(a, b); }, [](double a, double b) { return std::max(a, b); }, -2, 2,
           -2, 2}});
  binary("minimum", P,
         {{"minimum", [](T a, T b) { return minimum(a, b); }, [](double a, double b) { return std::min(a, b); }, -2, 2,
           -2, 2}});

  // where(condition, a, b): three-way broadcasting; the condition is not differentiable.
  db.push_back(entry("where", "", P, {1, 2}, [](DType dt) {
    std::vector<Sample> s;
    auto add = [&](const std::string& desc, const Tensor& c, const Tensor& a, const Tensor& b) {
      s.push_back(make(
          desc, {c, a, b}, [](const Ts& in) { return Ts{where(in[0], in[1], in[2])}; },
          [](const Ts& in) {
            const Shape sh = broadcast_shapes(broadcast_shapes(in[0].sizes(), in[1].sizes()), in[2].sizes());
            const auto cv = broadcast_values(in[0], sh), av = broadcast_values(in[1], sh),
                       bv = broadcast_values(in[2], sh);
            std::vector<double> r(cv.size());
            for (size_t i = 0; i < r.size(); ++i) r[i] = cv[i] != 0 ? av[i] : bv[i];
            return Refs{{sh, r}};
          }));
    };
    add("same shape", cond_of({3, 4}, 1), U({3, 4}, dt, -2, 2, 2), U({3, 4}, dt, -2, 2, 3));
    add("b broadcast", cond_of({3, 4}, 4), U({3, 4}, dt, -2, 2, 5), U({4}, dt, -2, 2, 6));
    add("all broadcast", cond_of({3, 1}, 7), U({1, 4}, dt, -2, 2, 8), U({2, 1, 1}, dt, -2, 2, 9));
    add("0-d a and b", cond_of({2, 3}, 10), U({}, dt, -2, 2, 11), U({}, dt, -2, 2, 12));
    add("0-d", cond_of({}, 13), U({}, dt, -2, 2, 14), U({}, dt, -2, 2, 15));
    add("transposed", cond_of({4, 3}, 16).t(), Ut({3, 4}, dt, -2, 2, 17), U({3, 4}, dt, -2, 2, 18));
    add("expanded", cond_of({1, 4}, 19).expand({3, 4}), U({3, 1}, dt, -2, 2, 20).expand({3, 4}),
        Us({3, 4}, dt, -2, 2, 21));
    add("empty", cond_of({0, 3}, 22), U({0, 3}, dt, -2, 2, 23), U({3}, dt, -2, 2, 24));
    return s;
  }));
}

// ------------------------------------------------------------------ reductions

struct Groups {
  Shape shape;                         // the result's shape
  std::vector<std::vector<double>> g;  // each result element's inputs, in index order
};

// The elements of x reduced into each result element; dims empty = all dims.
Groups reduce_groups(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  const Shape& s = x.sizes();
  const int64_t nd = x.dim();
  std::vector<bool> mask(static_cast<size_t>(nd), dims.empty());
  for (int64_t d : dims)
    if (nd > 0) mask[static_cast<size_t>((d % nd + nd) % nd)] = true;
  Groups r;
  for (int64_t d = 0; d < nd; ++d) {
    if (!mask[d]) {
      r.shape.push_back(s[d]);
    } else if (keepdim) {
      r.shape.push_back(1);
    }
  }
  r.g = ref::groups(x, mask);
  return r;
}

std::string dims_str(const std::vector<int64_t>& dims, bool keepdim) {
  std::string s = "dims (";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + ")" + (keepdim ? " keepdim" : "");
}

int64_t group_size(const Tensor& x, const std::vector<int64_t>& dims) {
  const auto g = reduce_groups(x, dims, false).g;
  return g.empty() ? 0 : static_cast<int64_t>(g[0].size());
}

// sum(x, dims, keepdim) or (full) sum(x).
Sample sum_sample(const std::string& desc, const Tensor& x, std::vector<int64_t> dims, bool keepdim, bool full) {
  const int64_t n = group_size(x, dims);
  return make(
      desc + " " + (full ? std::string("sum(x)") : dims_str(dims, keepdim)), {x},
      [=](const Ts& in) { return Ts{full ? sum(in[0]) : sum(in[0], dims, keepdim)}; },
      [=](const Ts& in) {
        Groups gr = reduce_groups(in[0], dims, keepdim);
        std::vector<double> r;
        for (const auto& g : gr.g) r.push_back(ref::sum(g));
        return Refs{{gr.shape, r}};
      },
      acc_of(n, max_abs(x)));
}

Sample mean_sample(const std::string& desc, const Tensor& x, std::vector<int64_t> dims, bool keepdim, bool full) {
  const int64_t n = group_size(x, dims);
  return make(
      desc + " " + (full ? std::string("mean(x)") : dims_str(dims, keepdim)), {x},
      [=](const Ts& in) { return Ts{full ? mean(in[0]) : mean(in[0], dims, keepdim)}; },
      [=](const Ts& in) {
        Groups gr = reduce_groups(in[0], dims, keepdim);
        std::vector<double> r;
        for (const auto& g : gr.g) r.push_back(ref::sum(g) / static_cast<double>(g.size()));
        return Refs{{gr.shape, r}};
      },
      n > 0 ? acc_of(n, max_abs(x)) / static_cast<double>(n) : 0.0);
}

Sample var_sample(const std::string& desc, const Tensor& x, std::vector<int64_t> dims, int64_t correction,
                  bool keepdim) {
  return make(
      desc + " " + dims_str(dims, keepdim) + " correction " + std::to_string(correction), {x},
      [=](const Ts& in) { return Ts{var(in[0], dims, correction, keepdim)}; },
      [=](const Ts& in) {
        Groups gr = reduce_groups(in[0], dims, keepdim);
        std::vector<double> r;
        for (const auto& g : gr.g) r.push_back(ref::var(g, correction));
        return Refs{{gr.shape, r}};
      });
}

// max(x) / min(x) over all elements.
Sample extreme_all_sample(const std::string& desc, const Tensor& x, bool is_max) {
  return make(
      desc, {x}, [=](const Ts& in) { return Ts{is_max ? max(in[0]) : min(in[0])}; },
      [=](const Ts& in) {
        return Refs{{{}, {ref::extreme(reduce_groups(in[0], {}, false).g[0], is_max).first}}};
      });
}

// max(x, dim) / min(x, dim): (values, indices).
Sample extreme_dim_sample(const std::string& desc, const Tensor& x, int64_t dim, bool keepdim, bool is_max) {
  return make(
      desc + " " + dims_str({dim}, keepdim), {x},
      [=](const Ts& in) {
        auto [v, i] = is_max ? max(in[0], dim, keepdim) : min(in[0], dim, keepdim);
        return Ts{v, i};
      },
      [=](const Ts& in) {
        Groups gr = reduce_groups(in[0], {dim}, keepdim);
        RefOut v{gr.shape, {}}, i{gr.shape, {}, true};
        for (const auto& g : gr.g) {
          auto [val, idx] = ref::extreme(g, is_max);
          v.values.push_back(val);
          i.values.push_back(static_cast<double>(idx));
        }
        return Refs{v, i};
      });
}

// argmax / argmin along dim, or over the flattened tensor (dim = nullopt).
Sample arg_sample(const std::string& desc, const Tensor& x, std::optional<int64_t> dim, bool keepdim, bool is_max) {
  return make(
      desc + " " + (dim ? dims_str({*dim}, keepdim) : std::string(keepdim ? "flattened keepdim" : "flattened")), {x},
      [=](const Ts& in) { return Ts{is_max ? argmax(in[0], dim, keepdim) : argmin(in[0], dim, keepdim)}; },
      [=](const Ts& in) {
        Groups gr = reduce_groups(in[0], dim ? std::vector<int64_t>{*dim} : std::vector<int64_t>{}, keepdim);
        RefOut r{gr.shape, {}, true};
        for (const auto& g : gr.g) r.values.push_back(static_cast<double>(ref::extreme(g, is_max).second));
        return Refs{r};
      });
}

void add_reductions(std::vector<OpInfo>& db) {
  const auto P = CastPolicy::Passthrough;
  db.push_back(entry("sum", "", CastPolicy::Fp32, {0}, [](DType dt) {
    std::vector<Sample> s;
    const Tensor x = U({3, 4, 5}, dt, -2, 2, 7);
    for (const std::vector<int64_t>& dims :
         std::vector<std::vector<int64_t>>{{}, {0}, {1}, {2}, {-1}, {0, 2}, {2, 0}, {1, 2}, {0, 1, 2}})
      for (bool keep : {false, true}) s.push_back(sum_sample("contiguous", x, dims, keep, false));
    s.push_back(sum_sample("contiguous", x, {}, false, true));
    const Tensor base = U({4, 5, 6}, dt, -2, 2, 11);
    const std::vector<std::pair<std::string, Tensor>> views = {
        {"transposed", base.transpose(0, 2)},
        {"stepped", base.slice(1, 1, 5, 2).slice(2, 0, 6, 3)},
        {"permuted", base.permute({1, 2, 0})},
        {"expanded", U({1, 5, 1}, dt, -2, 2, 3).expand({3, 5, 4})},
        {"select transposed", base.select(1, 3).t()}};
    for (const auto& [name, v] : views) {
      for (int64_t d = 0; d < v.dim(); ++d) s.push_back(sum_sample(name, v, {d}, false, false));
      s.push_back(sum_sample(name, v, {}, false, true));
      if (v.dim() == 3) s.push_back(sum_sample(name, v, {0, 2}, true, false));
    }
    const Tensor z = U({}, dt, -2, 2, 12);
    s.push_back(sum_sample("0-d", z, {}, false, true));
    s.push_back(sum_sample("0-d", z, {0}, false, false));
    s.push_back(sum_sample("0-d", z, {-1}, true, false));
    const Tensor e = U({3, 0, 2}, dt, -2, 2, 13);
    s.push_back(sum_sample("empty", e, {1}, false, false));
    s.push_back(sum_sample("empty", e, {0}, false, false));
    s.push_back(sum_sample("empty", e, {}, false, true));
    return s;
  }));
  db.push_back(entry("mean", "", P, {0}, [](DType dt) {
    std::vector<Sample> s;
    const Tensor x = U({3, 4, 5}, dt, -2, 2, 8);
    for (const std::vector<int64_t>& dims : std::vector<std::vector<int64_t>>{{}, {0}, {2}, {-1}, {0, 2}})
      for (bool keep : {false, true}) s.push_back(mean_sample("contiguous", x, dims, keep, false));
    s.push_back(mean_sample("contiguous", x, {}, false, true));
    const Tensor xt = U({4, 6, 5}, dt, -2, 2, 9).transpose(0, 1);
    for (const std::vector<int64_t>& dims : std::vector<std::vector<int64_t>>{{}, {0}, {2}, {0, 2}})
      s.push_back(no_grad(mean_sample("transposed", xt, dims, true, false)));
    s.push_back(mean_sample("transposed", xt, {}, false, true));
    s.push_back(mean_sample("expanded", U({3, 1}, dt, -2, 2, 10).expand({3, 4}), {1}, false, false));
    s.push_back(mean_sample("0-d", U({}, dt, -2, 2, 11), {}, false, true));
    const Tensor e = U({3, 0, 2}, dt, -2, 2, 12);
    s.push_back(mean_sample("empty (NaN)", e, {1}, false, false));
    s.push_back(mean_sample("empty", e, {0}, false, false));
    s.push_back(mean_sample("empty (NaN)", e, {}, false, true));
    return s;
  }));
  db.push_back(entry("var", "", P, {0}, [](DType dt) {
    std::vector<Sample> s;
    // Offset data (mean 4.5, spread 1): the one-pass formula loses digits here.
    const Tensor x = U({3, 4, 5}, dt, 4, 5, 9);
    const Tensor xp = U({5, 8, 6}, dt, 4, 5, 10).permute({2, 0, 1});
    for (int64_t corr : {0, 1, 2})
      for (const std::vector<int64_t>& dims : std::vector<std::vector<int64_t>>{{}, {0}, {1}, {2}, {0, 2}}) {
        s.push_back(var_sample("contiguous", x, dims, corr, dims.size() == 1));
        if (dims.size() == 1) s.push_back(var_sample("contiguous", x, dims, corr, false));
        s.push_back(no_grad(var_sample("permuted", xp, dims, corr, dims.size() == 1)));
      }
    s.push_back(var_sample("contiguous", x, {0, 2}, 0, true));
    s.push_back(var_sample("transposed", Ut({4, 6}, dt, -2, 2, 11), {1}, 1, false));
    s.push_back(var_sample("expanded", U({1, 6}, dt, -2, 2, 12).expand({3, 6}), {0}, 1, false));
    s.push_back(var_sample("empty (NaN)", U({0, 3}, dt, -2, 2, 13), {0}, 1, false));
    return s;
  }));
  for (bool is_max : {true, false}) {
    const std::string name = is_max ? "max" : "min";
    OpInfo all = entry(name, "", P, {0}, [is_max](DType dt) {
      std::vector<Sample> s;
      s.push_back(extreme_all_sample("contiguous", distinct({3, 4, 5}, dt, 21), is_max));
      s.push_back(extreme_all_sample("transposed", distinct({5, 7}, dt, 22).t(), is_max));
      s.push_back(extreme_all_sample("stepped", distinct({6, 8}, dt, 23).slice(1, 1, 8, 3), is_max));
      s.push_back(extreme_all_sample("0-d", distinct({}, dt, 24), is_max));
      return s;
    });
    all.fwd_tol = exact_tol();
    db.push_back(all);
    OpInfo along = entry(name, "dim", P, {0}, [is_max](DType dt) {
      std::vector<Sample> s;
      const Tensor x = distinct({3, 4, 5}, dt, 25);
      for (int64_t d = -3; d < 3; ++d) s.push_back(extreme_dim_sample("contiguous", x, d, d % 2 == 0, is_max));
      const Tensor xt = distinct({5, 4, 3}, dt, 26).transpose(0, 2);
      for (int64_t d = 0; d < 3; ++d) s.push_back(extreme_dim_sample("transposed", xt, d, false, is_max));
      s.push_back(extreme_dim_sample("stepped", distinct({4, 9}, dt, 27).slice(1, 0, 9, 2), 1, false, is_max));
      s.push_back(extreme_dim_sample("0-d", distinct({}, dt, 28), 0, false, is_max));
      s.push_back(extreme_dim_sample("empty rows", distinct({0, 4}, dt, 29), 1, false, is_max));
      // Ties resolve to the first index (forward only: a tie has no derivative).
      const Tensor tie = with_ties({6, 40, 3}, dt, 30);
      for (int64_t d = 0; d < 3; ++d) s.push_back(no_grad(extreme_dim_sample("ties", tie, d, false, is_max)));
      return s;
    });
    along.fwd_tol = exact_tol();
    db.push_back(along);
    OpInfo arg = entry(is_max ? "argmax" : "argmin", "", P, {}, [is_max](DType dt) {
      std::vector<Sample> s;
      const Tensor x = distinct({3, 4, 5}, dt, 31);
      s.push_back(arg_sample("contiguous", x, std::nullopt, false, is_max));
      s.push_back(arg_sample("contiguous", x, std::nullopt, true, is_max));
      for (int64_t d = -1; d < 3; ++d) s.push_back(arg_sample("contiguous", x, d, d == 1, is_max));
      const Tensor xt = distinct({6, 7}, dt, 32).t();
      s.push_back(arg_sample("transposed", xt, std::nullopt, false, is_max));
      s.push_back(arg_sample("transposed", xt, 0, false, is_max));
      s.push_back(arg_sample("transposed", xt, 1, true, is_max));
      s.push_back(arg_sample("0-d", distinct({}, dt, 33), std::nullopt, false, is_max));
      const Tensor tie = with_ties({5, 30}, dt, 34);
      s.push_back(arg_sample("ties", tie, 1, false, is_max));
      s.push_back(arg_sample("ties", tie, std::nullopt, false, is_max));
      return s;
    });
    db.push_back(arg);
  }
  db.push_back(entry("sum_to_size", "", P, {0}, [](DType dt) {
    std::vector<Sample> s;
    auto add = [&](const std::string& desc, const Tensor& x, const Shape& size) {
      const int64_t lead = x.dim() - static_cast<int64_t>(size.size());
      std::vector<int64_t> dims;
      for (int64_t d = 0; d < x.dim(); ++d)
        if (d < lead || (size[d - lead] == 1 && x.size(d) != 1)) dims.push_back(d);
      if (dims.empty()) dims.push_back(-1000);  // nothing reduced: handled below
      const bool none = dims[0] == -1000;
      int64_t n = 1;
      for (int64_t d : dims)
        if (!none) n *= x.size(d);
      s.push_back(make(
          desc + " to " + shape_str(size), {x}, [size](const Ts& in) { return Ts{sum_to_size(in[0], size)}; },
          [=](const Ts& in) {
            if (none) return Refs{{size, in[0].to_vector()}};
            Groups gr = reduce_groups(in[0], dims, true);
            std::vector<double> r;
            for (const auto& g : gr.g) r.push_back(ref::sum(g));
            return Refs{{size, r}};
          },
          acc_of(n, max_abs(x))));
    };
    const Tensor x = U({2, 3, 4}, dt, -2, 2, 41);
    for (const Shape& size : std::vector<Shape>{{4}, {3, 1}, {1, 4}, {2, 1, 4}, {1, 1, 1}, {3, 4}, {2, 3, 4}})
      add("contiguous", x, size);
    add("transposed", x.transpose(0, 2), {1, 3, 2});
    add("expanded", U({3, 1}, dt, -2, 2, 42).expand({2, 3, 4}), {3, 1});
    add("0-d", U({}, dt, -2, 2, 43), {});
    add("empty", U({0, 3}, dt, -2, 2, 44), {3});
    return s;
  }));
}

}  // namespace
}  // namespace db

const std::set<std::string>& double_backward_ops() {
  static const std::set<std::string> ids = {
      // elementwise
      "neg",
      "abs",
      "exp",
      "log",
      "log1p",
      "sqrt",
      "rsqrt",
      "reciprocal",
      "tanh",
      "sigmoid",
      "relu",
      "gelu",
      "silu",
      "softplus",
      "clamp",
      "pow_scalar",
      "add_scalar",
      "sub_scalar",
      "mul_scalar",
      "div_scalar",
      "add",
      "sub",
      "mul",
      "div",
      "where",
      // reductions and shapes
      "sum",
      "mean",
      "sum_to_size",
      "cat",
      "stack",
      "dropout",
      // products
      "mm",
      "matmul",
      "bmm",
      "linear",
      "linear_activation_relu",
      "linear_activation_gelu",
      "linear_activation_gelu_tanh",
      "mlp_relu",
      "mlp_gelu",
      "mlp_gelu_tanh",
      // the residual sum x + r is this entry's differentiated output (an add)
      "add_layer_norm_sum",
      // the rest
      "pow",
      "maximum",
      "minimum",
      "var",
      "max",
      "max_dim",
      "min",
      "min_dim",
      "batch_norm",
      // nn: softmax, losses, norms, attention
      "softmax",
      "log_softmax",
      "cross_entropy",
      "nll_loss",
      "mse_loss",
      "binary_cross_entropy_with_logits",
      "layer_norm",
      "add_layer_norm",
      "scaled_dot_product_attention",
      // nn: conv, pooling, embedding
      "conv2d",
      "max_pool2d",
      "avg_pool2d",
      "adaptive_avg_pool2d",
      "embedding",
  };
  return ids;
}

const std::vector<OpInfo>& op_db() {
  static const std::vector<OpInfo> db = [] {
    std::vector<OpInfo> v;
    db::add_elementwise(v);
    db::add_reductions(v);
    db::add_nn_ops_and_losses(v);
    for (OpInfo& e : v) e.gradgrad = double_backward_ops().count(e.id()) > 0;
    return v;
  }();
  return db;
}

}  // namespace tc::testing