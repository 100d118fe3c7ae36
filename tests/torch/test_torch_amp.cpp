// tc::torch_amp against the real thing: tests/torch/reference.py runs torch.amp.GradScaler("cpu")
// and torch.autocast through the same training loops; this file runs them with libtorch,
// tc::torch_amp::GradScaler and AutocastGuard, and checks the traces agree: identical losses
// (bit for bit), scales, growth trackers, skip decisions, and parameters after every step.
// State dicts go Python -> C++ and C++ -> Python mid-run. Error messages are Python's.
// The Python side needs the interpreter of the torch the adapter was built with
// (TC_TORCH_PYTHON); without it those tests skip and say so.
#include <ATen/autocast_mode.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <thread>
#include <unordered_map>

#include "tensorcast/torch/amp.h"

namespace {

namespace fs = std::filesystem;
namespace F = torch::nn::functional;
using tc::torch_amp::AutocastGuard;
using tc::torch_amp::GradScaler;
using tc::torch_amp::GradScalerOptions;

constexpr int kSteps = 20;
constexpr int kResumeAt = 10;

// Mirrors SCENARIOS in reference.py (the steps with an inf input are in the saved inputs).
struct Scenario {
  const char* name;
  c10::ScalarType dtype;
  const char* optimizer;
  bool clip;
  double init_scale;
  int64_t growth_interval;
};
const Scenario kScenarios[] = {
    {"fp16_sgd_momentum", torch::kFloat16, "sgd_momentum", false, 0x1p24, 3},
    {"fp16_sgd_clip", torch::kFloat16, "sgd", true, 0x1p20, 2},
    {"bf16_adam", torch::kBFloat16, "adam", false, 0x1p16, 2},
    {"fp16_adamw_clip", torch::kFloat16, "adamw", true, 0x1p22, 4},
    {"fp16_two_optimizers", torch::kFloat16, "two_sgd", false, 0x1p24, 3},
};

const char* python() { return TC_TORCH_PYTHON; }
const std::string kScript = std::string(TC_SOURCE_DIR) + "/tests/torch/reference.py";

bool run_python(const std::string& args) {
  const std::string cmd = std::string("'") + python() + "' '" + kScript + "' " + args;
  return std::system(cmd.c_str()) == 0;
}

c10::impl::GenericDict load_dict(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  const std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return torch::pickle_load(bytes).toGenericDict();
}

void save_dict(const c10::impl::GenericDict& dict, const fs::path& path) {
  const std::vector<char> bytes = torch::pickle_save(dict);
  std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

torch::Tensor tensor_at(const c10::impl::GenericDict& d, const char* key) { return d.at(key).toTensor(); }

// Bit-for-bit equality (NaN payloads and signed zeros included).
bool same_bits(const torch::Tensor& a, const torch::Tensor& b) {
  return a.scalar_type() == b.scalar_type() && a.sizes() == b.sizes() &&
         std::memcmp(a.contiguous().data_ptr(), b.contiguous().data_ptr(), a.nbytes()) == 0;
}

struct Trace {
  std::vector<torch::Tensor> loss, params;
  std::vector<double> scale;
  std::vector<int64_t> growth_tracker;
  std::vector<int64_t> skipped;  // optimizers whose step was skipped
};

// torch.optim.Adam/AdamW as Python runs them on the CPU (_single_tensor_adam), op for op: a
// user-defined torch::optim::Optimizer. libtorch's own Adam rounds differently (mul_ + add_
// where Python has lerp_), so it cannot match Python bit for bit (see LibtorchAdamDrifts).
class PythonAdam : public torch::optim::Optimizer {
 public:
  PythonAdam(const std::vector<torch::Tensor>& params, double lr, double weight_decay, bool decoupled)
      : Optimizer({torch::optim::OptimizerParamGroup(params)}, std::make_unique<torch::optim::AdamOptions>(lr)),
        lr_(lr),
        weight_decay_(weight_decay),
        decoupled_(decoupled) {}

  torch::Tensor step(LossClosure = nullptr) override {
    torch::NoGradGuard no_grad;
    constexpr double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
    for (auto& param : param_groups()[0].params()) {
      if (!param.grad().defined()) continue;
      State& st = state_[param.unsafeGetTensorImpl()];
      if (!st.exp_avg.defined()) {
        st.exp_avg = torch::zeros_like(param, torch::MemoryFormat::Preserve);
        st.exp_avg_sq = torch::zeros_like(param, torch::MemoryFormat::Preserve);
      }
      st.step += 1;
      torch::Tensor grad = param.grad();
      if (weight_decay_ != 0) {
        if (decoupled_)
          param.mul_(1 - lr_ * weight_decay_);
        else
          grad = grad.add(param, weight_decay_);
      }
      st.exp_avg.lerp_(grad, 1 - beta1);
      st.exp_avg_sq.mul_(beta2).addcmul_(grad, grad, 1 - beta2);
      const double bias_correction1 = 1 - std::pow(beta1, st.step);
      const double bias_correction2 = 1 - std::pow(beta2, st.step);
      const double step_size = lr_ / bias_correction1;
      const double bias_correction2_sqrt = std::pow(bias_correction2, 0.5);
      const auto denom = (st.exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(eps);
      param.addcdiv_(st.exp_avg, denom, -step_size);
    }
    return {};
  }

 private:
  struct State {
    torch::Tensor exp_avg, exp_avg_sq;
    double step = 0;
  };
  double lr_, weight_decay_;
  bool decoupled_;
  std::unordered_map<const c10::TensorImpl*, State> state_;
};

std::vector<std::unique_ptr<torch::optim::Optimizer>> make_optimizers(const std::string& kind,
                                                                      const std::vector<torch::Tensor>& p) {
  namespace optim = torch::optim;
  std::vector<std::unique_ptr<optim::Optimizer>> opts;
  if (kind == "sgd_momentum")
    opts.push_back(std::make_unique<optim::SGD>(p, optim::SGDOptions(0.01).momentum(0.9).weight_decay(1e-4)));
  else if (kind == "sgd")
    opts.push_back(std::make_unique<optim::SGD>(p, optim::SGDOptions(0.01)));
  else if (kind == "adam")
    opts.push_back(std::make_unique<PythonAdam>(p, 1e-3, 0.0, false));
  else if (kind == "adamw")
    opts.push_back(std::make_unique<PythonAdam>(p, 1e-3, 0.01, true));
  else if (kind == "libtorch_adam")
    opts.push_back(std::make_unique<optim::Adam>(p, optim::AdamOptions(1e-3)));
  else if (kind == "two_sgd") {
    opts.push_back(std::make_unique<optim::SGD>(std::vector<torch::Tensor>{p[0], p[1]}, optim::SGDOptions(0.01)));
    opts.push_back(
        std::make_unique<optim::SGD>(std::vector<torch::Tensor>{p[2], p[3]}, optim::SGDOptions(0.02).momentum(0.5)));
  }
  return opts;
}

// reference.py's run(), line by line.
Trace run(const Scenario& sc, const std::vector<torch::Tensor>& init, const torch::Tensor& x, const torch::Tensor& y,
          GradScaler& scaler, int first, int last, std::vector<torch::Tensor>* params_out = nullptr) {
  std::vector<torch::Tensor> p;
  for (const auto& t : init) p.push_back(t.clone().requires_grad_());
  auto opts = make_optimizers(sc.optimizer, p);
  Trace trace;
  for (int s = first; s < last; ++s) {
    for (auto& o : opts) o->zero_grad();
    torch::Tensor out;
    {
      AutocastGuard autocast(torch::kCPU, sc.dtype);
      auto h = torch::relu(F::linear(x[s], p[0], p[1]));
      out = F::linear(h, p[2], p[3]);
    }
    auto loss = torch::mse_loss(out.to(torch::kFloat), y[s]);
    scaler.scale(loss).backward();
    if (sc.clip) {
      for (auto& o : opts) scaler.unscale_(*o);
      torch::nn::utils::clip_grad_norm_(p, 1.0);
    }
    int64_t skipped = 0;
    for (auto& o : opts) skipped += scaler.step(*o) ? 0 : 1;
    scaler.update();
    trace.loss.push_back(loss.detach());
    trace.scale.push_back(scaler.get_scale());
    trace.growth_tracker.push_back(scaler.get_growth_tracker());
    trace.skipped.push_back(skipped);
    std::vector<torch::Tensor> flat;
    for (const auto& t : p) flat.push_back(t.detach().flatten());
    trace.params.push_back(torch::cat(flat));
  }
  if (params_out) *params_out = p;
  return trace;
}

// Compares a C++ trace with Python's saved one (steps first.. of it); returns the number of
// steps whose parameters are bit-identical.
void expect_same_trace(const Trace& cpp, const c10::impl::GenericDict& py, int first, const std::string& what) {
  const auto loss = tensor_at(py, "loss");
  const auto scale = tensor_at(py, "scale");
  const auto tracker = tensor_at(py, "growth_tracker");
  const auto skipped = tensor_at(py, "skipped");
  const auto params = tensor_at(py, "params");
  ASSERT_EQ(loss.size(0) - first, static_cast<int64_t>(cpp.loss.size())) << what;
  for (size_t i = 0; i < cpp.loss.size(); ++i) {
    const int64_t s = first + static_cast<int64_t>(i);
    SCOPED_TRACE(what + ", step " + std::to_string(s));
    EXPECT_TRUE(same_bits(cpp.loss[i], loss[s])) << cpp.loss[i].item<float>() << " vs " << loss[s].item<float>();
    EXPECT_EQ(cpp.scale[i], scale[s].item<double>());
    EXPECT_EQ(cpp.growth_tracker[i], tracker[s].item<int64_t>());
    EXPECT_EQ(cpp.skipped[i], skipped[s].item<int64_t>());
    EXPECT_TRUE(same_bits(cpp.params[i], params[s]))
        << "max |difference| " << (cpp.params[i] - params[s]).abs().max().item<double>();
  }
}

class TorchAmp : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    torch::set_num_threads(1);
    if (std::strlen(python()) == 0) return;
    dir_ = fs::temp_directory_path() / ("tc_torch_amp_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    traces_ok_ = run_python("traces '" + dir_.string() + "'");
  }
  static void TearDownTestSuite() {
    if (!dir_.empty()) fs::remove_all(dir_);
  }
  void SetUp() override {
    torch::set_num_threads(1);
    if (std::strlen(python()) == 0) GTEST_SKIP() << "no Python with torch configured (TC_TORCH_PYTHON)";
    ASSERT_TRUE(traces_ok_) << "reference.py traces failed (its output is above)";
  }

  static std::vector<torch::Tensor> initial_params(const c10::impl::GenericDict& saved) {
    return {tensor_at(saved, "w1"), tensor_at(saved, "b1"), tensor_at(saved, "w2"), tensor_at(saved, "b2")};
  }
  static GradScaler scaler_for(const Scenario& sc) {
    return GradScaler("cpu", GradScalerOptions().init_scale(sc.init_scale).growth_interval(sc.growth_interval));
  }

  static inline fs::path dir_;
  static inline bool traces_ok_ = false;
};

TEST_F(TorchAmp, TracesEqualPython) {
  for (const Scenario& sc : kScenarios) {
    const auto saved = load_dict(dir_ / (std::string(sc.name) + ".pt"));
    GradScaler scaler = scaler_for(sc);
    const Trace trace = run(sc, initial_params(saved), tensor_at(saved, "x"), tensor_at(saved, "y"), scaler, 0, kSteps);
    expect_same_trace(trace, saved, 0, sc.name);
    // Each scenario must exercise both decisions, or it proves little.
    const int64_t skipped = tensor_at(saved, "skipped").sum().item<int64_t>();
    EXPECT_GT(skipped, 0) << sc.name;
    EXPECT_GT(scaler.steps_taken(), 0) << sc.name;
    EXPECT_EQ(scaler.steps_skipped(), skipped) << sc.name;
    std::printf(
        "[trace] %-20s %-8s autocast, %d iterations: %lld optimizer steps taken, %lld skipped, final scale %g, "
        "params bit-identical at every step: %s\n",
        sc.name, c10::toString(sc.dtype), kSteps, static_cast<long long>(scaler.steps_taken()),
        static_cast<long long>(scaler.steps_skipped()), scaler.get_scale(),
        same_bits(torch::stack(trace.params), tensor_at(saved, "params")) ? "yes" : "NO");
  }
}

// With libtorch's own Adam the scaler's decisions still match Python's step for step; the
// parameters drift by rounding (libtorch's Adam is not Python's op for op), far below
// anything the scale or the skips react to.
TEST_F(TorchAmp, LibtorchAdamDrifts) {
  Scenario sc = kScenarios[2];
  ASSERT_STREQ(sc.name, "bf16_adam");
  sc.optimizer = "libtorch_adam";
  const auto saved = load_dict(dir_ / "bf16_adam.pt");
  GradScaler scaler = scaler_for(sc);
  const Trace trace = run(sc, initial_params(saved), tensor_at(saved, "x"), tensor_at(saved, "y"), scaler, 0, kSteps);
  const auto params = tensor_at(saved, "params");
  double drift = 0;
  for (int s = 0; s < kSteps; ++s) {
    EXPECT_EQ(trace.scale[s], tensor_at(saved, "scale")[s].item<double>()) << s;
    EXPECT_EQ(trace.growth_tracker[s], tensor_at(saved, "growth_tracker")[s].item<int64_t>()) << s;
    EXPECT_EQ(trace.skipped[s], tensor_at(saved, "skipped")[s].item<int64_t>()) << s;
    drift = std::max(drift, ((trace.params[s] - params[s]).abs() / (params[s].abs() + 1e-3)).max().item<double>());
  }
  EXPECT_LT(drift, 1e-5);
  std::printf(
      "[trace] bf16_adam with torch::optim::Adam: scales, trackers, skips identical; parameters within "
      "%.2g (relative) of Python's\n",
      drift);
}

TEST_F(TorchAmp, ResumesFromPythonStateDict) {
  const Scenario& sc = kScenarios[1];  // plain SGD: the optimizer has no state to carry over
  const auto saved = load_dict(dir_ / (std::string(sc.name) + ".pt"));
  // The parameters after step kResumeAt - 1 of Python's run, and Python's scaler state then.
  const auto flat = tensor_at(saved, "params")[kResumeAt - 1];
  std::vector<torch::Tensor> params;
  int64_t offset = 0;
  for (const auto& t : initial_params(saved)) {
    params.push_back(flat.slice(0, offset, offset + t.numel()).view(t.sizes()).clone());
    offset += t.numel();
  }
  GradScaler scaler("cpu");  // the settings come from the file
  scaler.load(dir_ / (std::string(sc.name) + "_state10.pt"));
  EXPECT_EQ(scaler.get_growth_interval(), sc.growth_interval);
  const Trace trace = run(sc, params, tensor_at(saved, "x"), tensor_at(saved, "y"), scaler, kResumeAt, kSteps);
  expect_same_trace(trace, saved, kResumeAt, "resumed in C++ from Python's state");
}

TEST_F(TorchAmp, PythonResumesFromCppStateDict) {
  const Scenario& sc = kScenarios[1];
  const auto saved = load_dict(dir_ / (std::string(sc.name) + ".pt"));
  GradScaler scaler = scaler_for(sc);
  std::vector<torch::Tensor> params;
  run(sc, initial_params(saved), tensor_at(saved, "x"), tensor_at(saved, "y"), scaler, 0, kResumeAt, &params);
  const fs::path scaler_pt = dir_ / "cpp_scaler.pt", params_pt = dir_ / "cpp_params.pt", out = dir_ / "py_resumed.pt";
  scaler.save(scaler_pt);
  c10::impl::GenericDict p(c10::StringType::get(), c10::TensorType::get());
  const char* names[] = {"w1", "b1", "w2", "b2"};
  for (int i = 0; i < 4; ++i) p.insert(names[i], params[i].detach());
  save_dict(p, params_pt);
  ASSERT_TRUE(run_python("resume '" + (dir_ / (std::string(sc.name) + ".pt")).string() + "' '" + scaler_pt.string() +
                         "' '" + params_pt.string() + "' '" + out.string() + "'"));
  const auto resumed = load_dict(out);
  // Python's steps kResumeAt.. from C++'s state equal Python's own uninterrupted run.
  const auto full = tensor_at(saved, "params").slice(0, kResumeAt);
  EXPECT_TRUE(same_bits(tensor_at(resumed, "params"), full));
  EXPECT_TRUE(torch::equal(tensor_at(resumed, "scale"), tensor_at(saved, "scale").slice(0, kResumeAt)));
  EXPECT_TRUE(
      torch::equal(tensor_at(resumed, "growth_tracker"), tensor_at(saved, "growth_tracker").slice(0, kResumeAt)));
}

TEST_F(TorchAmp, MisuseRaisesPythonsMessages) {
  const auto py = load_dict(dir_ / "misuse.pt");
  auto expect = [&](const char* key, const std::function<void()>& fn) {
    const std::string want = py.at(key).toStringRef();
    try {
      fn();
      ADD_FAILURE() << key << ": no error; Python says: " << want;
    } catch (const std::exception& e) {
      EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << key << ": " << e.what() << "\nPython: " << want;
    }
  };
  auto setup = [] {
    auto w = torch::ones({3}, torch::requires_grad());
    return std::make_pair(w, std::make_unique<torch::optim::SGD>(std::vector<torch::Tensor>{w}, 0.1));
  };
  {
    auto [w, opt] = setup();
    GradScaler sc("cpu");
    expect("step_before_scale", [&] { sc.step(*opt); });
    expect("update_before_scale", [&] { sc.update(); });
    sc.scale((w * 2).sum()).backward();
    sc.unscale_(*opt);
    expect("unscale_twice", [&] { sc.unscale_(*opt); });
    sc.step(*opt);
    expect("unscale_after_step", [&] { sc.unscale_(*opt); });
    expect("step_twice", [&] { sc.step(*opt); });
    sc.update();
    expect("update_without_checks", [&] { sc.update(); });
  }
  {
    auto [w, opt] = setup();
    GradScaler sc("cpu");
    sc.scale((w * 2).sum());
    expect("step_without_grads", [&] { sc.step(*opt); });
  }
  {
    auto w16 = torch::ones({3}, torch::dtype(torch::kFloat16).requires_grad(true));
    torch::optim::SGD opt16({w16}, 0.1);
    GradScaler sc("cpu");
    sc.scale((w16 * 2).sum()).backward();
    expect("unscale_fp16", [&] { sc.unscale_(opt16); });
  }
  expect("load_empty", [&] {
    GradScaler("cpu").load_state_dict(c10::impl::GenericDict(c10::StringType::get(), c10::AnyType::get()));
  });
  expect("growth_factor", [&] { GradScaler("cpu", GradScalerOptions().growth_factor(1.0)); });
  expect("backoff_factor", [&] { GradScaler("cpu", GradScalerOptions().backoff_factor(1.0)); });
}

// ------------------------------------------------------------- without Python

TEST(TorchAmpScaler, ExtrasReportAndBound) {
  torch::set_num_threads(1);
  auto w = torch::ones({2, 3}, torch::requires_grad());
  auto b = torch::zeros({2}, torch::requires_grad());
  torch::optim::SGD opt({w, b}, 0.1);
  GradScaler sc("cpu", GradScalerOptions().init_scale(1024).hysteresis(2).min_scale(256).growth_interval(1000));
  torch::OrderedDict<std::string, torch::Tensor> names;
  names.insert("fc.weight", w);
  names.insert("fc.bias", b);
  sc.set_parameter_names(names);
  auto overflow_step = [&] {
    opt.zero_grad();
    sc.scale((w.sum() + b.sum()) * std::numeric_limits<float>::infinity()).backward();
    return sc.step(opt);
  };
  EXPECT_FALSE(overflow_step());
  ASSERT_TRUE(sc.last_step().first_nonfinite.has_value());
  EXPECT_EQ(*sc.last_step().first_nonfinite, "fc.weight (shape [2, 3])");
  EXPECT_EQ(sc.last_step().group, 0);
  EXPECT_EQ(sc.last_step().param, 0);
  sc.update();
  EXPECT_EQ(sc.get_scale(), 1024.0);  // hysteresis 2: the first overflow is tolerated
  EXPECT_EQ(sc.get_hysteresis_tracker(), 1);
  overflow_step();
  sc.update();
  EXPECT_EQ(sc.get_scale(), 512.0);
  overflow_step();
  sc.update();
  EXPECT_EQ(sc.get_scale(), 256.0);
  overflow_step();
  EXPECT_THROW(sc.update(), tc::Error);  // below min_scale without clamp_min_scale
  EXPECT_EQ(sc.get_scale(), 256.0);      // and nothing changed
  EXPECT_EQ(sc.steps_skipped(), 4);
  EXPECT_EQ(sc.steps_taken(), 0);
  // The extras round-trip through the state dict; Python's five keys come first.
  const auto sd = sc.state_dict();
  std::vector<std::string> keys;
  for (const auto& item : sd) keys.push_back(item.key().toStringRef());
  ASSERT_GE(keys.size(), 5u);
  EXPECT_EQ(
      std::vector<std::string>(keys.begin(), keys.begin() + 5),
      (std::vector<std::string>{"scale", "growth_factor", "backoff_factor", "growth_interval", "_growth_tracker"}));
  GradScaler other("cpu");
  other.load_state_dict(sd);
  EXPECT_EQ(other.get_scale(), 256.0);
  EXPECT_EQ(other.steps_skipped(), 4);
  EXPECT_EQ(other.get_hysteresis_tracker(), 0);
}

TEST(TorchAmpScaler, HostileStateDictsChangeNothing) {
  GradScaler sc("cpu", GradScalerOptions().init_scale(4096));
  auto dict_with = [&](const char* key, c10::IValue v) {
    auto d = sc.state_dict();
    d.insert_or_assign(key, std::move(v));
    return d;
  };
  EXPECT_THROW(sc.load_state_dict(dict_with("scale", -1.0)), tc::Error);
  EXPECT_THROW(sc.load_state_dict(dict_with("scale", std::nan(""))), tc::Error);
  EXPECT_THROW(sc.load_state_dict(dict_with("growth_interval", 0.5)), tc::Error);
  EXPECT_THROW(sc.load_state_dict(dict_with("_growth_tracker", int64_t{1} << 40)), tc::Error);
  EXPECT_THROW(sc.load_state_dict(dict_with("backoff_factor", std::string("half"))), tc::Error);
  EXPECT_EQ(sc.get_scale(), 4096.0);
  // A Python dict keeps an int init_scale as an int: accepted.
  sc.load_state_dict(dict_with("scale", int64_t{1024}));
  EXPECT_EQ(sc.get_scale(), 1024.0);
  // Files: missing, not a torch.save file, a tensor instead of a dict.
  const fs::path dir = fs::temp_directory_path() / ("tc_torch_amp_files_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  EXPECT_THROW(sc.load((dir / "missing.pt").string()), tc::Error);
  std::ofstream(dir / "junk.pt") << "not a zip";
  EXPECT_THROW(sc.load((dir / "junk.pt").string()), tc::Error);
  const auto bytes = torch::pickle_save(torch::ones({2}));
  std::ofstream(dir / "tensor.pt", std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  EXPECT_THROW(sc.load((dir / "tensor.pt").string()), tc::Error);
  EXPECT_EQ(sc.get_scale(), 1024.0);
  sc.save((dir / "ok.pt").string());
  GradScaler back("cpu");
  back.load((dir / "ok.pt").string());
  EXPECT_EQ(back.get_scale(), 1024.0);
  fs::remove_all(dir);
}

TEST(TorchAmpAutocast, GuardSetsNestsAndRestores) {
  namespace ac = at::autocast;
  ASSERT_FALSE(ac::is_autocast_enabled(torch::kCPU));
  const auto default_dtype = ac::get_autocast_dtype(torch::kCPU);
  auto a = torch::randn({4, 4}), b = torch::randn({4, 4});
  {
    AutocastGuard outer(torch::kCPU, torch::kFloat16);
    EXPECT_EQ(torch::mm(a, b).scalar_type(), torch::kFloat16);
    {
      AutocastGuard inner(torch::kCPU, std::nullopt, /*enabled=*/false);
      EXPECT_EQ(torch::mm(a, b).scalar_type(), torch::kFloat32);
    }
    EXPECT_TRUE(ac::is_autocast_enabled(torch::kCPU));
    EXPECT_EQ(ac::get_autocast_dtype(torch::kCPU), torch::kFloat16);
    // The state is per thread: another thread sees autocast off, and its guard stays there.
    std::atomic<bool> seen_enabled{true}, seen_in_guard{false};
    std::thread t([&] {
      seen_enabled = ac::is_autocast_enabled(torch::kCPU);
      AutocastGuard g(torch::kCPU, torch::kBFloat16);
      seen_in_guard = torch::mm(a, b).scalar_type() == torch::kBFloat16;
    });
    t.join();
    EXPECT_FALSE(seen_enabled);
    EXPECT_TRUE(seen_in_guard);
    EXPECT_EQ(ac::get_autocast_dtype(torch::kCPU), torch::kFloat16);
  }
  EXPECT_FALSE(ac::is_autocast_enabled(torch::kCPU));
  EXPECT_EQ(ac::get_autocast_dtype(torch::kCPU), default_dtype);
  // An exception unwinding through guards restores everything.
  try {
    AutocastGuard g1(torch::kCPU, torch::kBFloat16, true, /*cache_enabled=*/false);
    AutocastGuard g2(torch::kCPU, torch::kFloat16);
    throw std::runtime_error("boom");
  } catch (const std::runtime_error&) {
  }
  EXPECT_FALSE(ac::is_autocast_enabled(torch::kCPU));
  EXPECT_EQ(ac::get_autocast_dtype(torch::kCPU), default_dtype);
  EXPECT_TRUE(ac::is_autocast_cache_enabled());
  // An unsupported dtype disables autocast with Python's warning instead of failing.
  {
    AutocastGuard g(torch::kCPU, torch::kFloat64);
    EXPECT_FALSE(ac::is_autocast_enabled(torch::kCPU));
    EXPECT_EQ(torch::mm(a, b).scalar_type(), torch::kFloat32);
  }
}

}  // namespace
