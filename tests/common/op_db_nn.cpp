// The op table's families of linear algebra, convolution and pooling, neural-network ops
// and losses (see op_db.h; shared helpers in op_db_helpers.h).
#include "common/op_db_helpers.h"

namespace tc::testing::db {
namespace {

// ------------------------------------------------------------------ linear algebra

Sample product_sample(const std::string& desc, const Tensor& a, const Tensor& b,
                      Tensor (*op)(const Tensor&, const Tensor&)) {
  const int64_t k = a.size(-1);
  return make(
      desc + " " + shape_str(a.sizes()) + " @ " + shape_str(b.sizes()), {a, b},
      [op](const Ts& in) { return Ts{op(in[0], in[1])}; },
      [](const Ts& in) {
        ref::ShapedValues r = ref::matmul(in[0], in[1]);
        return Refs{{r.shape, r.values}};
      },
      acc_of(k, max_abs(a) * max_abs(b)));
}

// y = x w^T + b over the last dim of x.
RefOut ref_linear(const Tensor& x, const Tensor& w, const Tensor& b) {
  const std::vector<double> xv = x.to_vector(), wv = w.to_vector();
  const std::vector<double> bv = b.defined() ? b.to_vector() : std::vector<double>(w.size(0), 0.0);
  const int64_t k = w.size(1), o = w.size(0),
                rows = k == 0 ? numel_of(Shape(x.sizes().begin(), x.sizes().end() - 1)) : x.numel() / k;
  RefOut r;
  r.shape = Shape(x.sizes().begin(), x.sizes().end() - 1);
  r.shape.push_back(o);
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < o; ++j) {
      double acc = bv[j];
      for (int64_t p = 0; p < k; ++p) acc += xv[i * k + p] * wv[j * k + p];
      r.values.push_back(acc);
    }
  return r;
}

void add_linalg(std::vector<OpInfo>& db) {
  const auto L = CastPolicy::LowerPrecision;
  db.push_back(entry("mm", "", L, {0, 1}, [](DType dt) {
    std::vector<Sample> s;
    auto op = [](const Tensor& a, const Tensor& b) { return mm(a, b); };
    s.push_back(product_sample("contiguous", U({3, 5}, dt, -2, 2, 1), U({5, 4}, dt, -2, 2, 2), op));
    s.push_back(product_sample("1x1x1", U({1, 1}, dt, -2, 2, 3), U({1, 1}, dt, -2, 2, 4), op));
    s.push_back(product_sample("a transposed", Ut({3, 5}, dt, -2, 2, 5), U({5, 4}, dt, -2, 2, 6), op));
    s.push_back(product_sample("b transposed", U({3, 5}, dt, -2, 2, 7), Ut({5, 4}, dt, -2, 2, 8), op));
    s.push_back(product_sample("both transposed", Ut({3, 5}, dt, -2, 2, 9), Ut({5, 4}, dt, -2, 2, 10), op));
    s.push_back(product_sample("a stepped, b offset window", Us({3, 5}, dt, -2, 2, 11),
                               U({8, 4}, dt, -2, 2, 12).narrow(0, 2, 5), op));
    s.push_back(no_grad(product_sample("larger", U({9, 70}, dt, -1, 1, 13), Ut({70, 11}, dt, -1, 1, 14), op)));
    s.push_back(product_sample("expanded rows", U({1, 5}, dt, -2, 2, 19).expand({3, 5}), U({5, 4}, dt, -2, 2, 20), op));
    s.push_back(
        product_sample("expanded columns", U({3, 5}, dt, -2, 2, 21), U({5, 1}, dt, -2, 2, 22).expand({5, 4}), op));
    s.push_back(product_sample("k = 0", U({3, 0}, dt, -2, 2, 15), U({0, 4}, dt, -2, 2, 16), op));
    s.push_back(product_sample("n = 0", U({0, 5}, dt, -2, 2, 17), U({5, 4}, dt, -2, 2, 18), op));
    return s;
  }));
  db.push_back(entry("matmul", "", L, {0, 1}, [](DType dt) {
    std::vector<Sample> s;
    auto op = [](const Tensor& a, const Tensor& b) { return matmul(a, b); };
    s.push_back(product_sample("2-d", U({3, 5}, dt, -2, 2, 21), U({5, 4}, dt, -2, 2, 22), op));
    s.push_back(product_sample("dot (0-d result)", U({5}, dt, -2, 2, 23), U({5}, dt, -2, 2, 24), op));
    s.push_back(product_sample("vector @ matrix", U({5}, dt, -2, 2, 25), U({5, 3}, dt, -2, 2, 26), op));
    s.push_back(product_sample("matrix @ vector", U({4, 5}, dt, -2, 2, 27), U({5}, dt, -2, 2, 28), op));
    s.push_back(product_sample("vector @ batch", U({5}, dt, -2, 2, 29), U({2, 5, 3}, dt, -2, 2, 30), op));
    s.push_back(product_sample("batch @ vector", U({2, 4, 5}, dt, -2, 2, 31), U({5}, dt, -2, 2, 32), op));
    s.push_back(product_sample("stepped vector", Us({5}, dt, -2, 2, 33), U({5}, dt, -2, 2, 34), op));
    s.push_back(product_sample("batch broadcast", U({2, 1, 3, 4}, dt, -1, 1, 35), U({3, 4, 2}, dt, -1, 1, 36), op));
    s.push_back(product_sample("matrix @ batch", U({3, 4}, dt, -1, 1, 37), U({2, 3, 4, 2}, dt, -1, 1, 38), op));
    s.push_back(product_sample("batch @ matrix (folded)", U({3, 2, 4}, dt, -1, 1, 39), U({4, 2}, dt, -1, 1, 40), op));
    s.push_back(product_sample("both broadcast", U({1, 3, 2, 4}, dt, -1, 1, 41), U({2, 1, 4, 3}, dt, -1, 1, 42), op));
    s.push_back(product_sample("expanded batch", U({1, 3, 4}, dt, -1, 1, 43).expand({3, 3, 4}),
                               U({3, 4, 2}, dt, -1, 1, 44), op));
    s.push_back(product_sample("transposed batch", Ut({2, 3, 4}, dt, -1, 1, 45), U({2, 4, 2}, dt, -1, 1, 46), op));
    s.push_back(product_sample("empty dot", U({0}, dt, -1, 1, 47), U({0}, dt, -1, 1, 48), op));
    s.push_back(product_sample("k = 0 batch", U({2, 3, 0}, dt, -1, 1, 49), U({0, 4}, dt, -1, 1, 50), op));
    s.push_back(product_sample("m = 0 batch", U({2, 3, 5}, dt, -1, 1, 51), U({5, 0}, dt, -1, 1, 52), op));
    s.push_back(product_sample("n = 0 batch", U({2, 0, 5}, dt, -1, 1, 53), U({5, 4}, dt, -1, 1, 54), op));
    uint64_t seed = 54;
    for (const auto& [sa, sb] : std::vector<std::pair<Shape, Shape>>{{{2, 1, 6, 5}, {3, 5, 4}},
                                                                     {{6, 5}, {2, 3, 5, 4}},
                                                                     {{2, 3, 6, 5}, {5, 4}},
                                                                     {{1, 3, 6, 5}, {2, 1, 5, 4}},
                                                                     {{4, 6, 5}, {4, 5, 4}}}) {
      s.push_back(no_grad(product_sample("broadcast", U(sa, dt, -2, 2, seed + 1), U(sb, dt, -2, 2, seed + 2), op)));
      seed += 2;
    }
    return s;
  }));
  db.push_back(entry("bmm", "", L, {0, 1}, [](DType dt) {
    std::vector<Sample> s;
    auto op = [](const Tensor& a, const Tensor& b) { return bmm(a, b); };
    s.push_back(product_sample("contiguous", U({2, 3, 5}, dt, -2, 2, 61), U({2, 5, 4}, dt, -2, 2, 62), op));
    s.push_back(
        product_sample("transposed", Ut({2, 3, 5}, dt, -2, 2, 63), U({5, 2, 4}, dt, -2, 2, 64).permute({1, 0, 2}), op));
    s.push_back(product_sample("expanded batch", U({1, 3, 5}, dt, -2, 2, 65).expand({2, 3, 5}),
                               Ut({2, 5, 4}, dt, -2, 2, 66), op));
    s.push_back(no_grad(product_sample("larger", U({4, 9, 31}, dt, -1, 1, 67), U({4, 31, 5}, dt, -1, 1, 68), op)));
    s.push_back(no_grad(product_sample("larger transposed", Ut({4, 9, 31}, dt, -2, 2, 73),
                                       U({31, 4, 5}, dt, -2, 2, 74).permute({1, 0, 2}), op)));
    s.push_back(product_sample("empty batch", U({0, 2, 5}, dt, -2, 2, 69), U({0, 5, 4}, dt, -2, 2, 70), op));
    s.push_back(product_sample("k = 0", U({2, 3, 0}, dt, -2, 2, 71), U({2, 0, 4}, dt, -2, 2, 72), op));
    return s;
  }));
  db.push_back(entry("linear", "", L, {0, 1, 2}, [](DType dt) {
    std::vector<Sample> s;
    auto add = [&](const std::string& desc, const Tensor& x, const Tensor& w, const Tensor& b) {
      const int64_t k = w.size(1);
      s.push_back(make(
          desc, {x, w, b}, [](const Ts& in) { return Ts{linear(in[0], in[1], in[2])}; },
          [](const Ts& in) { return Refs{ref_linear(in[0], in[1], in[2])}; },
          acc_of(k + 1, std::max(max_abs(x) * max_abs(w), b.defined() ? max_abs(b) : 0.0))));
    };
    add("3-d input with bias", U({2, 3, 4}, dt, -2, 2, 81), U({5, 4}, dt, -1, 1, 82), U({5}, dt, -3, 3, 83));
    add("no bias", U({3, 4}, dt, -2, 2, 84), U({5, 4}, dt, -1, 1, 85), Tensor());
    add("1-d input", U({4}, dt, -2, 2, 86), U({5, 4}, dt, -1, 1, 87), U({5}, dt, -3, 3, 88));
    add("transposed input", Ut({6, 4}, dt, -2, 2, 89), U({5, 4}, dt, -1, 1, 90), U({5}, dt, -3, 3, 91));
    add("transposed weight", U({3, 4}, dt, -2, 2, 92), Ut({5, 4}, dt, -1, 1, 93), U({5}, dt, -3, 3, 94));
    add("stepped input", Us({2, 3, 4}, dt, -2, 2, 95), U({5, 4}, dt, -1, 1, 96), Tensor());
    add("expanded input", U({1, 4}, dt, -2, 2, 109).expand({3, 4}), U({5, 4}, dt, -1, 1, 110), U({5}, dt, -3, 3, 111));
    add("k = 0 (bias only)", U({2, 0}, dt, -2, 2, 97), U({3, 0}, dt, -1, 1, 98), U({3}, dt, -3, 3, 99));
    add("no rows", U({0, 4}, dt, -2, 2, 100), U({3, 4}, dt, -1, 1, 101), U({3}, dt, -3, 3, 102));
    // k = 24, as a layer would have.
    const Tensor w = U({7, 24}, dt, -1, 1, 103), b = U({7}, dt, -3, 3, 104);
    add("larger", U({2, 5, 24}, dt, -2, 2, 105), w, b);
    add("larger without bias", U({2, 5, 24}, dt, -2, 2, 106), w, Tensor());
    add("larger 1-d", U({24}, dt, -2, 2, 107), w, b);
    add("larger transposed", Ut({6, 24}, dt, -2, 2, 108), w, b);
    for (size_t i = s.size() - 4; i < s.size(); ++i) s[i].gradcheck = false;
    return s;
  }));
  // linear + activation: the forward samples run without a graph, so they check the GEMM's
  // fused epilogue; gradcheck runs the recorded composition.
  const std::pair<Activation, double (*)(double)> acts[] = {
      {Activation::kRelu, [](double v) { return std::max(v, 0.0); }},
      {Activation::kGelu, [](double v) { return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0))); }},
      {Activation::kGeluTanh,
       [](double v) { return 0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v))); }}};
  for (const auto& [act, fn] : acts) {
    const char* name = activation_name(act);
    db.push_back(entry("linear_activation", name, L, {0, 1, 2}, [act, fn](DType dt) {
      std::vector<Sample> s;
      auto add = [&](const std::string& desc, const Tensor& x, const Tensor& w, const Tensor& b) {
        s.push_back(make(
            desc, {x, w, b}, [act](const Ts& in) { return Ts{linear_activation(in[0], in[1], in[2], act)}; },
            [fn](const Ts& in) {
              RefOut r = ref_linear(in[0], in[1], in[2]);
              for (double& v : r.values) v = fn(v);
              return Refs{r};
            },
            acc_of(w.size(1) + 1, std::max(max_abs(x) * max_abs(w), b.defined() ? max_abs(b) : 0.0))));
      };
      add("3-d input with bias", U({2, 3, 4}, dt, -2, 2, 121), U({5, 4}, dt, -1, 1, 122), U({5}, dt, -3, 3, 123));
      add("no bias", U({3, 4}, dt, -2, 2, 124), U({5, 4}, dt, -1, 1, 125), Tensor());
      add("1-d input", U({4}, dt, -2, 2, 126), U({5, 4}, dt, -1, 1, 127), U({5}, dt, -3, 3, 128));
      add("transposed input", Ut({6, 4}, dt, -2, 2, 129), U({5, 4}, dt, -1, 1, 130), U({5}, dt, -3, 3, 131));
      add("k = 0 (bias only)", U({2, 0}, dt, -2, 2, 132), U({3, 0}, dt, -1, 1, 133), U({3}, dt, -3, 3, 134));
      add("no rows", U({0, 4}, dt, -2, 2, 135), U({3, 4}, dt, -1, 1, 136), U({3}, dt, -3, 3, 137));
      // Enough rows for oneDNN's GEMM (a few rows go to the matrix-vector kernel, unfused).
      const Tensor w = U({40, 24}, dt, -1, 1, 138), b = U({40}, dt, -3, 3, 139);
      add("larger", U({4, 16, 24}, dt, -2, 2, 140), w, b);
      add("larger without bias", U({64, 24}, dt, -2, 2, 141), w, Tensor());
      add("larger transposed", Ut({64, 24}, dt, -2, 2, 142), w, b);
      for (size_t i = s.size() - 3; i < s.size(); ++i) s[i].gradcheck = false;
      return s;
    }));
    // mlp: linear(activation(linear(x, w1, b1)), w2, b2). The forward samples run without a
    // graph (linear_activation then linear); gradcheck runs the recorded one-node path (its
    // fused GEMM epilogue is checked at larger sizes in test_linalg).
    db.push_back(entry("mlp", name, L, {0, 1, 2, 3, 4}, [act, fn](DType dt) {
      std::vector<Sample> s;
      auto add = [&](const std::string& desc, const Tensor& x, const Tensor& w1, const Tensor& b1, const Tensor& w2,
                     const Tensor& b2) {
        auto hidden = [fn](const Ts& in) {
          RefOut r = ref_linear(in[0], in[1], in[2]);
          for (double& v : r.values) v = fn(v);
          return r;
        };
        // The hidden activations are rounded to dt before the second product: each output
        // is off by up to u * sum_j |y_j w2_j| (u: dt's unit roundoff).
        const RefOut h = hidden({x, w1, b1});
        const std::vector<double> w2v = w2.to_vector();
        const int64_t nh = w2.size(1), no = w2.size(0), nr = nh == 0 ? 0 : static_cast<int64_t>(h.values.size()) / nh;
        double max_h = 0, spread = 0;
        for (double v : h.values) max_h = std::max(max_h, std::fabs(v));
        for (int64_t i = 0; i < nr; ++i)
          for (int64_t o = 0; o < no; ++o) {
            double sum = 0;
            for (int64_t j = 0; j < nh; ++j) sum += std::fabs(h.values[i * nh + j] * w2v[o * nh + j]);
            spread = std::max(spread, sum);
          }
        Sample sm = make(
            desc, {x, w1, b1, w2, b2}, [act](const Ts& in) { return Ts{mlp(in[0], in[1], in[2], in[3], in[4], act)}; },
            [hidden](const Ts& in) {
              const RefOut r = hidden(in);
              const Tensor y = tensor(r.values, {static_cast<int64_t>(r.values.size())}, kFloat64).reshape(r.shape);
              return Refs{ref_linear(y, in[3], in[4])};
            },
            acc_of(w1.size(1) + 1, std::max(max_abs(x) * max_abs(w1), b1.defined() ? max_abs(b1) : 0.0)) *
                    (static_cast<double>(nh) * max_abs(w2)) +
                acc_of(nh + 1, std::max(max_h * max_abs(w2), b2.defined() ? max_abs(b2) : 0.0)));
        Tol t = tol_for(dt, 4);
        t.atol += (dt == kBFloat16 ? 0x1p-9 : dt == kFloat16 ? 0x1p-12 : 0.0) * spread;
        sm.tol = t;
        s.push_back(sm);
      };
      add("3-d input with biases", U({2, 3, 4}, dt, -2, 2, 151), U({5, 4}, dt, -1, 1, 152), U({5}, dt, -1, 1, 153),
          U({3, 5}, dt, -1, 1, 154), U({3}, dt, -1, 1, 155));
      add("no biases", U({3, 4}, dt, -2, 2, 156), U({5, 4}, dt, -1, 1, 157), Tensor(), U({3, 5}, dt, -1, 1, 158),
          Tensor());
      add("1-d input, fc bias only", U({4}, dt, -2, 2, 159), U({5, 4}, dt, -1, 1, 160), U({5}, dt, -1, 1, 161),
          U({3, 5}, dt, -1, 1, 162), Tensor());
      add("transposed input and proj weight", Ut({6, 4}, dt, -2, 2, 163), U({5, 4}, dt, -1, 1, 164),
          U({5}, dt, -1, 1, 165), Ut({3, 5}, dt, -1, 1, 166), U({3}, dt, -1, 1, 167));
      add("no rows", U({0, 4}, dt, -2, 2, 168), U({5, 4}, dt, -1, 1, 169), U({5}, dt, -1, 1, 170),
          U({3, 5}, dt, -1, 1, 171), U({3}, dt, -1, 1, 172));
      add("larger", U({4, 16, 24}, dt, -2, 2, 173), U({40, 24}, dt, -0.5, 0.5, 174), U({40}, dt, -1, 1, 175),
          U({16, 40}, dt, -0.5, 0.5, 176), U({16}, dt, -1, 1, 177));
      s.back().gradcheck = false;
      return s;
    }));
  }
}

// ------------------------------------------------------------------ convolution and pooling

struct ConvArgs {
  Shape stride, padding, dilation;
  int64_t groups;
};

RefOut ref_conv(const Tensor& x, const Tensor& w, const Tensor& b, const ConvArgs& c) {
  const auto xv = x.to_vector(), wv = w.to_vector();
  const auto bv = b.defined() ? b.to_vector() : std::vector<double>();
  const int64_t N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3);
  const int64_t O = w.size(0), KH = w.size(2), KW = w.size(3);
  const int64_t CG = C / c.groups, OG = O / c.groups;
  const int64_t OH = (H + 2 * c.padding[0] - c.dilation[0] * (KH - 1) - 1) / c.stride[0] + 1;
  const int64_t OW = (W + 2 * c.padding[1] - c.dilation[1] * (KW - 1) - 1) / c.stride[1] + 1;
  RefOut r{{N, O, OH, OW}, std::vector<double>(static_cast<size_t>(N * O * OH * OW))};
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < O; ++o)
      for (int64_t i = 0; i < OH; ++i)
        for (int64_t j = 0; j < OW; ++j) {
          double s = bv.empty() ? 0.0 : bv[o];
          for (int64_t ci = 0; ci < CG; ++ci)
            for (int64_t u = 0; u < KH; ++u)
              for (int64_t v = 0; v < KW; ++v) {
                const int64_t h = i * c.stride[0] - c.padding[0] + u * c.dilation[0];
                const int64_t ww = j * c.stride[1] - c.padding[1] + v * c.dilation[1];
                if (h < 0 || h >= H || ww < 0 || ww >= W) continue;
                const int64_t ch = (o / OG) * CG + ci;
                s += xv[((n * C + ch) * H + h) * W + ww] * wv[((o * CG + ci) * KH + u) * KW + v];
              }
          r.values[((n * O + o) * OH + i) * OW + j] = s;
        }
  return r;
}

// PyTorch's pooling output size, written out independently of the library.
int64_t pool_out(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d, bool ceil_mode) {
  const double span = static_cast<double>(in + 2 * p - d * (k - 1) - 1) / static_cast<double>(s);
  int64_t out = static_cast<int64_t>(ceil_mode ? std::ceil(span) : std::floor(span)) + 1;
  if (ceil_mode && (out - 1) * s >= in + p) --out;
  return out;
}

struct PoolArgs {
  Shape kernel, stride, padding, dilation;
  bool ceil_mode;
};

enum class PoolKind { Max, AvgInclude, AvgExclude };

RefOut ref_pool(const Tensor& x, const PoolArgs& c, PoolKind kind) {
  const auto xv = x.to_vector();
  const Shape st = c.stride.empty() ? c.kernel : c.stride;
  const int64_t N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3);
  const int64_t OH = pool_out(H, c.kernel[0], st[0], c.padding[0], c.dilation[0], c.ceil_mode);
  const int64_t OW = pool_out(W, c.kernel[1], st[1], c.padding[1], c.dilation[1], c.ceil_mode);
  RefOut r{{N, C, OH, OW}, {}};
  for (int64_t nc = 0; nc < N * C; ++nc)
    for (int64_t i = 0; i < OH; ++i)
      for (int64_t j = 0; j < OW; ++j) {
        double best = -kInfD, sum = 0;
        int64_t inside = 0, in_padded = 0;
        for (int64_t u = 0; u < c.kernel[0]; ++u)
          for (int64_t v = 0; v < c.kernel[1]; ++v) {
            const int64_t h = i * st[0] - c.padding[0] + u * c.dilation[0];
            const int64_t w = j * st[1] - c.padding[1] + v * c.dilation[1];
            // PyTorch counts padded positions up to H + pad, not the ceil_mode overhang.
            if (h < H + c.padding[0] && w < W + c.padding[1]) ++in_padded;
            if (h < 0 || h >= H || w < 0 || w >= W) continue;
            const double val = xv[(nc * H + h) * W + w];
            best = std::max(best, val);
            sum += val;
            ++inside;
          }
        r.values.push_back(kind == PoolKind::Max
                               ? best
                               : sum / static_cast<double>(kind == PoolKind::AvgInclude ? in_padded : inside));
      }
  return r;
}

RefOut ref_adaptive_avg(const Tensor& x, const Shape& os) {
  const auto xv = x.to_vector();
  const int64_t H = x.size(2), W = x.size(3);
  RefOut r{{x.size(0), x.size(1), os[0], os[1]}, {}};
  for (int64_t nc = 0; nc < x.size(0) * x.size(1); ++nc)
    for (int64_t i = 0; i < os[0]; ++i)
      for (int64_t j = 0; j < os[1]; ++j) {
        const auto h0 = static_cast<int64_t>(std::floor(static_cast<double>(i * H) / os[0]));
        const auto h1 = static_cast<int64_t>(std::ceil(static_cast<double>((i + 1) * H) / os[0]));
        const auto w0 = static_cast<int64_t>(std::floor(static_cast<double>(j * W) / os[1]));
        const auto w1 = static_cast<int64_t>(std::ceil(static_cast<double>((j + 1) * W) / os[1]));
        double s = 0;
        for (int64_t h = h0; h < h1; ++h)
          for (int64_t w = w0; w < w1; ++w) s += xv[(nc * H + h) * W + w];
        r.values.push_back(s / static_cast<double>((h1 - h0) * (w1 - w0)));
      }
  return r;
}

void add_conv_pool(std::vector<OpInfo>& db) {
  const auto P = CastPolicy::Passthrough;
  OpInfo conv = entry("conv2d", "", CastPolicy::LowerPrecision, {0, 1, 2}, [](DType dt) {
    std::vector<Sample> s;
    struct Case {
      std::string desc;
      Shape x, w;  // input (N, C, H, W), weight (O, C / groups, kh, kw)
      ConvArgs c;
      bool bias;
      int layout;  // 0 contiguous, 1 channels-last input, 2 transposed input (H, W), 3 stepped weight,
                   // 4 expanded (stride-0) batch
      bool grad;
    };
    const std::vector<Case> cases = {
        {"3x3 pad 1", {2, 3, 9, 8}, {4, 3, 3, 3}, {{1, 1}, {1, 1}, {1, 1}, 1}, true, 0, false},
        {"no padding, no bias", {2, 3, 9, 8}, {4, 3, 3, 3}, {{1, 1}, {0, 0}, {1, 1}, 1}, false, 0, false},
        {"asymmetric, floor drops columns", {2, 3, 11, 10}, {5, 3, 3, 2}, {{2, 3}, {1, 0}, {1, 1}, 1}, true, 0, false},
        {"dilation", {2, 2, 10, 9}, {3, 2, 3, 3}, {{1, 1}, {2, 2}, {2, 3}, 1}, true, 0, false},
        {"groups", {2, 4, 7, 7}, {6, 2, 3, 3}, {{1, 2}, {1, 1}, {1, 1}, 2}, true, 0, false},
        {"depthwise", {2, 4, 8, 8}, {4, 1, 3, 3}, {{1, 1}, {1, 1}, {1, 1}, 4}, true, 0, false},
        {"depthwise 5x5", {2, 8, 6, 6}, {8, 1, 5, 5}, {{2, 2}, {2, 2}, {1, 1}, 8}, false, 1, false},
        {"3x3 pad 1", {2, 3, 9, 8}, {4, 3, 3, 3}, {{1, 1}, {1, 1}, {1, 1}, 1}, true, 1, false},
        {"blocked layouts", {2, 16, 12, 12}, {32, 16, 3, 3}, {{1, 1}, {1, 1}, {1, 1}, 1}, true, 0, false},
        // Small enough for gradcheck.
        {"3x3 pad 1", {2, 2, 5, 5}, {3, 2, 3, 3}, {{1, 1}, {1, 1}, {1, 1}, 1}, true, 0, true},
        {"stride, dilation", {2, 2, 6, 5}, {2, 2, 2, 3}, {{2, 1}, {0, 1}, {2, 1}, 1}, true, 0, true},
        {"groups", {2, 4, 5, 5}, {4, 2, 3, 3}, {{1, 1}, {1, 0}, {1, 1}, 2}, true, 0, true},
        {"depthwise", {1, 3, 5, 4}, {3, 1, 3, 3}, {{2, 2}, {1, 1}, {1, 1}, 3}, true, 0, true},
        {"3x3 pad 1", {2, 3, 5, 4}, {2, 3, 3, 3}, {{1, 1}, {1, 1}, {1, 1}, 1}, true, 1, true},
        {"3x3 pad 1, no bias", {1, 2, 6, 5}, {2, 2, 3, 3}, {{1, 1}, {1, 1}, {1, 1}, 1}, false, 2, true},
        {"3x3 pad 1", {1, 2, 5, 5}, {2, 2, 3, 3}, {{1, 1}, {1, 1}, {1, 1}, 1}, true, 3, true},
        {"3x3 pad 1", {2, 2, 5, 5}, {2, 2, 3, 3}, {{1, 1}, {1, 1}, {1, 1}, 1}, true, 4, true},
    };
    uint64_t seed = 10;
    for (const Case& k : cases) {
      Tensor x = k.layout == 1   ? Ucl(k.x, dt, -1, 1, ++seed)
                 : k.layout == 2 ? Ut(k.x, dt, -1, 1, ++seed)
                 : k.layout == 4 ? U({1, k.x[1], k.x[2], k.x[3]}, dt, -1, 1, ++seed).expand(k.x)
                                 : U(k.x, dt, -1, 1, ++seed);
      Tensor w = k.layout == 3 ? Us(k.w, dt, -1, 1, ++seed) : U(k.w, dt, -1, 1, ++seed);
      Tensor b = k.bias ? U({k.w[0]}, dt, -1, 1, ++seed) : Tensor();
      const std::string layout[] = {"", " channels-last input", " transposed input", " stepped weight",
                                    " expanded batch"};
      const int64_t terms = k.w[1] * k.w[2] * k.w[3] + 1;
      Sample smp = make(
          k.desc + layout[k.layout] + " x" + shape_str(k.x) + " w" + shape_str(k.w), {x, w, b},
          [c = k.c](const Ts& in) {
            return Ts{conv2d(in[0], in[1], in[2], c.stride, c.padding, c.dilation, c.groups)};
          },
          [c = k.c](const Ts& in) { return Refs{ref_conv(in[0], in[1], in[2], c)}; }, acc_of(terms, 1.0));
      smp.gradcheck = k.grad;
      s.push_back(std::move(smp));
    }
    return s;
  });
  conv.fwd_tol = {{kBFloat16, tol_for(kBFloat16, 2)}, {kFloat16, tol_for(kFloat16, 2)}};  // 16-bit rounds once
  conv.grad_tol = {
      {kFloat32, tol_for(kFloat32, 32)}, {kBFloat16, tol_for(kBFloat16, 4)}, {kFloat16, tol_for(kFloat16, 4)}};
  db.push_back(conv);

  struct PoolCase {
    Shape x;
    PoolArgs c;
  };
  const std::vector<PoolCase> max_cases = {
      {{2, 3, 8, 8}, {{2, 2}, {}, {0, 0}, {1, 1}, false}},
      {{2, 3, 9, 7}, {{3, 3}, {2, 2}, {1, 1}, {1, 1}, false}},
      {{2, 3, 9, 7}, {{3, 2}, {2, 2}, {1, 1}, {1, 1}, true}},
      {{2, 2, 10, 9}, {{3, 3}, {1, 2}, {1, 0}, {2, 2}, false}},  // dilation
      {{2, 2, 10, 9}, {{2, 3}, {3, 2}, {0, 1}, {2, 1}, true}},   // dilation + ceil
      {{2, 16, 6, 6}, {{2, 2}, {2, 2}, {0, 0}, {1, 1}, true}},
  };
  auto pool_desc = [](const PoolCase& k) {
    const Shape st = k.c.stride.empty() ? k.c.kernel : k.c.stride;
    return "x" + shape_str(k.x) + " k" + shape_str(k.c.kernel) + " s" + shape_str(st) + " p" + shape_str(k.c.padding) +
           " d" + shape_str(k.c.dilation) + (k.c.ceil_mode ? " ceil" : "");
  };
  OpInfo maxp = entry("max_pool2d", "", P, {0}, [max_cases, pool_desc](DType dt) {
    std::vector<Sample> s;
    uint64_t seed = 40;
    for (const PoolCase& k : max_cases)
      for (int layout = 0; layout < 4; ++layout) {
        // Distinct values: the maximum's position is unambiguous.
        const Shape& xs = k.x;
        Tensor x = distinct(xs, dt, ++seed);
        if (layout == 1) x = distinct({xs[0], xs[2], xs[3], xs[1]}, dt, seed).permute({0, 3, 1, 2});
        if (layout == 2) x = distinct({xs[0], xs[1], xs[3], xs[2]}, dt, seed).transpose(2, 3);
        if (layout == 3) x = distinct({1, xs[1], xs[2], xs[3]}, dt, seed).expand(xs);
        Sample smp = make(
            pool_desc(k) + (layout == 0   ? ""
                            : layout == 1 ? " channels-last"
                            : layout == 2 ? " transposed"
                                          : " expanded batch"),
            {x},
            [c = k.c](const Ts& in) {
              return Ts{max_pool2d(in[0], c.kernel, c.stride, c.padding, c.dilation, c.ceil_mode)};
            },
            [c = k.c](const Ts& in) { return Refs{ref_pool(in[0], c, PoolKind::Max)}; });
        // Gradcheck on the contiguous layout of the small cases; the layout check compares
        // the other layouts' gradients with it.
        smp.gradcheck = layout == 0 && xs[1] <= 4;
        s.push_back(std::move(smp));
      }
    return s;
  });
  maxp.fwd_tol = exact_tol();  // a maximum is exact in any dtype
  maxp.grad_tol = {
      {kFloat32, tol_for(kFloat32, 32)}, {kBFloat16, tol_for(kBFloat16, 4)}, {kFloat16, tol_for(kFloat16, 4)}};
  db.push_back(maxp);

  const std::vector<PoolCase> avg_cases = {
      {{2, 3, 8, 8}, {{2, 2}, {}, {0, 0}, {1, 1}, false}},     {{2, 3, 9, 7}, {{3, 3}, {2, 2}, {1, 1}, {1, 1}, false}},
      {{2, 3, 9, 7}, {{3, 3}, {2, 2}, {1, 1}, {1, 1}, true}},  // the ceil window overhangs H + pad
      {{2, 3, 7, 7}, {{2, 2}, {2, 2}, {0, 0}, {1, 1}, true}},  // overhang without padding
      {{2, 2, 10, 9}, {{3, 2}, {1, 3}, {1, 1}, {1, 1}, true}},
  };
  std::map<DType, Tol> two_ulps;
  for (DType dt : kAll) two_ulps[dt] = tol_for(dt, 2);
  OpInfo avgp = entry("avg_pool2d", "", P, {0}, [avg_cases, pool_desc](DType dt) {
    std::vector<Sample> s;
    uint64_t seed = 60;
    for (const PoolCase& k : avg_cases)
      for (bool include_pad : {true, false})
        for (bool cl : {false, true}) {
          const Tensor x = cl ? Ucl(k.x, dt, -2, 2, ++seed) : U(k.x, dt, -2, 2, ++seed);
          Sample smp = make(
              pool_desc(k) + (include_pad ? " include_pad" : " exclude_pad") + (cl ? " channels-last" : ""), {x},
              [c = k.c, include_pad](const Ts& in) {
                return Ts{avg_pool2d(in[0], c.kernel, c.stride, c.padding, c.ceil_mode, include_pad)};
              },
              [c = k.c, include_pad](const Ts& in) {
                return Refs{ref_pool(in[0], c, include_pad ? PoolKind::AvgInclude : PoolKind::AvgExclude)};
              },
              acc_of(k.c.kernel[0] * k.c.kernel[1], 2.0));
          smp.gradcheck = !cl;
          s.push_back(std::move(smp));
        }
    const PoolCase& k = avg_cases[1];
    s.push_back(make(
        pool_desc(k) + " expanded batch", {U({1, 3, 9, 7}, dt, -2, 2, ++seed).expand({2, 3, 9, 7})},
        [c = k.c](const Ts& in) { return Ts{avg_pool2d(in[0], c.kernel, c.stride, c.padding, c.ceil_mode, true)}; },
        [c = k.c](const Ts& in) { return Refs{ref_pool(in[0], c, PoolKind::AvgInclude)}; }, acc_of(9, 2.0)));
    return s;
  });
  avgp.fwd_tol = two_ulps;
  avgp.grad_tol = maxp.grad_tol;
  db.push_back(avgp);

  OpInfo adap = entry("adaptive_avg_pool2d", "", P, {0}, [](DType dt) {
    std::vector<Sample> s;
    const std::vector<std::tuple<Shape, Shape, bool>> cases = {
        {{2, 3, 8, 6}, {4, 3}, false},                                 // divisible: average pooling
        {{2, 3, 7, 5}, {3, 2}, false},                                 // overlapping windows
        {{2, 3, 5, 9}, {4, 7}, false}, {{2, 3, 6, 6}, {1, 1}, false},  // global average
        {{2, 3, 3, 4}, {5, 6}, false},                                 // output larger than input
        {{2, 2, 6, 4}, {3, 2}, true},                                  // gradcheck: divisible
        {{2, 2, 7, 5}, {3, 2}, true},                                  // non-divisible
        {{1, 2, 3, 4}, {4, 5}, true},                                  // upsampling windows
    };
    uint64_t seed = 80;
    for (const auto& [xs, os, grad] : cases)
      for (bool cl : {false, true}) {
        const Tensor x = cl ? Ucl(xs, dt, -2, 2, ++seed) : U(xs, dt, -2, 2, ++seed);
        const int64_t k = (xs[2] / os[0] + 2) * (xs[3] / os[1] + 2);
        Sample smp = make(
            "x" + shape_str(xs) + " -> " + shape_str(os) + (cl ? " channels-last" : ""), {x},
            [os = os](const Ts& in) { return Ts{adaptive_avg_pool2d(in[0], os)}; },
            [os = os](const Ts& in) { return Refs{ref_adaptive_avg(in[0], os)}; }, acc_of(k, 2.0));
        smp.gradcheck = grad && !cl;
        s.push_back(std::move(smp));
      }
    s.push_back(make(
        "x(2, 2, 7, 5) -> (3, 2) expanded batch", {U({1, 2, 7, 5}, dt, -2, 2, ++seed).expand({2, 2, 7, 5})},
        [](const Ts& in) {
          return Ts{adaptive_avg_pool2d(in[0], {3, 2})};
        },
        [](const Ts& in) {
          return Refs{ref_adaptive_avg(in[0], {3, 2})};
        },
        acc_of(12, 2.0)));
    return s;
  });
  adap.fwd_tol = two_ulps;
  adap.grad_tol = maxp.grad_tol;
  db.push_back(adap);
}

// ------------------------------------------------------------------ neural-network ops

// batch_norm: inputs (x, running_mean, running_var, weight, bias); outputs y and, when
// given, the running stats after the call (they are updated in place in training).
// softmax(q k^T * scale + mask) v in float64 over the inputs' values, one batch index at a
// time; batch dims of size 1 broadcast, a mask is (L, S) (bool: false = -inf).
std::vector<double> ref_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask, bool causal,
                                  std::optional<double> scale) {
  const std::vector<double> qv = q.to_vector(), kv = k.to_vector(), vv = v.to_vector();
  const std::vector<double> mv = mask.defined() ? mask.to_vector() : std::vector<double>{};
  const int64_t L = q.size(-2), S = k.size(-2), E = q.size(-1), Ev = v.size(-1);
  const int64_t N = L * E == 0 ? 0 : q.numel() / (L * E);
  const int64_t Nk = k.numel() == 0 ? 1 : k.numel() / (S * E);  // 1 (broadcast) or N
  const double sc = scale.value_or(1.0 / std::sqrt(static_cast<double>(E)));
  std::vector<double> out(static_cast<size_t>(N * L * Ev), 0.0), w(static_cast<size_t>(S));
  for (int64_t b = 0; b < N; ++b) {
    const int64_t bk = Nk == 1 ? 0 : b;
    for (int64_t i = 0; i < L; ++i) {
      double mx = -kInfD;
      for (int64_t j = 0; j < S; ++j) {
        double dot = 0;
        for (int64_t e = 0; e < E; ++e) dot += qv[(b * L + i) * E + e] * kv[(bk * S + j) * E + e];
        double x = dot * sc;
        if (causal && j > i) x = -kInfD;
        if (!mv.empty()) x = mask.dtype() == kBool ? (mv[i * S + j] != 0 ? x : -kInfD) : x + mv[i * S + j];
        w[j] = x;
        mx = std::max(mx, x);
      }
      double sum = 0;
      for (int64_t j = 0; j < S; ++j) sum += (w[j] = std::exp(w[j] - mx));
      for (int64_t j = 0; j < S; ++j)
        for (int64_t c = 0; c < Ev; ++c) out[(b * L + i) * Ev + c] += w[j] / sum * vv[(bk * S + j) * Ev + c];
    }
  }
  return out;
}

// An (L, S) bool mask with some true in every row: (i + 2j) % 3 != 0.
Tensor attention_mask_pattern(int64_t L, int64_t S) {
  std::vector<double> m;
  for (int64_t i = 0; i < L; ++i)
    for (int64_t j = 0; j < S; ++j) m.push_back((i + 2 * j) % 3 != 0 ? 1.0 : 0.0);
  return gt(tensor(m, {L * S}, kFloat64).reshape({L, S}), 0.5);
}

Refs ref_batch_norm(const Ts& in, bool training, double momentum, double eps) {
  const Tensor& x = in[0];
  const int64_t B = x.size(0), C = x.size(1), S = x.numel() / std::max<int64_t>(1, B * C);
  const std::vector<double> xv = x.to_vector();
  std::vector<double> mean(C), var_b(C), var_u(C);
  for (int64_t c = 0; c < C; ++c) {
    double m = 0, q = 0;
    for (int64_t i = 0; i < B; ++i)
      for (int64_t j = 0; j < S; ++j) m += xv[(i * C + c) * S + j];
    m /= static_cast<double>(B * S);
    for (int64_t i = 0; i < B; ++i)
      for (int64_t j = 0; j < S; ++j) q += (xv[(i * C + c) * S + j] - m) * (xv[(i * C + c) * S + j] - m);
    mean[c] = m;
    var_b[c] = q / static_cast<double>(B * S);
    var_u[c] = q / static_cast<double>(B * S - 1);
  }
  const bool stats = in[1].defined();
  std::vector<double> rm = stats ? in[1].to_vector() : std::vector<double>(), rv = stats ? in[2].to_vector() : rm;
  const bool batch = training || !stats;
  const std::vector<double> use_m = batch ? mean : rm, use_v = batch ? var_b : rv;
  const std::vector<double> wv = in[3].defined() ? in[3].to_vector() : std::vector<double>(C, 1.0);
  const std::vector<double> bv = in[4].defined() ? in[4].to_vector() : std::vector<double>(C, 0.0);
  std::vector<double> y(xv.size());
  for (int64_t i = 0; i < B; ++i)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t j = 0; j < S; ++j) {
        const size_t k = (i * C + c) * S + j;
        y[k] = (xv[k] - use_m[c]) / std::sqrt(use_v[c] + eps) * wv[c] + bv[c];
      }
  Refs r{{x.sizes(), y}};
  if (stats) {
    if (training)
      for (int64_t c = 0; c < C; ++c) {
        rm[c] = (1 - momentum) * rm[c] + momentum * mean[c];
        rv[c] = (1 - momentum) * rv[c] + momentum * var_u[c];
      }
    r.push_back({in[1].sizes(), rm, false, in[1].dtype()});
    r.push_back({in[2].sizes(), rv, false, in[2].dtype()});
  }
  return r;
}

// cat of `parts` (each with its own row-major values) along d: for each outer index, each
// part's slab in turn.
std::vector<double> ref_cat(const std::vector<std::vector<double>>& parts, const std::vector<int64_t>& slabs,
                            int64_t outer) {
  std::vector<double> out;
  for (int64_t o = 0; o < outer; ++o)
    for (size_t i = 0; i < parts.size(); ++i)
      out.insert(out.end(), parts[i].begin() + o * slabs[i], parts[i].begin() + (o + 1) * slabs[i]);
  return out;
}

void add_nn(std::vector<OpInfo>& db) {
  const auto P = CastPolicy::Passthrough;
  for (bool log : {false, true}) {
    OpInfo e = entry(log ? "log_softmax" : "softmax", "", CastPolicy::Fp32, {0}, [log](DType dt) {
      std::vector<Sample> s;
      auto add = [&](const std::string& desc, const Tensor& x, int64_t dim, bool grad = true) {
        Sample smp = make(
            desc + " dim " + std::to_string(dim), {x},
            [dim, log](const Ts& in) { return Ts{log ? log_softmax(in[0], dim) : softmax(in[0], dim)}; },
            [dim, log](const Ts& in) {
              const int64_t nd = in[0].dim();
              return Refs{
                  {in[0].sizes(), ref::softmax(in[0].to_vector(), in[0].sizes(), nd == 0 ? 0 : (dim + nd) % nd, log)}};
            });
        smp.gradcheck = grad;
        s.push_back(std::move(smp));
      };
      uint64_t seed = 7;
      for (const Shape& shape : std::vector<Shape>{{7}, {4, 5}, {3, 4, 5}, {3, 1, 4}})
        for (int64_t d = -1; d < static_cast<int64_t>(shape.size()); ++d)
          add(shape_str(shape), U(shape, dt, -6, 6, ++seed), d);
      add("(2, 3, 4, 5)", U({2, 3, 4, 5}, dt, -6, 6, ++seed), 2, false);
      add("long rows", U({2, 300}, dt, -6, 6, ++seed), 1, false);
      add("long columns", U({300, 3}, dt, -6, 6, ++seed), 0, false);
      const Tensor base = U({6, 10, 4}, dt, -4, 4, ++seed);
      for (int64_t d = 0; d < 3; ++d) {
        add("transposed", base.transpose(0, 2), d, false);
        add("stepped", base.slice(1, 1, 10, 3), d, false);
      }
      add("transposed (small)", Ut({4, 5}, dt, -4, 4, ++seed), 1);
      add("transposed (small)", Ut({4, 5}, dt, -4, 4, ++seed), 0);
      for (int64_t d = 0; d < 3; ++d) add("permuted", base.permute({1, 2, 0}), d, false);
      for (int64_t d = 0; d < 2; ++d) add("select", base.select(2, 1), d, false);
      add("expanded (dim 0)", U({1, 5}, dt, -3, 3, ++seed).expand({4, 5}), 0);
      for (int64_t d = -1; d < 4; ++d) add("(2, 3, 4, 5) all dims", U({2, 3, 4, 5}, dt, -6, 6, ++seed), d, false);
      for (int64_t d = -1; d < 2; ++d) add("(2, 1000)", U({2, 1000}, dt, -6, 6, ++seed), d, false);
      add("expanded", U({1, 5}, dt, -3, 3, ++seed).expand({4, 5}), 1);
      add("0-d", U({}, dt, -3, 3, ++seed), 0);
      add("empty", U({0, 5}, dt, -3, 3, ++seed), 1);
      add("empty rows", U({3, 0}, dt, -3, 3, ++seed), 1);
      return s;
    });
    // 16-bit gradients carry the rounding of the saved output, the incoming gradient and
    // the result (each 2^-9 / 2^-12 relative).
    e.grad_tol = {{kBFloat16, {0x1p-7, 0x1p-7}}, {kFloat16, {0x1p-10, 0x1p-10}}};
    db.push_back(e);
  }

  OpInfo ln = entry("layer_norm", "", CastPolicy::Fp32, {0, 1, 2}, [](DType dt) {
    std::vector<Sample> s;
    auto add = [&](const std::string& desc, const Tensor& x, const Shape& norm, const Tensor& w, const Tensor& b,
                   bool grad = true) {
      const int64_t n = numel_of(norm);
      Sample smp = make(
          desc + " over " + shape_str(norm), {x, w, b},
          [norm](const Ts& in) { return Ts{layer_norm(in[0], norm, in[1], in[2], 1e-5)}; },
          [n](const Ts& in) {
            return Refs{{in[0].sizes(), ref::layer_norm(in[0], n, in[1], in[2], 1e-5)}};
          },
          acc_of(n, 4.0));
      smp.gradcheck = grad;
      s.push_back(std::move(smp));
    };
    add("affine", U({2, 3, 4}, dt, -2, 2, 1), {3, 4}, U({3, 4}, dt, 0.5, 1.5, 2), U({3, 4}, dt, -1, 1, 3));
    add("affine (larger)", U({4, 3, 8}, dt, -2, 2, 4), {3, 8}, U({3, 8}, dt, 0.5, 1.5, 5), U({3, 8}, dt, -1, 1, 6),
        false);
    add("no affine", U({4, 6}, dt, -2, 2, 7), {6}, Tensor(), Tensor());
    add("no affine (larger)", U({4, 3, 8}, dt, -2, 2, 21), {8}, Tensor(), Tensor(), false);
    add("weight only, transposed input", Ut({6, 5}, dt, -2, 2, 8), {5}, U({5}, dt, 0.5, 1.5, 9), Tensor());
    add("bias only, expanded input", U({1, 5}, dt, -2, 2, 10).expand({3, 5}), {5}, Tensor(), U({5}, dt, -1, 1, 11));
    add("1-d", U({6}, dt, -2, 2, 12), {6}, U({6}, dt, 0.5, 1.5, 13), U({6}, dt, -1, 1, 14));
    add("no rows", U({0, 6}, dt, -2, 2, 15), {6}, U({6}, dt, 0.5, 1.5, 16), U({6}, dt, -1, 1, 17));
    if (is_reduced_float(dt))  // autocast's usual mix: 16-bit activations, float32 parameters
      add("float32 parameters", U({4, 6}, dt, -2, 2, 18), {6}, U({6}, kFloat32, 0.5, 1.5, 19),
          U({6}, kFloat32, -1, 1, 20));
    return s;
  });
  ln.fwd_tol = {{kFloat32, tol_for(kFloat32, 8)}};  // float32 statistics, then the affine map
  ln.grad_tol = {{kFloat32, {2e-4, 2e-4}}, {kBFloat16, {3e-2, 3e-2}}, {kFloat16, {5e-3, 5e-3}}};
  db.push_back(ln);

  // add_layer_norm's outputs both carry gradients and gradcheck differentiates outputs[0]:
  // one variant leads with the normalized rows, the other ("sum") with the sum.
  for (bool sum_first : {false, true}) {
    OpInfo aln = entry(
        "add_layer_norm", sum_first ? "sum" : "", CastPolicy::Passthrough,
        sum_first ? std::vector<int>{0, 1} : std::vector<int>{0, 1, 2, 3}, [sum_first](DType dt) {
          std::vector<Sample> s;
          auto add = [&](const std::string& desc, const Tensor& x, const Tensor& r, const Shape& norm, const Tensor& w,
                         const Tensor& b, bool grad = true) {
            const int64_t n = numel_of(norm);
            const DType out_dt = result_type(x, r);
            Sample smp = make(
                desc + " over " + shape_str(norm), {x, r, w, b},
                [norm, sum_first](const Ts& in) {
                  const auto [sum, y] = add_layer_norm(in[0], in[1], norm, in[2], in[3], 1e-5);
                  return sum_first ? Ts{sum, y} : Ts{y, sum};
                },
                [n, sum_first, out_dt, dt](const Ts& in) {
                  const Shape xs = in[0].sizes();
                  const std::vector<double> xv = in[0].to_vector(), rv = in[1].expand(xs).contiguous().to_vector();
                  std::vector<double> sv(xv.size());
                  for (size_t i = 0; i < xv.size(); ++i) sv[i] = xv[i] + rv[i];
                  RefOut sum{xs, sv}, y{xs, ref::layer_norm(sv, n, in[2], in[3], 1e-5)};
                  if (out_dt != dt) sum.dtype = y.dtype = out_dt;
                  return sum_first ? Refs{sum, y} : Refs{y, sum};
                },
                acc_of(n, 4.0));
            smp.gradcheck = grad;
            s.push_back(std::move(smp));
          };
          add("affine", U({2, 3, 4}, dt, -2, 2, 1), U({2, 3, 4}, dt, -1, 1, 2), {4}, U({4}, dt, 0.5, 1.5, 3),
              U({4}, dt, -1, 1, 4));
          add("position rows", U({2, 3, 4}, dt, -2, 2, 5), U({3, 4}, dt, -1, 1, 6), {4}, U({4}, dt, 0.5, 1.5, 7),
              U({4}, dt, -1, 1, 8));
          add("one residual row over two dims", U({2, 3, 4}, dt, -2, 2, 9), U({3, 4}, dt, -1, 1, 10), {3, 4},
              U({3, 4}, dt, 0.5, 1.5, 11), Tensor());
          add("broadcast residual", U({2, 3, 4}, dt, -2, 2, 12), U({2, 1, 4}, dt, -1, 1, 13), {4}, Tensor(),
              U({4}, dt, -1, 1, 14));
          add("no affine, transposed", Ut({6, 5}, dt, -2, 2, 15), Ut({6, 5}, dt, -1, 1, 16), {5}, Tensor(), Tensor());
          add("larger", U({4, 3, 40}, dt, -2, 2, 17), U({3, 40}, dt, -1, 1, 18), {40}, U({40}, dt, 0.5, 1.5, 19),
              U({40}, dt, -1, 1, 20), false);
          add("no rows", U({0, 6}, dt, -2, 2, 21), U({0, 6}, dt, -1, 1, 22), {6}, U({6}, dt, 0.5, 1.5, 23),
              U({6}, dt, -1, 1, 24));
          if (is_reduced_float(dt))  // autocast's residual stream: float32 plus a 16-bit output
            add("float32 stream", U({4, 6}, kFloat32, -2, 2, 25), U({4, 6}, dt, -1, 1, 26), {6},
                U({6}, kFloat32, 0.5, 1.5, 27), U({6}, kFloat32, -1, 1, 28));
          return s;
        });
    aln.fwd_tol = ln.fwd_tol;
    aln.grad_tol = ln.grad_tol;
    db.push_back(aln);
  }

  // The fused kernel (same batch dims, no mask) and the composite (masks, broadcast batch).
  OpInfo sdpa = entry("scaled_dot_product_attention", "", CastPolicy::LowerPrecision, {0, 1, 2}, [](DType dt) {
    std::vector<Sample> s;
    auto add = [&](const std::string& desc, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask,
                   bool causal, std::optional<double> scale, bool grad = true) {
      const int64_t S = k.size(-2), E = q.size(-1);
      Sample smp = make(
          desc + (causal ? " causal" : ""), {q, k, v, mask},
          [=](const Ts& in) {
            return Ts{scaled_dot_product_attention(in[0], in[1], in[2], in[3], 0.0, causal, scale)};
          },
          [=](const Ts& in) {
            Shape out(in[0].sizes().begin(), in[0].sizes().end() - 1);
            out.push_back(in[2].size(-1));
            return Refs{{out, ref_attention(in[0], in[1], in[2], in[3], causal, scale)}};
          },
          acc_of(std::max(S, E), 4.0));
      smp.gradcheck = grad;
      s.push_back(std::move(smp));
    };
    add("(2, 3, 5, 4) x (2, 3, 6, 4) x (2, 3, 6, 3)", U({2, 3, 5, 4}, dt, -1, 1, 1), U({2, 3, 6, 4}, dt, -1, 1, 2),
        U({2, 3, 6, 3}, dt, -1, 1, 3), Tensor(), true, std::nullopt);
    add("(3, 4, 8) x (3, 7, 8) x (3, 7, 5)", U({3, 4, 8}, dt, -1, 1, 4), U({3, 7, 8}, dt, -1, 1, 5),
        U({3, 7, 5}, dt, -1, 1, 6), Tensor(), false, std::nullopt);
    add("2-d, scale 0.3", U({5, 4}, dt, -2, 2, 7), U({5, 4}, dt, -2, 2, 8), U({5, 6}, dt, -1, 1, 9), Tensor(), true,
        0.3);
    add("more queries than keys", U({1, 7, 4}, dt, -1, 1, 10), U({1, 3, 4}, dt, -1, 1, 11), U({1, 3, 2}, dt, -1, 1, 12),
        Tensor(), true, std::nullopt);
    {  // GPT's views: q, k, v selected from one (B, T, 3, H, hd) projection, permuted to (B, H, T, hd)
      const Tensor heads = U({2, 5, 3, 2, 4}, dt, -1, 1, 13).permute({2, 0, 3, 1, 4});
      add("strided views of one projection", heads.select(0, 0), heads.select(0, 1), heads.select(0, 2), Tensor(), true,
          std::nullopt);
    }
    add("transposed key", U({2, 6, 4}, dt, -1, 1, 14), Ut({2, 6, 4}, dt, -1, 1, 15), U({2, 6, 4}, dt, -1, 1, 16),
        Tensor(), false, std::nullopt);
    add("larger (4, 40, 16)", U({4, 40, 16}, dt, -1, 1, 17), U({4, 40, 16}, dt, -1, 1, 18),
        U({4, 40, 16}, dt, -1, 1, 19), Tensor(), true, std::nullopt, false);
    add("bool mask", U({2, 4, 3}, dt, -1, 1, 20), U({2, 5, 3}, dt, -1, 1, 21), U({2, 5, 2}, dt, -1, 1, 22),
        attention_mask_pattern(4, 5), false, std::nullopt);
    add("float mask", U({2, 4, 3}, dt, -1, 1, 23), U({2, 5, 3}, dt, -1, 1, 24), U({2, 5, 2}, dt, -1, 1, 25),
        U({4, 5}, dt, -1, 1, 26), false, std::nullopt);
    add("broadcast key batch", U({3, 4, 3}, dt, -1, 1, 27), U({1, 5, 3}, dt, -1, 1, 28), U({1, 5, 2}, dt, -1, 1, 29),
        Tensor(), true, std::nullopt);
    add("no queries", U({2, 0, 4}, dt, -1, 1, 30), U({2, 3, 4}, dt, -1, 1, 31), U({2, 3, 2}, dt, -1, 1, 32), Tensor(),
        true, std::nullopt);
    add("no keys", U({2, 3, 4}, dt, -1, 1, 33), U({2, 0, 4}, dt, -1, 1, 34), U({2, 0, 2}, dt, -1, 1, 35), Tensor(),
        false, std::nullopt);
    return s;
  });
  // 16-bit: the weights of rounded scores, times rounded values (a softmax, then a product).
  sdpa.fwd_tol = {{kBFloat16, {0x1p-6, 0x1p-6}}, {kFloat16, {0x1p-9, 0x1p-9}}};
  sdpa.grad_tol = {{kFloat32, {2e-3, 2e-3}}, {kBFloat16, {6e-2, 6e-2}}, {kFloat16, {1e-2, 1e-2}}};
  db.push_back(sdpa);

  OpInfo bn = entry("batch_norm", "", P, {0, 3, 4}, [](DType dt) {
    std::vector<Sample> s;
    // Parameters and running stats stay float32 for 16-bit input (autocast's rule).
    const DType pdt = dt == kFloat64 ? kFloat64 : kFloat32;
    auto add = [&](const std::string& desc, const Tensor& x, bool stats, bool affine, bool training, double momentum,
                   double eps, bool grad = true) {
      const int64_t C = x.size(1);
      const Tensor rm = stats ? U({C}, pdt, -0.5, 0.5, 101) : Tensor(),
                   rv = stats ? U({C}, pdt, 0.5, 1.5, 102) : Tensor();
      const Tensor w = affine ? U({C}, pdt, 0.5, 1.5, 103) : Tensor(), b = affine ? U({C}, pdt, -1, 1, 104) : Tensor();
      Sample smp = make(
          desc + (training ? " training" : " eval") + (stats ? " with running stats" : "") + (affine ? " affine" : ""),
          {x, rm, rv, w, b},
          [=](const Ts& in) {
            // Fresh copies of the running stats: the call updates them in place.
            Tensor m = in[1].defined() ? in[1].clone() : Tensor(), v = in[2].defined() ? in[2].clone() : Tensor();
            Tensor y = batch_norm(in[0], m, v, in[3], in[4], training, momentum, eps);
            return m.defined() ? Ts{y, m, v} : Ts{y};
          },
          [=](const Ts& in) { return ref_batch_norm(in, training, momentum, eps); }, acc_of(x.numel() / C, 4.0));
      smp.gradcheck = grad;
      s.push_back(std::move(smp));
    };
    add("(4, 3, 2, 2)", U({4, 3, 2, 2}, dt, -2, 2, 1), true, true, true, 0.1, 1e-5);
    add("(3, 4, 5)", U({3, 4, 5}, dt, -2, 2, 2), true, true, false, 0.1, 1e-3);
    add("(6, 3)", U({6, 3}, dt, -2, 2, 3), false, false, true, 0.1, 1e-5);
    add("(5, 3)", U({5, 3}, dt, -2, 2, 4), false, true, true, 0.1, 1e-5);
    add("(6, 3) no stats", U({6, 3}, dt, -2, 2, 5), false, false, false, 0.1, 1e-5);
    add("(2, 3, 4) momentum 0.3", U({2, 3, 4}, dt, -2, 2, 6), true, false, true, 0.3, 1e-5);
    add("permuted", U({2, 5, 3}, dt, -2, 2, 7).permute({0, 2, 1}), false, true, true, 0.1, 1e-5);
    add("channels-last", Ucl({2, 3, 3, 2}, dt, -2, 2, 8), true, true, true, 0.1, 1e-5);
    add("channels-last", Ucl({2, 3, 3, 2}, dt, -2, 2, 9), true, true, false, 0.1, 1e-5);
    add("larger", U({4, 3, 5, 2}, dt, -2, 2, 10), true, true, true, 0.1, 1e-5, false);
    add("expanded batch", U({1, 3, 4}, dt, -2, 2, 11).expand({3, 3, 4}), true, true, true, 0.1, 1e-5);
    return s;
  });
  bn.fwd_tol = ln.fwd_tol;
  bn.grad_tol = ln.grad_tol;
  db.push_back(bn);

  db.push_back(entry("dropout", "", P, {0}, [](DType dt) {
    std::vector<Sample> s;
    auto identity = [](const Ts& in) { return Refs{{in[0].sizes(), in[0].to_vector()}}; };
    s.push_back(make(
        "eval p 0.5", {U({4, 5}, dt, -2, 2, 1)}, [](const Ts& in) { return Ts{dropout(in[0], 0.5, false)}; },
        identity));
    s.push_back(make(
        "training p 0", {U({4, 5}, dt, -2, 2, 2)}, [](const Ts& in) { return Ts{dropout(in[0], 0.0, true)}; },
        identity));
    s.push_back(make(
        "eval transposed", {Ut({4, 5}, dt, -2, 2, 3)}, [](const Ts& in) { return Ts{dropout(in[0], 0.5, false)}; },
        identity));
    s.push_back(make(
        "training p 1", {U({4, 5}, dt, -2, 2, 4)}, [](const Ts& in) { return Ts{dropout(in[0], 1.0, true)}; },
        [](const Ts& in) {
          return Refs{{in[0].sizes(), std::vector<double>(in[0].numel(), 0.0)}};
        }));
    // Seeded: a fixed mask, so gradcheck and the layout check see one function of x.
    auto seeded = [](const Ts& in) {
      manual_seed(7);
      return Ts{dropout(in[0], 0.4, true)};
    };
    s.push_back(make("seeded p 0.4", {U({4, 5}, dt, 1, 2, 5)}, seeded, nullptr));
    s.push_back(make("seeded p 0.4 transposed", {Ut({4, 5}, dt, 1, 2, 6)}, seeded, nullptr));
    s.push_back(make("seeded p 0.4 expanded", {U({4, 1}, dt, 1, 2, 7).expand({4, 5})}, seeded, nullptr));
    s.push_back(make("seeded p 0.4 0-d", {U({}, dt, 1, 2, 9)}, seeded, nullptr));
    s.push_back(make("seeded p 0.4 empty", {U({0, 3}, dt, 1, 2, 10)}, seeded, nullptr));
    s.push_back(make(
        "eval 0-d", {U({}, dt, -2, 2, 11)}, [](const Ts& in) { return Ts{dropout(in[0], 0.5, false)}; }, identity));
    s.push_back(make(
        "training p 1 empty", {U({0, 3}, dt, -2, 2, 12)}, [](const Ts& in) { return Ts{dropout(in[0], 1.0, true)}; },
        [](const Ts& in) {
          return Refs{{in[0].sizes(), {}}};
        }));
    // Statistics of one large draw (no zeros in x, so "kept" is "nonzero"): kept fraction
    // (Binomial(20000, 0.7): sd 0.0032), mean of y (E = mean of x, sd ~0.007) and the
    // largest deviation of a kept element from x / (1 - p).
    {
      const double p = 0.3;
      Sample st = make(
          "statistics p 0.3", {U({100, 200}, dt, 1, 2, 8)},
          [p](const Ts& in) {
            manual_seed(11);
            const Tensor y = dropout(in[0], p, true);
            const std::vector<double> xv = in[0].to_vector(), yv = y.to_vector();
            double kept = 0, total = 0, worst = 0;
            for (size_t i = 0; i < yv.size(); ++i) {
              total += yv[i];
              if (yv[i] != 0) {
                kept += 1;
                worst = std::max(worst, std::fabs(yv[i] - xv[i] / (1 - p)));
              }
            }
            const double n = static_cast<double>(yv.size());
            return Ts{tensor({kept / n, total / n, worst}, kFloat64)};
          },
          [p](const Ts& in) {
            const std::vector<double> xv = in[0].to_vector();
            const double mx = std::accumulate(xv.begin(), xv.end(), 0.0) / static_cast<double>(xv.size());
            return Refs{{{3}, {1 - p, mx, 0.0}, false, kFloat64}};
          });
      st.gradcheck = false;
      st.autocast = false;
      st.tol = Tol{0.04, 0};  // >= 5 sd of each statistic; 16-bit rounding of y is < 0.006
      s.push_back(std::move(st));
    }
    return s;
  }));

  OpInfo emb = entry("embedding", "", P, {0}, [](DType dt) {
    std::vector<Sample> s;
    auto add = [&](const std::string& desc, const Tensor& w, const Tensor& idx) {
      s.push_back(make(
          desc, {w, idx}, [](const Ts& in) { return Ts{embedding(in[0], in[1])}; },
          [](const Ts& in) {
            const int64_t D = in[0].size(1);
            const std::vector<double> wv = in[0].to_vector();
            RefOut r{in[1].sizes(), {}};
            r.shape.push_back(D);
            for (int64_t id : int_values(in[1]))
              for (int64_t j = 0; j < D; ++j) r.values.push_back(wv[id * D + j]);
            return Refs{r};
          }));
    };
    const std::vector<int64_t> ids = {3, 0, 9, 3, 5, 1};
    add("int64 indices with repeats", U({10, 7}, dt, -2, 2, 1), ints(ids, {2, 3}));
    add("int32 indices", U({10, 7}, dt, -2, 2, 2), ints(ids, {6}).to(kInt32));
    add("transposed weight", Ut({10, 7}, dt, -2, 2, 3), ints(ids, {3, 2}));
    add("transposed indices", U({10, 7}, dt, -2, 2, 4), ints(ids, {2, 3}).t());
    add("transposed weight and indices", Ut({10, 6}, dt, -2, 2, 8), ints({1, 2, 3, 4, 5, 6}, {2, 3}).t());
    add("stepped indices", U({10, 3}, dt, -2, 2, 5), ints({1, 2, 3, 4, 5, 6, 7, 8}, {8}).slice(0, 0, 8, 2));
    add("0-d index", U({10, 3}, dt, -2, 2, 6), ints({4}, {}));
    add("no indices", U({10, 3}, dt, -2, 2, 7), ints({}, {0}));
    return s;
  });
  emb.fwd_tol = exact_tol();
  db.push_back(emb);

  OpInfo cat_e = entry("cat", "", CastPolicy::Promote, {0, 1, 2}, [](DType dt) {
    std::vector<Sample> s;
    auto add = [&](const std::string& desc, const Ts& parts, int64_t dim) {
      s.push_back(make(
          desc + " dim " + std::to_string(dim), parts, [dim](const Ts& in) { return Ts{cat(in, dim)}; },
          [dim](const Ts& in) {
            const int64_t nd = in[0].dim(), d = (dim + nd) % nd;
            Shape shape = in[0].sizes();
            shape[d] = 0;
            int64_t outer = 1;
            for (int64_t k = 0; k < d; ++k) outer *= shape[k];
            std::vector<std::vector<double>> vals;
            std::vector<int64_t> slabs;
            for (const Tensor& t : in) {
              shape[d] += t.size(d);
              vals.push_back(t.to_vector());
              slabs.push_back(outer == 0 ? 0 : t.numel() / outer);
            }
            return Refs{{shape, ref_cat(vals, slabs, outer)}};
          }));
    };
    uint64_t seed = 30;
    for (int64_t d : {0, 1, 2}) {
      Shape sb = {2, 3, 2};
      sb[d] = 1;
      const Tensor a = U({2, 3, 2}, dt, -2, 2, ++seed);
      const Ts parts = {a, U(sb, dt, -2, 2, ++seed), U({2, 3, 2}, dt, -2, 2, ++seed)};
      add("three inputs", parts, d);
      add("three inputs", parts, d - 3);  // the same dim counted from the end
    }
    add("negative", {U({2, 3}, dt, -2, 2, ++seed), U({2, 1}, dt, -2, 2, ++seed)}, -1);
    add("transposed and stepped", {Ut({3, 4}, dt, -2, 2, ++seed), Us({3, 4}, dt, -2, 2, ++seed)}, 0);
    add("transposed and stepped", {Ut({3, 4}, dt, -2, 2, ++seed), Us({3, 2}, dt, -2, 2, ++seed)}, 1);
    add("expanded", {U({1, 3}, dt, -2, 2, ++seed).expand({2, 3}), U({2, 3}, dt, -2, 2, ++seed)}, 1);
    add("with an empty input", {U({2, 3}, dt, -2, 2, ++seed), U({2, 0}, dt, -2, 2, ++seed)}, 1);
    add("single", {U({2, 3}, dt, -2, 2, ++seed)}, 0);
    return s;
  });
  cat_e.fwd_tol = exact_tol();
  db.push_back(cat_e);

  OpInfo stack_e = entry("stack", "", CastPolicy::Promote, {0, 1, 2}, [](DType dt) {
    std::vector<Sample> s;
    auto add = [&](const std::string& desc, const Ts& parts, int64_t dim) {
      s.push_back(make(
          desc + " dim " + std::to_string(dim), parts, [dim](const Ts& in) { return Ts{stack(in, dim)}; },
          [dim](const Ts& in) {
            const int64_t nd = in[0].dim() + 1, d = (dim + nd) % nd;
            Shape shape = in[0].sizes();
            shape.insert(shape.begin() + d, static_cast<int64_t>(in.size()));
            int64_t outer = 1;
            for (int64_t k = 0; k < d; ++k) outer *= shape[k];
            std::vector<std::vector<double>> vals;
            std::vector<int64_t> slabs;
            for (const Tensor& t : in) {
              vals.push_back(t.to_vector());
              slabs.push_back(outer == 0 ? 0 : t.numel() / outer);
            }
            return Refs{{shape, ref_cat(vals, slabs, outer)}};
          }));
    };
    uint64_t seed = 50;
    for (int64_t d : {0, 1, 2, -1}) add("two inputs", {U({2, 3}, dt, -2, 2, ++seed), U({2, 3}, dt, -2, 2, ++seed)}, d);
    add("three inputs", {U({3}, dt, -2, 2, ++seed), U({3}, dt, -2, 2, ++seed), U({3}, dt, -2, 2, ++seed)}, 1);
    add("transposed and stepped", {Ut({3, 4}, dt, -2, 2, ++seed), Us({3, 4}, dt, -2, 2, ++seed)}, 1);
    add("0-d", {U({}, dt, -2, 2, ++seed), U({}, dt, -2, 2, ++seed)}, 0);
    add("empty", {U({0, 2}, dt, -2, 2, ++seed), U({0, 2}, dt, -2, 2, ++seed)}, 1);
    return s;
  });
  stack_e.fwd_tol = exact_tol();
  db.push_back(stack_e);
}

// ------------------------------------------------------------------ losses

const char* red_name(Reduction r) { return r == kNone ? "none" : r == kMean ? "mean" : "sum"; }

// The class-index loss reference (references.h) on a sample's logits, targets and weights.
RefOut ref_class_loss(const Tensor& x, const Tensor& t, const Tensor& w, int64_t ignore, Reduction red, double eps,
                      bool nll) {
  const std::vector<double> wv = w.defined() ? w.to_vector() : std::vector<double>();
  return {red == kNone ? t.sizes() : Shape{},
          ref::class_loss(x.to_vector(), x.sizes(), int_values(t), wv, ignore, red, eps, nll)};
}

RefOut reduce_ref(const Shape& shape, std::vector<double> v, Reduction red) {
  if (red == kNone) return {shape, v};
  const double total = std::accumulate(v.begin(), v.end(), 0.0);
  return {{}, {red == kSum ? total : total / static_cast<double>(v.size())}};
}

double bce_ref(double x, double t, double w, double pw) {
  const double s = 1 / (1 + std::exp(-x));
  return -w * (pw * t * std::log(s) + (1 - t) * std::log(1 - s));
}

void add_losses(std::vector<OpInfo>& db) {
  const auto F = CastPolicy::Fp32;
  const std::vector<Reduction> reds = {kNone, kMean, kSum};
  for (bool nll : {false, true}) {
    OpInfo e = entry(nll ? "nll_loss" : "cross_entropy", "", F, {0}, [nll, reds](DType dt) {
      std::vector<Sample> s;
      auto add = [&](const std::string& desc, const Tensor& x, const Tensor& t, const Tensor& w, int64_t ignore,
                     Reduction red, double eps) {
        if (nll) eps = 0;
        s.push_back(make(
            desc + " " + red_name(red) + (w.defined() ? " weighted" : "") + " ignore " + std::to_string(ignore) +
                (eps > 0 ? " smoothing " + std::to_string(eps) : ""),
            {x, t, w},
            [=](const Ts& in) {
              return Ts{nll ? nll_loss(in[0], in[1], in[2], ignore, red)
                            : cross_entropy(in[0], in[1], in[2], ignore, red, eps)};
            },
            [=](const Ts& in) { return Refs{ref_class_loss(in[0], in[1], in[2], ignore, red, eps, nll)}; }));
      };
      auto targets = [](const Shape& ts, int64_t classes, int64_t ignore, uint64_t seed) {
        return ints(random_targets(numel_of(ts), classes, ignore, seed), ts);
      };
      const Tensor w5 = U({5}, kFloat32, 0.5, 2, 3);
      for (Reduction red : reds)
        add("(6, 5)", U({6, 5}, dt, -3, 3, 1), targets({6}, 5, -100, 2), Tensor(), -100, red, 0);
      add("(6, 5)", U({6, 5}, dt, -3, 3, 4), targets({6}, 5, -100, 5), w5, -100, kMean, 0);
      add("(6, 5)", U({6, 5}, dt, -3, 3, 6), targets({6}, 5, 2, 7), w5, 2, kSum, 0.2);
      add("spatial (2, 3, 4)", U({2, 3, 4}, dt, -3, 3, 8), targets({2, 4}, 3, -100, 9), U({3}, kFloat32, 0.5, 2, 10),
          -100, kNone, 0.1);
      add("spatial (2, 3, 4)", U({2, 3, 4}, dt, -3, 3, 11), targets({2, 4}, 3, -100, 12), Tensor(), -100, kMean, 0);
      add("unbatched (5)", U({5}, dt, -3, 3, 13), ints({3}, {}), Tensor(), -100, kMean, 0);
      add("unbatched (5)", U({5}, dt, -3, 3, 14), ints({1}, {}), w5, -100, kNone, 0.3);
      add("transposed logits", Ut({5, 6}, dt, -3, 3, 15), targets({5}, 6, -100, 16), U({6}, kFloat32, 0.5, 2, 17), -100,
          kMean, 0.3);
      add("int32 targets", U({5, 7}, dt, -3, 3, 18), targets({5}, 7, -100, 19).to(kInt32), Tensor(), -100, kNone, 0);
      add("stepped targets", U({6, 4}, dt, -3, 3, 20), targets({12}, 4, -100, 21).slice(0, 0, 12, 2), Tensor(), -100,
          kSum, 0.1);
      add("channels-last spatial", Ucl({2, 4, 3, 2}, dt, -3, 3, 22), targets({2, 3, 2}, 4, -100, 23), Tensor(), -100,
          kNone, 0);
      add("expanded logits", U({1, 5}, dt, -3, 3, 26).expand({4, 5}), ints({0, 3, 4, 1}, {4}), w5, -100, kMean, 0.1);
      add("empty", U({0, 4}, dt, -3, 3, 24), ints({}, {0}), Tensor(), -100, kSum, 0);
      add("empty", U({0, 4}, dt, -3, 3, 25), ints({}, {0}), Tensor(), -100, kNone, 0);
      return s;
    });
    e.grad_tol = {{kBFloat16, {0x1p-8, 0x1p-7}}, {kFloat16, {0x1p-11, 0x1p-10}}};
    db.push_back(e);
  }

  OpInfo mse = entry("mse_loss", "", F, {0, 1}, [reds](DType dt) {
    std::vector<Sample> s;
    auto add = [&](const std::string& desc, const Tensor& a, const Tensor& b, Reduction red, bool grad = true) {
      Sample smp = make(
          desc + " " + red_name(red), {a, b}, [red](const Ts& in) { return Ts{mse_loss(in[0], in[1], red)}; },
          [red](const Ts& in) {
            const Shape sh = in[0].sizes();
            const std::vector<double> av = in[0].to_vector(), bv = broadcast_values(in[1], sh);
            std::vector<double> v(av.size());
            for (size_t i = 0; i < v.size(); ++i) v[i] = (av[i] - bv[i]) * (av[i] - bv[i]);
            return Refs{reduce_ref(sh, v, red)};
          },
          red == kNone ? 0.0 : acc_of(a.numel(), 36.0) / (red == kMean ? std::max<double>(1.0, a.numel()) : 1.0));
      smp.gradcheck = grad;
      s.push_back(std::move(smp));
    };
    for (Reduction red : reds) {
      add("same shape", U({3, 4}, dt, -3, 3, 1), U({3, 4}, dt, -3, 3, 2), red);
      add("broadcast target", U({3, 4}, dt, -3, 3, 3), U({1, 4}, dt, -3, 3, 4), red);
      add("transposed and stepped", Ut({4, 5}, dt, -3, 3, 5), Us({4, 5}, dt, -3, 3, 6), red);
      add("several blocks", U({3000}, dt, -3, 3, 7), U({3000}, dt, -3, 3, 8), red, false);
      add("0-d", U({}, dt, -3, 3, 9), U({}, dt, -3, 3, 10), red);
    }
    add("empty (NaN)", U({0, 3}, dt, -3, 3, 11), U({0, 3}, dt, -3, 3, 12), kMean);
    add("empty", U({0, 3}, dt, -3, 3, 13), U({0, 3}, dt, -3, 3, 14), kSum);
    return s;
  });
  db.push_back(mse);

  OpInfo bce = entry("binary_cross_entropy_with_logits", "", F, {0, 1}, [reds](DType dt) {
    std::vector<Sample> s;
    auto add = [&](const std::string& desc, const Tensor& x, const Tensor& t, const Tensor& w, const Tensor& pw,
                   Reduction red, bool grad = true) {
      Sample smp = make(
          desc + " " + red_name(red) + (w.defined() ? " weight" : "") + (pw.defined() ? " pos_weight" : ""),
          {x, t, w, pw},
          [red](const Ts& in) { return Ts{binary_cross_entropy_with_logits(in[0], in[1], in[2], in[3], red)}; },
          [red](const Ts& in) {
            const Shape sh = in[0].sizes();
            const std::vector<double> xv = in[0].to_vector(), tv = broadcast_values(in[1], sh);
            const std::vector<double> wv =
                in[2].defined() ? broadcast_values(in[2], sh) : std::vector<double>(xv.size(), 1.0);
            const std::vector<double> pv =
                in[3].defined() ? broadcast_values(in[3], sh) : std::vector<double>(xv.size(), 1.0);
            std::vector<double> v(xv.size());
            for (size_t i = 0; i < v.size(); ++i) v[i] = bce_ref(xv[i], tv[i], wv[i], pv[i]);
            return Refs{reduce_ref(sh, v, red)};
          });
      smp.gradcheck = grad;
      s.push_back(std::move(smp));
    };
    uint64_t seed = 80;
    for (Reduction red : reds)
      for (int variant = 0; variant < 4; ++variant) {
        const Tensor w = (variant & 1) ? U({6}, dt, 0.5, 2, ++seed) : Tensor();
        const Tensor pw = (variant & 2) ? U({6}, dt, 0.5, 4, ++seed) : Tensor();
        add("(3, 6)", U({3, 6}, dt, -8, 8, seed + 1), U({3, 6}, dt, 0, 1, seed + 2), w, pw, red);
        seed += 2;
      }
    for (Reduction red : reds) {
      add("transposed logits, stepped targets", Ut({5, 4}, dt, -8, 8, seed + 1), Us({5, 4}, dt, 0, 1, seed + 2),
          Tensor(), U({4}, dt, 0.5, 3, seed + 3), red);
      seed += 3;
    }
    add("expanded targets", U({4, 3}, dt, -4, 4, seed + 1), U({1, 3}, dt, 0, 1, seed + 2).expand({4, 3}),
        U({3}, dt, 0.5, 2, seed + 3), Tensor(), kMean);
    seed += 3;
    add("0-d", U({}, dt, -4, 4, seed + 1), U({}, dt, 0, 1, seed + 2), Tensor(), Tensor(), kNone);
    seed += 2;
    add("empty (NaN)", U({0}, dt, -4, 4, seed + 1), U({0}, dt, 0, 1, seed + 2), Tensor(), Tensor(), kMean);
    seed += 2;
    return s;
  });
  db.push_back(bce);
}

}  // namespace

void add_nn_ops_and_losses(std::vector<OpInfo>& db) {
  add_linalg(db);
  add_conv_pool(db);
  add_nn(db);
  add_losses(db);
}

}  // namespace tc::testing::db
