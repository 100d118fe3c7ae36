// tc::amp::NumericsReport (see numerics.h): per-tensor fp16 range counts, bf16 update loss
// and the first non-finite tensor of an overflow step.
#include "tensorcast/amp/numerics.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "backend/cpu/loops/amp_kernels.h"
#include "backend/cpu/loops/numerics.h"
#include "tensorcast/autograd_function.h"
#include "tensorcast/error.h"

namespace tc::amp {
namespace {

// Identity whose backward hands the incoming gradient to the report.
struct Watch : autograd::Function<Watch> {
  static constexpr const char* name = "NumericsWatch";
  static Tensor forward(autograd::AutogradContext* ctx, const Tensor& x, NumericsReport* report,
                        const std::string& layer) {
    ctx->saved_data["report"] = report;
    ctx->saved_data["layer"] = layer;
    return x;
  }
  static std::vector<Tensor> backward(autograd::AutogradContext* ctx, std::vector<Tensor> g) {
    auto* report = std::any_cast<NumericsReport*>(ctx->saved_data["report"]);
    report->on_output_grad(std::any_cast<std::string>(ctx->saved_data["layer"]), g[0]);
    return {g[0]};
  }
};

}  // namespace

NumericsReport::NumericsReport(int64_t every) : every_(every) {
  TC_CHECK(every >= 1, "numerics", "every must be >= 1, got ", every);
}

void NumericsReport::begin_step(int64_t step) {
  sampling_ = step % every_ == 0;
  sampled_steps_ += sampling_;
  step_outputs_.clear();
}

Tensor NumericsReport::watch(const Tensor& x, const std::string& layer) {
  if (!x.requires_grad()) return x;
  return Watch::apply(x, this, layer);
}

NumericsReport::TensorStats& NumericsReport::entry(const std::string& name, const char* kind) {
  const std::string key = std::string(kind) + ":" + name;
  auto [it, inserted] = index_.emplace(key, entries_.size());
  if (inserted) {
    entries_.push_back({});
    entries_.back().name = name;
    entries_.back().kind = kind;
  }
  return entries_[it->second];
}

namespace {
void add_counts(NumericsReport::TensorStats& s, const Tensor& t) {
  ++s.samples;
  cpu::accumulate(s, cpu::count_fp16_range(t));
}
}  // namespace

// What the counting kernels read: the tensor itself on the CPU, a copy of a CUDA tensor (a
// diagnostic mode, so a device-to-host copy per sampled tensor is its price).
static Tensor on_host(const Tensor& t) { return t.device().is_cpu() ? t : t.detach().to(Device(kCPU)); }

// The counts do not depend on element order: a channels-last gradient (what convolutions
// produce) is read through its NHWC view, which is contiguous, instead of being copied.
static Tensor in_memory_order(const Tensor& t_any) {
  const Tensor t = on_host(t_any);
  return !t.is_contiguous() && t.is_contiguous(MemoryFormat::ChannelsLast) ? t.permute({0, 2, 3, 1}) : t;
}

void NumericsReport::on_output_grad(const std::string& layer, const Tensor& raw_grad) {
  if (!raw_grad.defined()) return;
  const Tensor grad = in_memory_order(raw_grad);
  step_outputs_.emplace_back(layer, cpu::has_non_finite(grad));
  if (sampling_) add_counts(entry(layer, "output_grad"), grad);
}

void NumericsReport::record_gradients(const Named& params) {
  if (!sampling_) return;
  for (const auto& [name, p] : params)
    if (p.grad().defined()) add_counts(entry(name, "param_grad"), in_memory_order(p.grad()));
}

void NumericsReport::before_update(const Named& params) {
  weights_before_.clear();
  if (!sampling_) return;
  for (const auto& np : params) weights_before_.push_back(np.second.detach().clone());
}

void NumericsReport::after_update(const Named& params) {
  if (!sampling_ || weights_before_.size() != params.size()) return;
  for (size_t i = 0; i < params.size(); ++i) {
    const auto& [name, p] = params[i];
    const Tensor g = p.grad();
    if (!g.defined()) continue;
    TensorStats& s = entry(name, "param_grad");
    const cpu::LostUpdates u =
        cpu::count_lost_bf16_updates(on_host(weights_before_[i]), on_host(p.detach()), on_host(g));
    s.update_total += u.with_grad;
    s.update_lost += u.lost;
  }
  weights_before_.clear();
}

std::string NumericsReport::record_overflow(int64_t step, const Named& params) {
  std::string what;
  for (const auto& [layer, bad] : step_outputs_)
    if (bad) {
      what = "gradient of the output of layer " + layer;
      break;
    }
  if (what.empty())
    for (const auto& [name, p] : params)
      if (p.grad().defined() && cpu::has_non_finite(on_host(p.grad()))) {
        what = "gradient of parameter " + name;
        break;
      }
  if (what.empty()) what = "the loss (every gradient is finite)";
  overflows_.push_back({step, what});
  weights_before_.clear();
  return what;
}

std::vector<NumericsReport::TensorStats> NumericsReport::stats() const {
  // Layer outputs were first seen in backward order: list them forward, then parameters.
  std::vector<TensorStats> out;
  for (auto it = entries_.rbegin(); it != entries_.rend(); ++it)
    if (it->kind == "output_grad") out.push_back(*it);
  for (const auto& e : entries_)
    if (e.kind == "param_grad") out.push_back(e);
  return out;
}

void NumericsReport::record_fp8(const std::string& layer, const fp8::LinearStats& stats) {
  if (!sampling_) return;
  for (int role = 0; role < 3; ++role) {
    const fp8::QuantizationStats& q = stats.roles[static_cast<size_t>(role)];
    if (q.quantizations == 0) continue;
    const std::string tensor(fp8::role_name(static_cast<fp8::LinearState::Role>(role)));
    auto it = std::find_if(fp8_.begin(), fp8_.end(),
                           [&](const Fp8Stats& e) { return e.layer == layer && e.tensor == tensor; });
    if (it == fp8_.end()) it = fp8_.insert(fp8_.end(), Fp8Stats{layer, tensor});
    it->quantizations += q.quantizations;
    it->total += q.total;
    it->saturated += q.saturated;
    it->flushed += q.flushed;
    it->amax = std::max(it->amax, q.amax);
    it->scale_min = q.scale_min;
    it->scale_max = q.scale_max;
  }
}

std::string NumericsReport::table() const {
  std::string out;
  char buf[320];
  std::snprintf(buf, sizeof buf, "%-22s %-11s %10s %8s %8s %9s %8s %9s\n", "tensor", "gradient", "amax", "zero%",
                "flush%", "subnorm%", "ovfl%", "bf16lost%");
  out += buf;
  for (const auto& s : stats()) {
    char lost[32] = "-";
    if (s.kind == "param_grad") std::snprintf(lost, sizeof lost, "%.3f", 100 * s.lost_share());
    std::snprintf(buf, sizeof buf, "%-22s %-11s %10.3g %8.3f %8.3f %9.3f %8.3f %9s\n", s.name.c_str(),
                  s.kind == "param_grad" ? "parameter" : "output", s.amax, 100 * s.share(s.zero),
                  100 * s.share(s.flush), 100 * s.share(s.subnormal), 100 * s.share(s.overflow + s.nonfinite), lost);
    out += buf;
  }
  if (!fp8_.empty()) {
    std::snprintf(buf, sizeof buf, "\n%-22s %-11s %10s %21s %8s %8s\n", "fp8 layer", "tensor", "amax", "scale",
                  "satur%", "flush%");
    out += buf;
    for (const auto& f : fp8_) {
      char scale[48];
      if (f.scale_min == f.scale_max)
        std::snprintf(scale, sizeof scale, "%.4g", f.scale_min);
      else
        std::snprintf(scale, sizeof scale, "%.3g..%.3g", f.scale_min, f.scale_max);
      std::snprintf(buf, sizeof buf, "%-22s %-11s %10.3g %21s %8.3f %8.3f\n", f.layer.c_str(), f.tensor.c_str(), f.amax,
                    scale, 100 * f.share(f.saturated), 100 * f.share(f.flushed));
      out += buf;
    }
  }
  for (const auto& o : overflows_)
    out += "overflow at step " + std::to_string(o.step) + ": " + o.first_nonfinite + "\n";
  return out;
}

}  // namespace tc::amp
