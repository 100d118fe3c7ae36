// tc::nn modules: registration and dotted names, parameter counts, forward against the
// functional ops, PyTorch's default initializations (bounds, moments, seeded
// determinism), train/eval, to(dtype), state_dict round trips and errors, holders,
// and clip_grad_norm_ (alone and between GradScaler::unscale_ and step).
#include <cmath>
#include <functional>
#include <limits>
#include <optional>
#include <set>
#include <sstream>

#include "common/testing.h"

using namespace tc;
namespace nn = tc::nn;
using tc::testing::all_close;
using tc::testing::equal;
using tc::testing::expect_error;
using tc::testing::uniform;

namespace {

nn::Sequential make_cnn() {
  return nn::Sequential(nn::Conv2d(nn::Conv2dOptions(1, 32, 3).padding(1)), nn::ReLU(), nn::MaxPool2d(2),
                        nn::Conv2d(nn::Conv2dOptions(32, 64, 3).padding(1)), nn::ReLU(), nn::MaxPool2d(2),
                        nn::Flatten(), nn::Linear(3136, 128), nn::ReLU(), nn::Linear(128, 10));
}

std::vector<std::string> names_of(const nn::NamedTensors& v) {
  std::vector<std::string> out;
  for (auto& [n, t] : v) out.push_back(n);
  return out;
}

// A user-defined module, written as a libtorch user would.
struct NetImpl : nn::Module {
  NetImpl() : Module("Net") {
    fc1 = register_module("fc1", nn::Linear(4, 8));
    bn = register_module("bn", nn::BatchNorm2d(8));
    fc2 = register_module("fc2", nn::Linear(nn::LinearOptions(8, 3).bias(false)));
    scale = register_parameter("scale", tc::ones({3}));
  }
  Tensor forward(const Tensor& x) {
    Tensor h = fc1->forward(x).relu().unsqueeze(-1).unsqueeze(-1);  // (N, 8, 1, 1)
    return fc2->forward(bn->forward(h).flatten(1)) * scale;
  }
  nn::Linear fc1{nullptr}, fc2{nullptr};
  nn::BatchNorm2d bn{nullptr};
  Tensor scale;
};
TC_MODULE(Net);

}  // namespace

// ---------------------------------------------------------------- registration and names

TEST(NNModule, CnnParameterCountAndNames) {
  auto cnn = make_cnn();
  EXPECT_EQ(nn::parameter_count(*cnn), 421642);
  EXPECT_EQ(cnn->size(), 10u);
  EXPECT_EQ(names_of(cnn->named_parameters()), (std::vector<std::string>{"0.weight", "0.bias", "3.weight", "3.bias",
                                                                         "7.weight", "7.bias", "9.weight", "9.bias"}));
  EXPECT_EQ(cnn->parameters().size(), 8u);
  EXPECT_EQ(cnn->parameters(/*recurse=*/false).size(), 0u);
  EXPECT_EQ(cnn->children().size(), 10u);
  EXPECT_EQ(cnn->named_children()[6].first, "6");
  EXPECT_EQ(cnn->named_children()[6].second->name(), "Flatten");
  auto y = cnn->forward(tc::randn({2, 1, 28, 28}));
  EXPECT_EQ(y.sizes(), (Shape{2, 10}));
  for (auto& p : cnn->parameters()) EXPECT_TRUE(p.requires_grad());
  // the MLP of the CLI
  nn::Sequential mlp(nn::Flatten(), nn::Linear(784, 512), nn::ReLU(), nn::Linear(512, 512), nn::ReLU(),
                     nn::Linear(512, 10));
  EXPECT_EQ(nn::parameter_count(*mlp), 784 * 512 + 512 + 512 * 512 + 512 + 512 * 10 + 10);
}

TEST(NNModule, CustomModuleNamesBuffersAndChildren) {
  Net net;
  EXPECT_EQ(names_of(net->named_parameters()),
            (std::vector<std::string>{"scale", "fc1.weight", "fc1.bias", "bn.weight", "bn.bias", "fc2.weight"}));
  EXPECT_EQ(names_of(net->named_parameters(false)), (std::vector<std::string>{"scale"}));
  EXPECT_EQ(names_of(net->named_buffers()),
            (std::vector<std::string>{"bn.running_mean", "bn.running_var", "bn.num_batches_tracked"}));
  EXPECT_EQ(net->buffers().size(), 3u);
  EXPECT_EQ(net->named_modules().size(), 3u);
  auto sd = net->state_dict();
  EXPECT_EQ(sd.size(), 9u);
  EXPECT_TRUE(sd.count("bn.num_batches_tracked"));
  EXPECT_EQ(sd.at("bn.num_batches_tracked").dtype(), kInt64);
  EXPECT_FALSE(sd.at("fc1.weight").requires_grad());
  // the holder's handles are the registered tensors
  EXPECT_TRUE(net->fc1->weight.is_same(net->named_parameters()[1].second));
  auto y = net->forward(tc::randn({5, 4}));
  EXPECT_EQ(y.sizes(), (Shape{5, 3}));
  EXPECT_EQ(net->bn->num_batches_tracked.item<int64_t>(), 1);
}

TEST(NNModule, RegistrationErrors) {
  nn::Module m("M");
  m.register_parameter("w", tc::zeros({2}));
  expect_error([&] { m.register_parameter("w", tc::zeros({2})); }, {"[nn]", "already has", "'w'"});
  expect_error([&] { m.register_buffer("w", tc::zeros({2})); }, {"[nn]", "'w'"});
  expect_error([&] { m.register_parameter("a.b", tc::zeros({2})); }, {"[nn]", "'a.b'"});
  expect_error([&] { m.register_parameter("i", tc::zeros({2}, kInt64)); }, {"[nn]", "int64", "cannot require grad"});
  m.register_module("fc", nn::Linear(2, 2));
  expect_error([&] { m.register_module("fc", nn::Linear(2, 2)); }, {"[nn]", "'fc'"});
  nn::Linear empty{nullptr};
  expect_error([&] { empty->forward(tc::zeros({1, 2})); }, {"[nn]", "empty ModuleHolder"});
  expect_error([&] { nn::Linear(3, 2)->forward(tc::zeros({1, 4})); }, {"[nn]", "Linear(3, 2)", "(1, 4)"});
  auto seq = make_cnn();
  expect_error([&] { seq->at<nn::LinearImpl>(0); }, {"[nn]", "Conv2d"});
  expect_error([&] { (void)(*seq)[10]; }, {"[nn]", "index 10"});
  EXPECT_EQ(seq->at<nn::LinearImpl>(9)->options.out_features(), 10);
}

TEST(NNModule, PrettyPrint) {
  std::ostringstream os;
  os << *make_cnn();
  const std::string s = os.str();
  EXPECT_NE(s.find("(0): Conv2d(1, 32, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1))"), std::string::npos) << s;
  EXPECT_NE(s.find("(9): Linear(in_features=128, out_features=10, bias=true)"), std::string::npos) << s;
}

// ---------------------------------------------------------------- forward vs functional

TEST(NNModule, ForwardMatchesFunctionalOps) {
  tc::manual_seed(3);
  const Tensor x = uniform({2, 3, 8, 8}, kFloat32);
  const auto tol = tc::testing::tol_for(kFloat32);
  {
    nn::Conv2d conv(nn::Conv2dOptions(3, 4, {3, 2}).stride(2).padding({1, 0}).bias(true));
    EXPECT_EQ(conv->weight.sizes(), (Shape{4, 3, 3, 2}));
    EXPECT_TRUE(equal(conv->forward(x), tc::conv2d(x, conv->weight, conv->bias, {2, 2}, {1, 0})));
  }
  {
    nn::Linear fc(8, 5);
    EXPECT_TRUE(equal(fc(x), tc::linear(x, fc->weight, fc->bias)));
    nn::Linear nb(nn::LinearOptions(8, 5).bias(false));
    EXPECT_FALSE(nb->bias.defined());
    EXPECT_EQ(nb->parameters().size(), 1u);
    EXPECT_TRUE(equal(nb(x), tc::linear(x, nb->weight)));
  }
  EXPECT_TRUE(
      equal(nn::MaxPool2d(nn::MaxPool2dOptions(3).stride(2).padding(1))(x), tc::max_pool2d(x, {3, 3}, {2, 2}, {1, 1})));
  EXPECT_TRUE(equal(nn::AvgPool2d(2)(x), tc::avg_pool2d(x, {2, 2})));
  EXPECT_TRUE(equal(nn::AdaptiveAvgPool2d(1)(x), tc::adaptive_avg_pool2d(x, {1, 1})));
  EXPECT_TRUE(equal(nn::ReLU()(x), tc::relu(x)));
  EXPECT_TRUE(equal(nn::GELU(nn::GELUOptions().approximate("tanh"))(x), tc::gelu(x, "tanh")));
  EXPECT_TRUE(equal(nn::GELU()(x), tc::gelu(x)));
  EXPECT_TRUE(equal(nn::SiLU()(x), tc::silu(x)));
  EXPECT_EQ(nn::Flatten()(x).sizes(), (Shape{2, 192}));
  EXPECT_EQ(nn::Flatten(0, 1)(x).sizes(), (Shape{6, 8, 8}));
  {
    nn::LayerNorm ln(nn::LayerNormOptions({8, 8}).eps(1e-3));
    EXPECT_TRUE(all_close(ln(x), tc::layer_norm(x, {8, 8}, ln->weight, ln->bias, 1e-3), tol));
  }
  {
    nn::Embedding emb(10, 4);
    const Tensor idx = tc::tensor(std::vector<int64_t>{1, 7, 7, 0}, {2, 2});
    const Tensor e = emb(idx);
    EXPECT_EQ(e.sizes(), (Shape{2, 2, 4}));
    EXPECT_TRUE(equal(e, tc::embedding(emb->weight, idx)));
  }
  expect_error([] { nn::GELU(nn::GELUOptions().approximate("fast")); }, {"[nn]", "fast"});
  expect_error([] { nn::Conv2d(nn::Conv2dOptions(3, 4, 3).groups(2)); }, {"[nn]", "divisible"});
}

// ---------------------------------------------------------------- initialization

TEST(NNModule, DefaultInitBoundsMomentsAndSeeding) {
  tc::manual_seed(42);
  nn::Linear fc(400, 300);
  const double bound = 1.0 / 20.0;  // 1 / sqrt(400)
  const auto w = fc->weight.to_vector();
  double mean = 0, sq = 0, lo = 1, hi = -1;
  for (double v : w) mean += v, sq += v * v, lo = std::min(lo, v), hi = std::max(hi, v);
  mean /= w.size();
  const double var = sq / w.size() - mean * mean;
  EXPECT_GE(lo, -bound);
  EXPECT_LE(hi, bound);
  EXPECT_LT(lo, -0.99 * bound);  // the whole range is used
  EXPECT_GT(hi, 0.99 * bound);
  // U(-b, b): mean 0, var b^2/3; 120,000 draws: 5-sigma limits.
  const double n = static_cast<double>(w.size());
  EXPECT_NEAR(mean, 0.0, 5 * bound / std::sqrt(3 * n));
  EXPECT_NEAR(var, bound * bound / 3, 5 * bound * bound * std::sqrt(4.0 / 45.0 / n));
  for (double v : fc->bias.to_vector()) EXPECT_LE(std::abs(v), bound);

  nn::Conv2d conv(nn::Conv2dOptions(8, 16, 3));
  const double cb = 1.0 / std::sqrt(8.0 * 9.0);
  for (double v : conv->weight.to_vector()) EXPECT_LE(std::abs(v), cb);
  for (double v : conv->bias.to_vector()) EXPECT_LE(std::abs(v), cb);

  nn::Embedding emb(200, 100);
  const auto e = emb->weight.to_vector();
  double em = 0, es = 0;
  for (double v : e) em += v, es += v * v;
  em /= e.size();
  es = std::sqrt(es / e.size() - em * em);
  EXPECT_NEAR(em, 0.0, 5 / std::sqrt(20000.0));
  EXPECT_NEAR(es, 1.0, 0.03);

  nn::LayerNorm ln(6);
  EXPECT_TRUE(equal(ln->weight, tc::ones({6})));
  EXPECT_TRUE(equal(ln->bias, tc::zeros({6})));
  nn::BatchNorm2d bn(6);
  EXPECT_TRUE(equal(bn->weight, tc::ones({6})));
  EXPECT_TRUE(equal(bn->running_var, tc::ones({6})));

  // seeded determinism
  tc::manual_seed(7);
  auto a = make_cnn();
  tc::manual_seed(7);
  auto b = make_cnn();
  auto pa = a->parameters(), pb = b->parameters();
  for (size_t i = 0; i < pa.size(); ++i) EXPECT_TRUE(equal(pa[i], pb[i]));
  EXPECT_FALSE(equal(make_cnn()->parameters()[0], pa[0]));
}

TEST(NNModule, InitFunctions) {
  tc::manual_seed(1);
  Tensor t = tc::empty({64, 32});
  nn::init::xavier_uniform_(t, 2.0);
  const double b = 2.0 * std::sqrt(6.0 / 96.0);
  for (double v : t.to_vector()) EXPECT_LE(std::abs(v), b);
  nn::init::kaiming_uniform_(t, 0.0, nn::init::FanMode::FanIn, "relu");
  const double kb = std::sqrt(2.0) * std::sqrt(3.0 / 32.0);
  for (double v : t.to_vector()) EXPECT_LE(std::abs(v), kb);
  nn::init::uniform_(t, 2.0, 3.0);
  for (double v : t.to_vector()) EXPECT_TRUE(v >= 2.0 && v <= 3.0);
  nn::init::constant_(t, 0.5);
  EXPECT_TRUE(equal(t, tc::full({64, 32}, 0.5)));
  // works on leaves that require grad, and on bf16
  Tensor p = tc::zeros({10, 10}, kBFloat16).requires_grad_();
  nn::init::normal_(p, 1.0, 0.0);
  EXPECT_TRUE(equal(p.detach(), tc::ones({10, 10}, kBFloat16)));
  EXPECT_EQ(nn::init::calculate_fan_in_and_fan_out(tc::empty({16, 8, 3, 3})), (std::pair<int64_t, int64_t>{72, 144}));
  expect_error([] { nn::init::calculate_fan_in_and_fan_out(tc::empty({3})); }, {"[nn.init]", "fewer than 2"});
  expect_error([] { nn::init::calculate_gain("swish"); }, {"[nn.init]", "swish"});
}

// ---------------------------------------------------------------- train / eval

TEST(NNModule, TrainEvalDropoutAndBatchNorm) {
  auto seq = nn::Sequential(nn::Dropout(0.5), nn::BatchNorm2d(3));
  EXPECT_TRUE(seq->is_training());
  seq->eval();
  EXPECT_FALSE(seq->is_training());
  EXPECT_FALSE(seq->at<nn::DropoutImpl>(0)->is_training());
  EXPECT_FALSE(seq->at<nn::BatchNorm2dImpl>(1)->is_training());
  seq->train();
  EXPECT_TRUE(seq->at<nn::BatchNorm2dImpl>(1)->is_training());

  tc::manual_seed(5);
  nn::Dropout drop(0.5);
  const Tensor x = tc::ones({1000});
  const Tensor y = drop(x);
  int zeros = 0;
  for (double v : y.to_vector()) {
    EXPECT_TRUE(v == 0.0 || v == 2.0);
    zeros += v == 0.0;
  }
  EXPECT_NEAR(zeros, 500, 80);
  drop->eval();
  EXPECT_TRUE(equal(drop(x), x));

  nn::BatchNorm2d bn(nn::BatchNorm2dOptions(3).momentum(0.5));
  const Tensor in = uniform({4, 3, 2, 2}, kFloat32, -1, 3);
  const Tensor out = bn(in);
  // training: per-channel batch statistics -> mean 0
  for (double m : out.mean({0, 2, 3}).to_vector()) EXPECT_NEAR(m, 0.0, 1e-5);
  const auto bm = in.mean({0, 2, 3}).to_vector();
  const auto rm = bn->running_mean.to_vector();
  for (int c = 0; c < 3; ++c) EXPECT_NEAR(rm[c], 0.5 * bm[c], 1e-6);
  EXPECT_EQ(bn->num_batches_tracked.item<int64_t>(), 1);
  bn->eval();
  const Tensor e = bn(in);
  EXPECT_TRUE(all_close(e, tc::batch_norm(in, bn->running_mean, bn->running_var, bn->weight, bn->bias, false),
                        tc::testing::tol_for(kFloat32)));
  EXPECT_EQ(bn->num_batches_tracked.item<int64_t>(), 1);  // eval does not count

  nn::BatchNorm2d nostats(nn::BatchNorm2dOptions(3).track_running_stats(false).affine(false));
  EXPECT_EQ(nostats->parameters().size(), 0u);
  EXPECT_EQ(nostats->buffers().size(), 0u);
  nostats->eval();
  for (double m : nostats(in).mean({0, 2, 3}).to_vector()) EXPECT_NEAR(m, 0.0, 1e-5);
}

// ---------------------------------------------------------------- to(dtype)

TEST(NNModule, ToBFloat16InPlace) {
  Net net;
  const Tensor w = net->fc1->weight;  // a handle taken before the conversion
  const auto before = w.to_vector();
  auto x = tc::randn({4, 4});
  net->forward(x).sum().backward();
  ASSERT_TRUE(w.grad().defined());
  net->to(kBFloat16);
  EXPECT_EQ(w.dtype(), kBFloat16);  // the same handle sees the new dtype
  EXPECT_TRUE(w.is_same(net->fc1->weight));
  EXPECT_TRUE(w.requires_grad());
  EXPECT_EQ(w.grad().dtype(), kBFloat16);
  const auto after = w.to_vector();
  for (size_t i = 0; i < before.size(); ++i) EXPECT_NEAR(after[i], before[i], std::abs(before[i]) * 0.004 + 1e-30);
  for (auto& [n, t] : net->named_parameters()) EXPECT_EQ(t.dtype(), kBFloat16) << n;
  EXPECT_EQ(net->bn->running_mean.dtype(), kBFloat16);      // as PyTorch: floating buffers too
  EXPECT_EQ(net->bn->num_batches_tracked.dtype(), kInt64);  // integer buffers stay
  // it trains in bf16: gradients reach the same handles in bf16
  net->zero_grad();
  EXPECT_FALSE(w.grad().defined());
  net->forward(x.to(kBFloat16)).sum().backward();
  EXPECT_EQ(w.grad().dtype(), kBFloat16);
  // an optimizer built afterwards holds bf16 parameters with fp32 master copies
  tc::optim::AdamW opt(net->parameters());
  opt.step();
  EXPECT_EQ(w.dtype(), kBFloat16);
  net->to(kFloat32);
  EXPECT_EQ(w.dtype(), kFloat32);
  expect_error([&] { net->to(kInt64); }, {"[nn]", "int64"});
}

// ---------------------------------------------------------------- state_dict

TEST(NNModule, StateDictRoundTripAndErrors) {
  tc::manual_seed(1);
  Net a;
  tc::manual_seed(2);
  Net b;
  a->forward(tc::randn({6, 4}));  // moves a's running stats
  const Tensor bw = b->fc1->weight;
  b->load_state_dict(a->state_dict());
  EXPECT_TRUE(bw.is_same(b->fc1->weight));  // values copied, tensors kept
  for (auto& [k, v] : a->state_dict()) EXPECT_TRUE(equal(b->state_dict().at(k), v)) << k;
  b->eval();
  a->eval();
  const Tensor x = tc::randn({3, 4});
  EXPECT_TRUE(equal(a->forward(x), b->forward(x)));

  auto sd = a->state_dict();
  auto missing = sd;
  missing.erase("fc1.bias");
  expect_error([&] { b->load_state_dict(missing); }, {"[nn]", "missing keys", "'fc1.bias'"});
  b->load_state_dict(missing, /*strict=*/false);
  auto extra = sd;
  extra["fc3.weight"] = tc::zeros({1});
  expect_error([&] { b->load_state_dict(extra); }, {"[nn]", "unexpected keys", "'fc3.weight'"});
  b->load_state_dict(extra, false);
  auto bad_shape = sd;
  bad_shape["fc1.weight"] = tc::zeros({8, 5});
  expect_error([&] { b->load_state_dict(bad_shape, false); }, {"[nn]", "'fc1.weight'", "(8, 4)", "(8, 5)"});
  auto bad_dtype = sd;
  bad_dtype["fc2.weight"] = tc::zeros({3, 8}, kBFloat16);
  const auto before = b->fc1->weight.to_vector();
  bad_dtype["fc1.weight"] = tc::zeros({8, 4});
  expect_error([&] { b->load_state_dict(bad_dtype); }, {"[nn]", "'fc2.weight'", "float32", "bfloat16"});
  EXPECT_EQ(b->fc1->weight.to_vector(), before);  // a failed load writes nothing
}

// ---------------------------------------------------------------- clip_grad_norm_

TEST(NNModule, ClipGradNorm) {
  Tensor a = tc::zeros({3}).requires_grad_(), b = tc::zeros({2, 2}).requires_grad_(),
         c = tc::zeros({2}).requires_grad_();
  a.set_grad(tc::tensor({3.0, 0.0, 4.0}));
  b.set_grad(tc::tensor({0.0, 12.0, 0.0, 0.0}).view({2, 2}));
  // total 2-norm = sqrt(9 + 16 + 144) = 13; c has no gradient and is skipped
  double n = nn::utils::clip_grad_norm_({a, b, c}, 1.0);
  EXPECT_NEAR(n, 13.0, 1e-9);
  const double coef = 1.0 / (13.0 + 1e-6);
  EXPECT_TRUE(all_close(a.grad(), {3 * coef, 0, 4 * coef}, {1e-7, 1e-6}));
  EXPECT_NEAR(nn::utils::clip_grad_norm_({a, b}, 5.0), 1.0, 1e-6);  // below max_norm: untouched
  EXPECT_TRUE(all_close(a.grad(), {3 * coef, 0, 4 * coef}, {1e-7, 1e-6}));
  a.set_grad(tc::tensor({-7.0, 1.0, 2.0}));
  b.set_grad(tc::tensor({0.0, 12.0, 0.0, 0.0}).view({2, 2}));
  EXPECT_NEAR(nn::utils::clip_grad_norm_({a, b}, 100.0, INFINITY), 12.0, 1e-6);
  EXPECT_NEAR(nn::utils::clip_grad_norm_({a, b}, 100.0, 1.0), 22.0, 1e-5);
  // bf16 gradients: the norm is accumulated in float64
  Tensor h = tc::zeros({4096}, kBFloat16).requires_grad_();
  h.set_grad(tc::full({4096}, 0.01, kBFloat16));
  const double exact = std::sqrt(4096.0) * static_cast<double>(tc::BFloat16(0.01f));
  EXPECT_NEAR(nn::utils::clip_grad_norm_(h, 100.0), exact, 1e-9);
  // non-finite: returned as is, gradients untouched, or an error when asked
  a.set_grad(tc::tensor({1.0, INFINITY, 2.0}));
  EXPECT_TRUE(std::isinf(nn::utils::clip_grad_norm_(a, 1.0)));
  EXPECT_TRUE(all_close(a.grad(), {1.0, INFINITY, 2.0}, {0, 0}));
  expect_error([&] { nn::utils::clip_grad_norm_(a, 1.0, 2.0, true); }, {"[clip_grad_norm_]", "non-finite"});
}

TEST(NNModule, ClipGradNormBetweenUnscaleAndStep) {
  // Run the same step twice: (1) fp32, no scaler, clip; (2) GradScaler: scale, backward,
  // unscale_, clip, step. The parameters must agree.
  auto run = [](bool scaled) {
    tc::manual_seed(11);
    nn::Sequential model(nn::Linear(6, 16), nn::GELU(), nn::Linear(16, 3));
    tc::optim::SGD opt(model->parameters(), tc::optim::SGDOptions(0.1));
    tc::amp::GradScaler scaler(tc::amp::GradScalerOptions().init_scale(1024.0));
    const Tensor x = uniform({8, 6}, kFloat32, -1, 1, 3);
    const Tensor target = tc::tensor(std::vector<int64_t>{0, 1, 2, 0, 1, 2, 0, 1});
    Tensor loss = tc::cross_entropy(model->forward(x), target) * 50.0;  // large grads, so clipping acts
    double norm;
    if (scaled) {
      scaler.scale(loss).backward();
      scaler.unscale_(opt);
      norm = nn::utils::clip_grad_norm_(model->parameters(), 0.5);
      EXPECT_TRUE(scaler.step(opt));
      scaler.update();
    } else {
      loss.backward();
      norm = nn::utils::clip_grad_norm_(model->parameters(), 0.5);
      opt.step();
    }
    EXPECT_GT(norm, 0.5);
    return std::pair{model->parameters(), norm};
  };
  auto [plain, n1] = run(false);
  auto [scaled, n2] = run(true);
  EXPECT_NEAR(n1, n2, 1e-5 * n1);
  for (size_t i = 0; i < plain.size(); ++i) EXPECT_TRUE(all_close(scaled[i], plain[i], {1e-6, 1e-5})) << i;
}

// num_batches_tracked counts in int64, exactly above 2^53, and saturates at the largest
// int64 (a loaded checkpoint may hold it; fuzz_checkpoint found the overflow).
TEST(NNModule, BatchNormBatchCountIsExactAndSaturates) {
  nn::BatchNorm2d bn(2);
  const Tensor x = tc::randn({4, 2, 3, 3});
  Tensor count = bn->num_batches_tracked;
  count.data_ptr<int64_t>()[0] = (int64_t{1} << 53) + 1;
  bn(x);
  EXPECT_EQ(count.data_ptr<int64_t>()[0], (int64_t{1} << 53) + 2);
  count.data_ptr<int64_t>()[0] = std::numeric_limits<int64_t>::max();
  bn(x);
  EXPECT_EQ(count.data_ptr<int64_t>()[0], std::numeric_limits<int64_t>::max());
}

TEST(NNModule, FusedSequentialGivesItsModulesBits) {
  // fuse_linear_activation gives each Linear the GELU after it, and the Linear runs
  // linear_activation where that gives the pair's bits (16-bit products: under autocast,
  // or of bfloat16 input), with and without a graph (recorded: the composition, the same
  // gradients); the profile shows which ran. The same Sequential unfused runs its modules
  // one by one. 512 rows: the AMX kernel's epilogue looks the GELU up where the CPU has AMX
  // and the weights' tiles are kept (the later forward passes).
  auto make = [] {
    tc::manual_seed(31);
    return nn::Sequential(nn::Linear(64, 96), nn::GELU(), nn::Linear(96, 64),
                          nn::GELU(nn::GELUOptions().approximate("tanh")), nn::Linear(64, 8));
  };
  nn::Sequential model = make(), unfused = make();
  EXPECT_EQ(nn::fuse_linear_activation(*model), 2u);
  auto ran = [](const std::function<Tensor()>& f, Tensor* out) {
    tc::profiler::Profile prof;
    *out = f();
    prof.stop();
    std::map<std::string, int64_t> calls;
    for (const tc::profiler::OpStat& st : prof.key_averages()) calls[st.name] = st.calls;
    return calls;
  };
  auto count = [](const std::map<std::string, int64_t>& calls, const std::string& op) {
    return calls.count(op) ? calls.at(op) : 0;
  };
  const Tensor x = uniform({512, 64}, kFloat32, -2, 2, 32);
  for (bool grad : {false, true})
    for (int mode = 0; mode < 3; ++mode) {  // float32, autocast bf16, bfloat16 input
      SCOPED_TRACE(std::string(grad ? "with" : "without") + " a graph, mode " + std::to_string(mode));
      std::optional<tc::NoGradGuard> no_grad;
      if (!grad) no_grad.emplace();
      std::optional<tc::amp::AutocastGuard> autocast;
      if (mode == 1) autocast.emplace(tc::kCPU, tc::kBFloat16);
      if (mode == 2) {
        model->to(tc::kBFloat16);
        unfused->to(tc::kBFloat16);
      }
      const Tensor in = mode == 2 ? x.to(tc::kBFloat16) : x;
      for (int pass = 0; pass < 3; ++pass) {
        Tensor fused, separate;
        const auto calls = ran([&] { return model->forward(in); }, &fused);
        const auto separate_calls = ran([&] { return unfused->forward(in); }, &separate);
        EXPECT_TRUE(tc::testing::bits_equal(fused, separate)) << "pass " << pass;
        if (grad) {  // recorded, the op is the composition: the same gradients
          std::vector<Tensor> grads[2];
          for (int which = 0; which < 2; ++which) {
            nn::SequentialImpl& m = which == 0 ? *model : *unfused;
            m.zero_grad();
            (which == 0 ? fused : separate).to(tc::kFloat32).sum().backward();
            for (const Tensor& p : m.parameters()) grads[which].push_back(p.grad().clone());
          }
          for (size_t i = 0; i < grads[0].size(); ++i) EXPECT_TRUE(tc::testing::bits_equal(grads[0][i], grads[1][i]));
        }
        const bool one_op = mode != 0;
        EXPECT_EQ(count(calls, "linear_activation"), one_op ? 2 : 0);
        EXPECT_EQ(count(calls, "gelu"), one_op ? 0 : 2);
        EXPECT_EQ(count(separate_calls, "linear_activation"), 0);  // Sequential fuses nothing by itself
        EXPECT_EQ(count(separate_calls, "gelu"), 2);
      }
      if (mode == 2) {
        model->to(tc::kFloat32);
        unfused->to(tc::kFloat32);
      }
    }
  // Input of the wrong width or dtype: Linear's own errors.
  expect_error([&] { model->forward(uniform({4, 63}, kFloat32, -1, 1, 33)); }, {"Linear(64, 96) expects input"});
  expect_error([&] { model->forward(uniform({4, 64}, tc::kBFloat16, -1, 1, 34)); }, {"[linear]"});
}

// ---- fusing a Linear with its activation

namespace {

// The names of the ops f runs (their profiler records).
std::set<std::string> ops_run(const std::function<void()>& f) {
  profiler::Profile prof;
  f();
  prof.stop();
  std::set<std::string> names;
  for (const profiler::OpStat& st : prof.key_averages()) names.insert(st.name);
  return names;
}

}  // namespace

// A Linear with an activation gives the bits of Linear then the activation module, in
// float32 and bfloat16, under autocast or not, recorded or not; it runs the fused op
// exactly where that gives the same bits (a GELU of a 16-bit product).
TEST(LinearWithActivation, EqualsTheTwoLayersBitForBit) {
  for (const Activation act : {Activation::kRelu, Activation::kGelu, Activation::kGeluTanh})
    for (const DType dt : {kFloat32, kBFloat16})
      for (const bool autocast : {false, true})
        for (const bool record : {false, true}) {
          SCOPED_TRACE(std::string(activation_name(act)) + " " + std::string(dtype_name(dt)) +
                       (autocast ? " autocast" : "") + (record ? " recorded" : ""));
          nn::Linear fused(nn::LinearOptions(48, 96).activation(act)), plain(48, 96);
          plain->load_state_dict(fused->state_dict());
          fused->to(dt);
          plain->to(dt);
          nn::ReLU relu;
          nn::GELU gelu(nn::GELUOptions().approximate(act == Activation::kGeluTanh ? "tanh" : "none"));
          const Tensor x = uniform({64, 48}, dt, -2, 2, 501);
          amp::AutocastGuard guard(kCPU, kBFloat16, autocast);
          std::optional<NoGradGuard> no_grad;
          if (!record) no_grad.emplace();
          Tensor y, want;
          const std::set<std::string> ops = ops_run([&] { y = fused->forward(x); });
          want = act == Activation::kRelu ? relu->forward(plain->forward(x)) : gelu->forward(plain->forward(x));
          EXPECT_TRUE(tc::testing::bits_equal(y, want));
          const bool fusable = act != Activation::kRelu && (autocast || dt == kBFloat16);
          EXPECT_EQ(ops.count("linear_activation"), fusable ? 1u : 0u);
          EXPECT_EQ(ops.count("linear"), fusable ? 0u : 1u);
        }
}

// Sequential runs each module as it is; fuse_linear_activation folds each ReLU and GELU
// into the Linear before it, keeping the other modules' names and the same results.
TEST(Sequential, FusesALinearAndItsActivationOnlyWhenAsked) {
  manual_seed(5);
  nn::Sequential net(nn::Linear(24, 40), nn::GELU(), nn::Linear(40, 40), nn::ReLU(), nn::Flatten(), nn::Linear(40, 8),
                     nn::GELU(nn::GELUOptions().approximate("tanh")));
  net->to(kBFloat16);
  const Tensor x = uniform({32, 24}, kBFloat16, -2, 2, 502);
  NoGradGuard no_grad;
  Tensor before, after;
  const std::set<std::string> unfused = ops_run([&] { before = net->forward(x); });
  EXPECT_EQ(unfused.count("linear_activation"), 0u);
  EXPECT_EQ(unfused.count("gelu"), 1u);
  const StateDict weights = net->state_dict();

  EXPECT_EQ(nn::fuse_linear_activation(*net), 3u);
  std::vector<std::string> names;
  for (const auto& [name, module] : net->named_children()) names.push_back(name);
  EXPECT_EQ(names, (std::vector<std::string>{"0", "2", "4", "5"}));
  EXPECT_EQ(net->size(), 4u);
  EXPECT_EQ(net->at<nn::LinearImpl>(0)->options.activation(), Activation::kGelu);
  EXPECT_EQ(net->at<nn::LinearImpl>(1)->options.activation(), Activation::kRelu);
  EXPECT_EQ(net->at<nn::LinearImpl>(3)->options.activation(), Activation::kGeluTanh);
  std::ostringstream repr;
  repr << *net->ptr(0);
  EXPECT_EQ(repr.str(), "Linear(in_features=24, out_features=40, bias=true, activation=gelu)");
  EXPECT_TRUE(tc::testing::dicts_equal(net->state_dict(), weights));

  const std::set<std::string> fused = ops_run([&] { after = net->forward(x); });
  EXPECT_EQ(fused.count("linear_activation"), 1u);
  EXPECT_EQ(fused.count("gelu"), 0u);
  EXPECT_TRUE(tc::testing::bits_equal(after, before));
  EXPECT_EQ(nn::fuse_linear_activation(*net), 0u);  // nothing left to fuse
}

// A subclass that computes something else, pushed as itself, runs its own forward and is
// not fused; the fuse step goes by the type Sequential runs, never by names or the object's
// class. Pushed as a ReLUImpl, the same object runs ReLU's forward and is fused.
struct HalvedReluImpl : nn::ReLUImpl {
  Tensor forward(const Tensor& input) { return relu(input) * 0.5; }
};

TEST(Sequential, FusesOnlyTheActivationItRuns) {
  manual_seed(6);
  const auto halved = std::make_shared<HalvedReluImpl>();
  nn::Sequential own(nn::Linear(6, 4), halved);
  const Tensor x = uniform({3, 6}, kFloat32, -2, 2, 503);
  NoGradGuard no_grad;
  const Tensor expected = relu(own->at<nn::LinearImpl>(0)->forward(x)) * 0.5;
  EXPECT_EQ(nn::fuse_linear_activation(*own), 0u);
  EXPECT_TRUE(tc::testing::bits_equal(own->forward(x), expected));

  nn::Sequential as_relu(own->at<nn::LinearImpl>(0), std::shared_ptr<nn::ReLUImpl>(halved));
  const Tensor unfused = as_relu->forward(x);
  EXPECT_TRUE(tc::testing::bits_equal(unfused, relu(own->at<nn::LinearImpl>(0)->forward(x))));
  EXPECT_EQ(nn::fuse_linear_activation(*as_relu), 1u);
  EXPECT_EQ(as_relu->at<nn::LinearImpl>(0)->options.activation(), Activation::kRelu);
  EXPECT_TRUE(tc::testing::bits_equal(as_relu->forward(x), unfused));
}
