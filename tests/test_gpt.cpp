// CausalSelfAttention and the GPT: attention against a float64 reference written here,
// causality, gradcheck, the parameter count of the default config, and a short bf16
// autocast training run whose loss must fall.
#include <cmath>
#include <cstdio>
#include <optional>
#include <string>

#include "common/testing.h"

using namespace tc;
namespace nn = tc::nn;
using tc::testing::all_close;
using tc::testing::uniform;

namespace {

// softmax(q k^T / sqrt(hd) + causal mask) v per (batch, head), then the projection,
// with plain loops in double.
std::vector<double> reference_attention(const std::vector<double>& x, int64_t B, int64_t T, int64_t C, int64_t H,
                                        const std::vector<double>& wqkv, const std::vector<double>& bqkv,
                                        const std::vector<double>& wp, const std::vector<double>& bp) {
  const int64_t hd = C / H;
  std::vector<double> qkv(B * T * 3 * C), y(B * T * C, 0.0), out(B * T * C);
  for (int64_t r = 0; r < B * T; ++r)
    for (int64_t o = 0; o < 3 * C; ++o) {
      double s = bqkv[o];
      for (int64_t i = 0; i < C; ++i) s += x[r * C + i] * wqkv[o * C + i];
      qkv[r * 3 * C + o] = s;
    }
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t t = 0; t < T; ++t) {
        auto q = [&](int64_t d) { return qkv[(b * T + t) * 3 * C + h * hd + d]; };
        auto k = [&](int64_t s, int64_t d) { return qkv[(b * T + s) * 3 * C + C + h * hd + d]; };
        auto v = [&](int64_t s, int64_t d) { return qkv[(b * T + s) * 3 * C + 2 * C + h * hd + d]; };
        std::vector<double> w(t + 1);
        double mx = -INFINITY, z = 0;
        for (int64_t s = 0; s <= t; ++s) {
          double a = 0;
          for (int64_t d = 0; d < hd; ++d) a += q(d) * k(s, d);
          w[s] = a / std::sqrt(static_cast<double>(hd));
          mx = std::max(mx, w[s]);
        }
        for (auto& e : w) z += (e = std::exp(e - mx));
        for (int64_t d = 0; d < hd; ++d) {
          double acc = 0;
          for (int64_t s = 0; s <= t; ++s) acc += w[s] / z * v(s, d);
          y[(b * T + t) * C + h * hd + d] = acc;
        }
      }
  for (int64_t r = 0; r < B * T; ++r)
    for (int64_t o = 0; o < C; ++o) {
      double s = bp[o];
      for (int64_t i = 0; i < C; ++i) s += y[r * C + i] * wp[o * C + i];
      out[r * C + o] = s;
    }
  return out;
}

}  // namespace

TEST(Attention, MatchesFloat64Reference) {
  tc::manual_seed(1);
  const int64_t B = 2, T = 5, C = 12, H = 3;
  nn::CausalSelfAttention attn(C, H);
  EXPECT_EQ(attn->qkv->weight.sizes(), (Shape{36, 12}));
  EXPECT_EQ(attn->proj->weight.sizes(), (Shape{12, 12}));
  const Tensor x = uniform({B, T, C}, kFloat32, -1, 1, 4);
  const auto ref =
      reference_attention(x.to_vector(), B, T, C, H, attn->qkv->weight.to_vector(), attn->qkv->bias.to_vector(),
                          attn->proj->weight.to_vector(), attn->proj->bias.to_vector());
  EXPECT_TRUE(all_close(attn(x), ref, {2e-6, 2e-5}));
  {  // bf16 autocast: 16-bit matmuls, close to the reference
    tc::amp::AutocastGuard autocast(tc::kCPU, tc::kBFloat16);
    EXPECT_TRUE(all_close(attn(x), ref, {3e-2, 3e-2}));
  }
  attn->to(kFloat64);
  EXPECT_TRUE(all_close(attn(x.to(kFloat64)), ref, {1e-12, 1e-12}));
  // T = 1 and a different T reuse the module (the mask is rebuilt per T)
  EXPECT_EQ(attn(x.to(kFloat64).narrow(1, 0, 1)).sizes(), (Shape{B, 1, C}));
  tc::testing::expect_error([&] { attn(tc::zeros({2, 3, 5}, kFloat64)); }, {"[nn]", "(B, T, 12)", "(2, 3, 5)"});
  tc::testing::expect_error([] { nn::CausalSelfAttention(10, 3); }, {"[nn]", "multiple of num_heads"});
}

TEST(Attention, Gradcheck) {
  // float64: against central differences (gradcheck runs f on float64 inputs, so the
  // module is float64 too).
  tc::manual_seed(2);
  nn::CausalSelfAttention ref(8, 2);
  ref->to(kFloat64);
  const Tensor x64 = uniform({2, 4, 8}, kFloat64, -1, 1, 5).requires_grad_();
  EXPECT_TRUE(tc::testing::gradcheck([&](const std::vector<Tensor>& in) { return ref(in[0]); }, {x64}, {1e-7, 1e-6}));
  ref->zero_grad();
  x64.set_grad(Tensor());
  ref(x64).pow(2.0).sum().backward();
  // float32: the same module's gradients (input and every parameter) match the checked
  // float64 ones.
  tc::manual_seed(2);
  nn::CausalSelfAttention attn(8, 2);
  const Tensor x32 = x64.detach().to(kFloat32).requires_grad_();
  attn(x32).pow(2.0).sum().backward();
  EXPECT_TRUE(all_close(x32.grad(), x64.grad(), {1e-5, 1e-4}));
  auto p32 = attn->named_parameters(), p64 = ref->named_parameters();
  ASSERT_EQ(p32.size(), 4u);
  for (size_t i = 0; i < p32.size(); ++i) {
    ASSERT_TRUE(p32[i].second.grad().defined()) << p32[i].first;
    EXPECT_TRUE(all_close(p32[i].second.grad(), p64[i].second.grad(), {1e-5, 1e-4})) << p32[i].first;
  }
}

TEST(GPT, ParameterCountNamesAndShapes) {
  nn::GPT gpt;  // vocab 256, context 128, 4 layers, 4 heads, width 256
  const int64_t V = 256, P = 128, d = 256, L = 4;
  const int64_t ln = 2 * d;
  const int64_t attn = (d * 3 * d + 3 * d) + (d * d + d);
  const int64_t mlp = (d * 4 * d + 4 * d) + (4 * d * d + d);
  const int64_t expected = V * d + P * d + L * (ln + attn + ln + mlp) + ln + (d * V + V);
  EXPECT_EQ(expected, 3323648);
  EXPECT_EQ(nn::parameter_count(*gpt), expected);
  auto sd = gpt->state_dict();
  for (const char* k :
       {"wte.weight", "wpe.weight", "blocks.0.ln1.weight", "blocks.3.attn.qkv.bias", "blocks.2.attn.proj.weight",
        "blocks.1.mlp.fc.weight", "blocks.1.mlp.proj.bias", "ln_f.bias", "lm_head.weight"})
    EXPECT_TRUE(sd.count(k)) << k;
  EXPECT_EQ(sd.at("blocks.0.mlp.fc.weight").sizes(), (Shape{1024, 256}));
  tc::testing::expect_error([&] { gpt(tc::zeros({1, 129}, kInt64)); }, {"[nn]", "129", "context 128"});
  tc::testing::expect_error([&] { gpt(tc::zeros({1, 4})); }, {"[nn]", "int64"});
}

TEST(GPT, Causality) {
  tc::manual_seed(3);
  nn::GPT gpt(nn::GPTConfig().layers(2).width(32).heads(4).context(16));
  gpt->eval();
  Tensor idx = tc::randint(0, 256, {2, 10});
  const Tensor a = gpt(idx);
  EXPECT_EQ(a.sizes(), (Shape{2, 10, 256}));
  std::vector<int64_t> v(20);
  for (int i = 0; i < 20; ++i) v[i] = static_cast<int64_t>(idx.to_vector()[i]);
  for (int i = 6; i < 10; ++i) v[i] = (v[i] + 17) % 256, v[10 + i] = (v[10 + i] + 99) % 256;  // change the future
  const Tensor b = gpt(tc::tensor(v, {2, 10}));
  EXPECT_TRUE(tc::testing::equal(a.narrow(1, 0, 6), b.narrow(1, 0, 6)));
  EXPECT_FALSE(tc::testing::equal(a.narrow(1, 6, 4), b.narrow(1, 6, 4)));
  // a prefix gives the same logits as the full sequence at those positions
  EXPECT_TRUE(all_close(gpt(idx.narrow(1, 0, 6).contiguous()), a.narrow(1, 0, 6), {1e-5, 1e-5}));
}

// GPT's forward runs each residual add fused into the norm that reads it, and under
// autocast writes the norms' rows in bfloat16 for the next linear: the logits and every
// parameter's gradient are those of its modules called one by one (Block::forward, the
// layer norms in float32 and the linears' own casts), bit for bit, with and without
// autocast, and with dropout in eval mode (the embedding's add fused too).
TEST(GPT, FusedForwardIsTheModulesOneByOne) {
  for (bool autocast : {false, true}) {
    SCOPED_TRACE(autocast ? "bf16 autocast" : "float32");
    tc::manual_seed(7);
    nn::GPT gpt(nn::GPTConfig().layers(3).width(64).heads(4).context(24).dropout(0.1));
    gpt->eval();
    const Tensor idx = tc::randint(0, 256, {3, 24}), target = tc::randint(0, 256, {3 * 24});
    auto step = [&](bool fused) {
      gpt->zero_grad();
      std::optional<amp::AutocastGuard> guard;
      if (autocast) guard.emplace(kCPU, kBFloat16);
      Tensor logits;
      if (fused) {
        logits = gpt(idx);
      } else {
        const Tensor pos = tc::arange(24.0, kInt64);
        Tensor x = gpt->drop(gpt->wte(idx) + gpt->wpe(pos));
        for (size_t i = 0; i < gpt->blocks->size(); ++i) x = gpt->blocks->at<nn::BlockImpl>(i)->forward(x);
        logits = gpt->lm_head(gpt->ln_f(x));
      }
      guard.reset();
      tc::cross_entropy(logits.reshape({3 * 24, 256}).to(kFloat32), target).backward();
      std::vector<Tensor> grads;
      for (const Tensor& p : gpt->parameters()) grads.push_back(p.grad());
      return std::pair{logits.detach(), grads};
    };
    const auto [fl, fg] = step(true);
    const auto [ul, ug] = step(false);
    EXPECT_TRUE(tc::testing::bits_equal(fl, ul));
    ASSERT_EQ(fg.size(), ug.size());
    for (size_t i = 0; i < fg.size(); ++i) EXPECT_TRUE(tc::testing::bits_equal(fg[i], ug[i])) << "parameter " << i;
  }
}

TEST(GPT, TrainsOnRepeatedBytesInBf16Autocast) {
  tc::manual_seed(4);
  const int64_t T = 32, B = 8;
  nn::GPT gpt(nn::GPTConfig().layers(2).width(64).heads(4).context(T));
  tc::optim::AdamW opt(gpt->parameters(), tc::optim::AdamWOptions(3e-3).weight_decay(0.0));
  std::string text;
  while (text.size() < 600) text += "the quick brown fox jumps over the lazy dog. ";
  auto batch = [&](int step, Tensor& x, Tensor& y) {
    std::vector<int64_t> xs, ys;
    for (int64_t b = 0; b < B; ++b) {
      const size_t off = (step * 7 + b * 13) % (text.size() - T - 1);
      for (int64_t t = 0; t < T; ++t) {
        xs.push_back(static_cast<unsigned char>(text[off + t]));
        ys.push_back(static_cast<unsigned char>(text[off + t + 1]));
      }
    }
    x = tc::tensor(xs, {B, T});
    y = tc::tensor(ys, {B * T});
  };
  double first = 0, last = 0;
  const int steps = 100;
  for (int s = 0; s < steps; ++s) {
    Tensor x, y;
    batch(s, x, y);
    opt.zero_grad();
    Tensor loss;
    {
      tc::amp::AutocastGuard autocast(tc::kCPU, tc::kBFloat16);
      Tensor logits = gpt(x);
      EXPECT_EQ(logits.dtype(), kBFloat16);
      loss = tc::cross_entropy(logits.view({B * T, 256}), y);
    }
    loss.backward();
    nn::utils::clip_grad_norm_(gpt->parameters(), 1.0);
    opt.step();
    const double l = loss.item_double();
    if (s == 0) first = l;
    if (s >= steps - 5) last += l / 5;
  }
  std::printf("GPT bf16: loss %.3f -> %.3f in %d steps\n", first, last, steps);
  EXPECT_GT(first, 4.0);  // about ln(256) = 5.5 at the start, more with N(0, 1) embeddings
  EXPECT_LT(last, 0.5) << "first " << first;
}
