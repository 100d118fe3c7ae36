// tc::torch_amp: torch.amp.GradScaler and torch.autocast for libtorch, on the rules of
// tensorcast/amp/scaler_rules.h (the same code as tc::amp::GradScaler's). Each method follows
// its Python counterpart in torch/amp/grad_scaler.py and autocast_mode.py.
#include "tensorcast/torch/amp.h"

#include <ATen/autocast_mode.h>
#include <caffe2/serialize/inline_container.h>
#include <torch/csrc/jit/serialization/export.h>
#include <torch/csrc/jit/serialization/pickler.h>
#include <torch/cuda.h>
#include <torch/serialize.h>
#include <torch/utils.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <sstream>

namespace tc::torch_amp {
namespace {

constexpr const char* kOp = amp::kScalerOwner;

std::string shape_of(const torch::Tensor& t) {
  std::ostringstream os;
  os << t.sizes();
  return os.str();
}

// read_scaler_state's view of a dict from Python or from a file: Python keeps a float the
// user gave as an int (GradScaler(init_scale=1024)), so reals accept ints, and integers
// accept floats with an integral value.
struct IValueReader {
  const StateDict& dict;

  bool empty() const { return dict.empty(); }
  bool has(const char* key) const { return dict.contains(c10::IValue(key)); }
  double real(const char* key, double lo, double hi) const {
    const double v = number(key);
    TC_CHECK(std::isfinite(v) && v >= lo && v <= hi, kOp, "state dict entry '", key, "' is ", v, ", outside [", lo,
             ", ", hi, "]");
    return v;
  }
  int64_t integer(const char* key, int64_t lo, int64_t hi) const {
    const c10::IValue v = at(key);
    int64_t i = 0;
    if (v.isInt()) {
      i = v.toInt();
    } else if (v.isBool()) {
      i = v.toBool() ? 1 : 0;
    } else {
      const double d = number(key);
      TC_CHECK(std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 0x1p63, kOp, "state dict entry '", key, "' is ",
               d, ", expected an integer");
      i = static_cast<int64_t>(d);
    }
    TC_CHECK(i >= lo && i <= hi, kOp, "state dict entry '", key, "' is ", i, ", outside [", lo, ", ", hi, "]");
    return i;
  }

 private:
  c10::IValue at(const char* key) const {
    TC_CHECK(has(key), kOp, "state dict has no entry '", key, "'");
    return dict.at(c10::IValue(key));
  }
  double number(const char* key) const {
    const c10::IValue v = at(key);
    if (v.isDouble()) return v.toDouble();
    if (v.isInt()) return static_cast<double>(v.toInt());
    if (v.isTensor() && v.toTensor().numel() == 1) return v.toTensor().item<double>();
    TC_FAIL(kOp, "state dict entry '", key, "' is a ", v.tagKind(), ", expected a number");
  }
};

// torch.save's format for a dict of numbers. torch::pickle_save tags every dict with
// torch.jit._pickle.restore_type_tag, which Python's torch.load refuses by default
// (weights_only=True); written untagged, the file is a plain dict to Python.
std::vector<char> save_for_python(const StateDict& dict) {
  std::vector<char> pickle;
  torch::jit::Pickler pickler([&](const char* bytes, size_t n) { pickle.insert(pickle.end(), bytes, bytes + n); },
                              nullptr, nullptr, nullptr, nullptr, /*tag_aggregates=*/false);
  pickler.protocol();
  pickler.pushIValue(dict);
  pickler.stop();
  std::vector<char> archive;
  {
    caffe2::serialize::PyTorchStreamWriter writer([&](const void* bytes, size_t n) {
      archive.insert(archive.end(), static_cast<const char*>(bytes), static_cast<const char*>(bytes) + n);
      return n;
    });
    torch::jit::writeArchiveAndTensors("data", pickle.data(), pickle.size(), pickler.tensorData(), writer);
  }  // the destructor writes the zip's central directory
  return archive;
}

}  // namespace

GradScaler::GradScaler(const std::string& device, GradScalerOptions options)
    : device_(device),
      enabled_(options.enabled()),
      init_scale_(options.init_scale()),
      rule_(amp::rule_of(options)),
      hysteresis_tracker_(static_cast<int32_t>(options.hysteresis())) {
  if (device_ == "cuda" && enabled_ && !torch::cuda::is_available()) {
    TORCH_WARN("torch.cuda.amp.GradScaler is enabled, but CUDA is not available.  Disabling.");
    enabled_ = false;
  }
  if (enabled_) amp::check_scaler_settings(init_scale_, rule_);
}

void GradScaler::lazy_init(const torch::Device& device) {
  scale_ = torch::full({}, init_scale_, torch::dtype(torch::kFloat32).device(device));
  growth_tracker_ = torch::full({}, init_growth_tracker_, torch::dtype(torch::kInt32).device(device));
}

torch::Tensor GradScaler::scale(const torch::Tensor& outputs) {
  if (!enabled_) return outputs;
  TC_CHECK(outputs.defined(), kOp, "scale() got an undefined tensor");
  if (!scale_.defined()) lazy_init(outputs.device());
  return outputs * scale_.to(outputs.device(), /*non_blocking=*/true);
}

std::vector<torch::Tensor> GradScaler::scale(const std::vector<torch::Tensor>& outputs) {
  if (!enabled_) return outputs;
  std::vector<torch::Tensor> scaled;
  scaled.reserve(outputs.size());
  // One copy of the scale per device, as Python's _MultiDeviceReplicator.
  std::vector<std::pair<c10::Device, torch::Tensor>> per_device;
  for (const torch::Tensor& t : outputs) {
    TC_CHECK(t.defined(), kOp, "scale() got an undefined tensor");
    if (!scale_.defined()) lazy_init(t.device());
    auto it = std::find_if(per_device.begin(), per_device.end(), [&](const auto& e) { return e.first == t.device(); });
    if (it == per_device.end()) it = per_device.insert(per_device.end(), {t.device(), scale_.to(t.device(), true)});
    scaled.push_back(t * it->second);
  }
  return scaled;
}

GradScaler::FoundInf GradScaler::unscale_grads(torch::optim::Optimizer& optimizer, const torch::Tensor& inv_scale,
                                               const torch::Tensor& found_inf, bool allow_fp16) const {
  // Grouped by device, then dtype, in first-seen order, as Python's defaultdicts.
  struct Group {
    c10::Device device;
    std::vector<std::pair<c10::ScalarType, std::vector<torch::Tensor>>> by_dtype;
  };
  std::vector<Group> groups;
  for (const auto& group : optimizer.param_groups())
    for (const torch::Tensor& p : group.params()) {
      const torch::Tensor& g = p.grad();
      if (!g.defined()) continue;
      TC_CHECK(allow_fp16 || g.scalar_type() != torch::kFloat16, kOp, "Attempting to unscale FP16 gradients.");
      TC_CHECK(!g.is_sparse(), kOp, "sparse gradients are not supported (parameter of shape ", shape_of(p), ")");
      auto dev = std::find_if(groups.begin(), groups.end(), [&](const Group& e) { return e.device == g.device(); });
      if (dev == groups.end()) dev = groups.insert(groups.end(), Group{g.device(), {}});
      auto dt = std::find_if(dev->by_dtype.begin(), dev->by_dtype.end(),
                             [&](const auto& e) { return e.first == g.scalar_type(); });
      if (dt == dev->by_dtype.end()) dt = dev->by_dtype.insert(dev->by_dtype.end(), {g.scalar_type(), {}});
      dt->second.push_back(g);
    }
  torch::NoGradGuard no_grad;
  FoundInf found;
  for (Group& dev : groups) {
    torch::Tensor dev_found = found_inf.to(dev.device, /*non_blocking=*/true);
    const torch::Tensor dev_inv = inv_scale.to(dev.device, /*non_blocking=*/true);
    for (auto& [dtype, grads] : dev.by_dtype) at::_amp_foreach_non_finite_check_and_unscale_(grads, dev_found, dev_inv);
    found.push_back(dev_found);
  }
  return found;
}

void GradScaler::unscale_(torch::optim::Optimizer& optimizer) {
  if (!enabled_) return;
  amp::check_scale_initialized(scale_.defined(), "unscale_");
  auto& st = per_optimizer_.for_unscale(&optimizer);
  // FP32 division can be imprecise for certain compile options: the reciprocal in FP64, as Python.
  const torch::Tensor inv_scale = scale_.to(torch::kFloat64).reciprocal().to(torch::kFloat32);
  const torch::Tensor found_inf = torch::full({}, 0.0, torch::dtype(torch::kFloat32).device(scale_.device()));
  st.found_inf = unscale_grads(optimizer, inv_scale, found_inf, /*allow_fp16=*/false);
  st.recorded = !st.found_inf.empty();  // an optimizer without gradients records no check
  st.stage = amp::OptState::Unscaled;
}

bool GradScaler::step(torch::optim::Optimizer& optimizer) {
  last_step_ = {};
  if (!enabled_) {
    optimizer.step();
    ++steps_taken_;
    return true;
  }
  amp::check_scale_initialized(scale_.defined(), "step");
  auto& st = per_optimizer_.for_step(&optimizer);
  if (st.stage == amp::OptState::Ready) unscale_(optimizer);
  amp::OptimizerStates<FoundInf>::check_recorded(st);
  double found = 0.0;  // the step's host reads: one per device holding gradients
  for (const torch::Tensor& f : st.found_inf) found += f.item<double>();
  st.stage = amp::OptState::Stepped;
  if (found != 0.0) {
    ++steps_skipped_;
    last_step_.skipped = true;
    report_overflow(optimizer);
    return false;
  }
  optimizer.step();
  ++steps_taken_;
  return true;
}

void GradScaler::report_overflow(const torch::optim::Optimizer& optimizer) {
  // The gradients are unscaled by now; multiplying by inv_scale keeps inf and NaN as they
  // were, so the search finds the tensor the check found.
  const auto& groups = optimizer.param_groups();
  for (size_t gi = 0; gi < groups.size(); ++gi)
    for (size_t pi = 0; pi < groups[gi].params().size(); ++pi) {
      const torch::Tensor& p = groups[gi].params()[pi];
      const torch::Tensor& g = p.grad();
      if (!g.defined() || torch::isfinite(g).all().item<bool>()) continue;
      auto name = names_.find(p.unsafeGetTensorImpl());
      last_step_.group = static_cast<int64_t>(gi);
      last_step_.param = static_cast<int64_t>(pi);
      last_step_.first_nonfinite = (name != names_.end() ? name->second : detail::concat("group ", gi, " param ", pi)) +
                                   " (shape " + shape_of(p) + ")";
      return;
    }
}

void GradScaler::update() {
  if (!enabled_) return;
  amp::check_scale_initialized(scale_.defined(), "update");
  std::vector<torch::Tensor> found_infs;
  per_optimizer_.for_each_found_inf([&](const FoundInf& per_device) {
    for (const torch::Tensor& f : per_device) found_infs.push_back(f.to(scale_.device(), /*non_blocking=*/true));
  });
  torch::Tensor found = found_infs[0];
  for (size_t i = 1; i < found_infs.size(); ++i) found = found + found_infs[i];
  if (rule_.is_pytorch_rule()) {
    // On the device, no host read: exactly Python's update().
    at::_amp_update_scale_(scale_, growth_tracker_, found, rule_.growth_factor, rule_.backoff_factor,
                           rule_.growth_interval);
  } else {
    float scale = scale_.item<float>();
    int32_t growth = growth_tracker_.item<int32_t>();
    int32_t hysteresis = hysteresis_tracker_;
    amp::update_scale(scale, growth, hysteresis, found.item<float>() != 0.0f, rule_);
    scale_.fill_(scale);
    growth_tracker_.fill_(growth);
    hysteresis_tracker_ = hysteresis;
  }
  per_optimizer_.clear();
}

void GradScaler::update(double new_scale) {
  if (!enabled_) return;
  amp::check_scale_initialized(scale_.defined(), "update");
  scale_.fill_(new_scale);
  per_optimizer_.clear();
}

void GradScaler::update(const torch::Tensor& new_scale) {
  if (!enabled_) return;
  amp::check_scale_initialized(scale_.defined(), "update");
  const char* reason =
      "new_scale should be a float or a 1-element torch.cuda.FloatTensor or torch.FloatTensor with "
      "requires_grad=False.";
  TC_CHECK(new_scale.defined() && c10::DeviceTypeName(new_scale.device().type(), /*lower_case=*/true) == device_ &&
               new_scale.numel() == 1 && !new_scale.requires_grad(),
           kOp, reason);
  scale_.copy_(new_scale.reshape({}));
  per_optimizer_.clear();
}

double GradScaler::get_scale() const {
  if (!enabled_) return 1.0;
  return scale_.defined() ? scale_.item<double>() : init_scale_;
}

int64_t GradScaler::get_growth_tracker() const {
  if (!enabled_) return 0;
  return growth_tracker_.defined() ? growth_tracker_.item<int64_t>() : init_growth_tracker_;
}

int64_t GradScaler::get_hysteresis_tracker() const { return enabled_ ? hysteresis_tracker_ : rule_.hysteresis; }

void GradScaler::set_growth_factor(double v) {
  amp::ScaleRule r = rule_;
  r.growth_factor = v;
  amp::check_scaler_settings(init_scale_, r);
  rule_ = r;
}

void GradScaler::set_backoff_factor(double v) {
  amp::ScaleRule r = rule_;
  r.backoff_factor = v;
  amp::check_scaler_settings(init_scale_, r);
  rule_ = r;
}

void GradScaler::set_growth_interval(int64_t v) {
  amp::ScaleRule r = rule_;
  r.growth_interval = v;
  amp::check_scaler_settings(init_scale_, r);
  rule_ = r;
}

void GradScaler::set_parameter_names(const torch::OrderedDict<std::string, torch::Tensor>& named_parameters) {
  names_.clear();
  for (const auto& item : named_parameters) names_[item.value().unsafeGetTensorImpl()] = item.key();
}

amp::ScalerState GradScaler::state() const {
  return {get_scale(), rule_, get_growth_tracker(), get_hysteresis_tracker(), steps_taken_, steps_skipped_};
}

StateDict GradScaler::state_dict() const {
  StateDict dict(c10::StringType::get(), c10::AnyType::get());
  if (!enabled_) return dict;
  amp::write_scaler_state(
      state(), [&](const char* key, double v) { dict.insert(c10::IValue(key), c10::IValue(v)); },
      [&](const char* key, int64_t v) { dict.insert(c10::IValue(key), c10::IValue(v)); });
  return dict;
}

void GradScaler::load_state_dict(const StateDict& state) {
  if (!enabled_) return;
  IValueReader reader{state};
  const amp::ScalerState s = amp::read_scaler_state(reader, this->state());
  init_scale_ = s.scale;
  rule_ = s.rule;
  init_growth_tracker_ = s.growth_tracker;
  hysteresis_tracker_ = static_cast<int32_t>(s.hysteresis_tracker);
  steps_taken_ = s.steps_taken;
  steps_skipped_ = s.steps_skipped;
  if (scale_.defined()) {
    scale_.fill_(s.scale);
    growth_tracker_.fill_(s.growth_tracker);
  }
}

void GradScaler::save(const std::string& path) const {
  const std::vector<char> bytes = save_for_python(state_dict());
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    TC_CHECK(out.good(), kOp, "cannot write '", tmp, "' (for ", path, ")");
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    out.flush();
    TC_CHECK(out.good(), kOp, "writing '", tmp, "' failed (disk full?); '", path, "' is unchanged");
  }
  TC_CHECK(std::rename(tmp.c_str(), path.c_str()) == 0, kOp, "cannot rename '", tmp, "' to '", path, "'");
}

void GradScaler::load(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  TC_CHECK(in.good(), kOp, "cannot open '", path, "'");
  const std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  c10::IValue value;
  try {
    value = torch::pickle_load(bytes);
  } catch (const std::exception& e) {
    TC_FAIL(kOp, "'", path, "' is not a file written by torch.save or GradScaler::save: ", e.what());
  }
  TC_CHECK(value.isGenericDict(), kOp, "'", path, "' holds a ", value.tagKind(), ", expected the dict of state_dict()");
  const StateDict dict = value.toGenericDict();
  for (const auto& item : dict) TC_CHECK(item.key().isString(), kOp, "'", path, "' has a key that is not a string");
  try {
    load_state_dict(dict);
  } catch (const Error& e) {
    throw Error(std::string(e.what()) + " (in '" + path + "')");
  }
}

AutocastGuard::AutocastGuard(c10::DeviceType device_type, std::optional<c10::ScalarType> dtype, bool enabled,
                             std::optional<bool> cache_enabled)
    : device_(device_type) {
  const std::string name = c10::DeviceTypeName(device_type, /*lower_case=*/true);
  TC_CHECK(at::autocast::is_autocast_available(device_type), "autocast",
           "User specified an unsupported autocast device_type '", name, "'");
  const c10::ScalarType fast_dtype = dtype.value_or(at::autocast::get_autocast_dtype(device_type));
  if (enabled) {
    if (device_type == c10::DeviceType::CUDA) {
      if (!torch::cuda::is_available()) {
        TORCH_WARN("CUDA is not available or torch_xla is imported. Disabling autocast.");
        enabled = false;
      }
    } else if (fast_dtype != c10::ScalarType::BFloat16 && fast_dtype != c10::ScalarType::Half) {
      std::string upper = c10::DeviceTypeName(device_type, /*lower_case=*/false);
      TORCH_WARN("In ", upper, " autocast, but the target dtype is not supported. Disabling autocast.\n", upper,
                 " Autocast only supports dtypes of torch.bfloat16, torch.float16 currently.");
      enabled = false;
    }
  }
  prev_cache_enabled_ = at::autocast::is_autocast_cache_enabled();
  prev_enabled_ = at::autocast::is_autocast_enabled(device_type);
  prev_dtype_ = at::autocast::get_autocast_dtype(device_type);
  at::autocast::set_autocast_enabled(device_type, enabled);
  at::autocast::set_autocast_dtype(device_type, fast_dtype);
  at::autocast::increment_nesting();
  at::autocast::set_autocast_cache_enabled(cache_enabled.value_or(prev_cache_enabled_));
}

AutocastGuard::~AutocastGuard() {
  if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
  at::autocast::set_autocast_enabled(device_, prev_enabled_);
  at::autocast::set_autocast_dtype(device_, prev_dtype_);
  at::autocast::set_autocast_cache_enabled(prev_cache_enabled_);
}

}  // namespace tc::torch_amp
