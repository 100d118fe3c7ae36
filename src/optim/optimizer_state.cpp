// Optimizer::state_dict / load_state_dict and the option-entry helpers.
//
// Names: "param_groups.G.params" (int64 indices of the group's parameters, numbered in
// group order), "param_groups.G.<option>", "state.I.step" (int64), "state.I.master" (the
// float32 copy of a 16-bit parameter, MasterFloat32), "state.I.compensation" (PureKahan),
// "state.I.<buffer>" ("exp_avg", "momentum_buffer", ...; in the parameter's dtype for a
// 16-bit parameter in a Pure mode), "rounding.stochastic" / "rounding.seed", and
// "weight_update" (int64 WeightUpdate; dicts saved before it existed lack it and mean
// MasterFloat32). Everything is a snapshot (cloned), so later steps never change a saved
// dict, and loading copies, so the dict stays the caller's.
#include <charconv>
#include <cstring>
#include <set>

#include "core/tensor_impl.h"
#include "optim/options_io.h"
#include "tensorcast/ops.h"
#include "tensorcast/optim/optimizer.h"

namespace tc::optim {
namespace detail {

double get_double(const StateDict& sd, const std::string& key) { return read_state_double(sd, key, "optim"); }

bool get_bool(const StateDict& sd, const std::string& key) { return get_double(sd, key) != 0.0; }

}  // namespace detail

namespace {

std::string group_prefix(size_t g) { return "param_groups." + std::to_string(g) + "."; }
std::string state_prefix(size_t i) { return "state." + std::to_string(i) + "."; }

// A contiguous copy of a loaded state tensor on its parameter's device (a checkpoint is
// read onto the CPU; the update runs where the parameter lives), sharing nothing with sd.
Tensor owned_copy_on(const Tensor& t, Device device) {
  return t.device() == device ? t.contiguous().clone() : t.to(device).contiguous();
}

// Splits "state.12.exp_avg" into (12, "exp_avg"); false when `key` is not `head`.N.rest.
bool split_key(const std::string& key, const std::string& head, size_t* index, std::string* rest) {
  if (key.compare(0, head.size(), head) != 0) return false;
  const char* b = key.data() + head.size();
  const char* e = key.data() + key.size();
  const auto [ptr, ec] = std::from_chars(b, e, *index);
  if (ec != std::errc() || ptr == b || ptr == e || *ptr != '.') return false;
  *rest = std::string(ptr + 1, e);
  return !rest->empty();
}

void expect_tensor(const Tensor& t, const std::string& key, DType dt, const Shape& shape) {
  TC_CHECK(t.dtype() == dt && t.sizes() == shape, "optim", "state dict entry '", key, "' has dtype ",
           dtype_name(t.dtype()), " and shape ", shape_str(t.sizes()), ", expected ", dtype_name(dt), " and shape ",
           shape_str(shape));
}

}  // namespace

std::vector<std::string> Optimizer::state_tensor_names() const {
  std::vector<std::string> names{"master", "compensation"};
  for (auto& name : known_buffers()) names.push_back(std::move(name));
  return names;
}

StateDict Optimizer::state_dict() const {
  resolve_pending();
  StateDict sd;
  size_t index = 0;
  for (size_t gi = 0; gi < groups_.size(); ++gi) {
    const auto& g = groups_[gi];
    std::vector<int64_t> ids(g.params.size());
    for (size_t k = 0; k < ids.size(); ++k) ids[k] = static_cast<int64_t>(index + k);
    sd[group_prefix(gi) + "params"] = tensor(ids, {static_cast<int64_t>(ids.size())}, kInt64);
    save_options(*g.options, sd, group_prefix(gi));
    for (const auto& p : g.params) {
      auto it = state_.find(p.impl());
      if (it != state_.end() && it->second.step > 0) {
        const ParamState& s = it->second;
        const std::string pre = state_prefix(index);
        sd[pre + "step"] = state_int(s.step);
        if (s.master.defined()) sd[pre + "master"] = s.master.clone();
        if (s.compensation.defined()) sd[pre + "compensation"] = s.compensation.clone();
        for (const auto& [name, t] : s.buffers) sd[pre + name] = t.clone();
      }
      ++index;
    }
  }
  sd["rounding.stochastic"] = state_int(rounding_ == Rounding::Stochastic ? 1 : 0);
  int64_t seed;
  std::memcpy(&seed, &seed_, sizeof seed);  // the full 64 bits, through int64
  sd["rounding.seed"] = state_int(seed);
  sd["weight_update"] = state_int(static_cast<int64_t>(weight_update_));
  return sd;
}

void Optimizer::load_state_dict(const StateDict& sd) {
  resolve_pending();
  std::vector<const Tensor*> params;
  std::vector<size_t> group_of;
  for (size_t gi = 0; gi < groups_.size(); ++gi)
    for (const auto& p : groups_[gi].params) {
      params.push_back(&p);
      group_of.push_back(gi);
    }
  const std::set<std::string> known = [&] {
    auto v = known_buffers();
    return std::set<std::string>(v.begin(), v.end());
  }();

  // Every key must be one this optimizer writes.
  size_t sd_groups = 0;
  std::set<size_t> with_state;
  for (const auto& [key, t] : sd) {
    size_t i;
    std::string rest;
    TC_CHECK(t.defined(), "optim", "state dict entry '", key, "' is an undefined tensor");
    if (split_key(key, "param_groups.", &i, &rest)) {
      sd_groups = std::max(sd_groups, i + 1);
    } else if (split_key(key, "state.", &i, &rest)) {
      TC_CHECK(i < params.size(), "optim", "state dict entry '", key, "' refers to parameter ", i,
               " but the optimizer has ", params.size(), " parameters");
      TC_CHECK(rest == "step" || rest == "master" || rest == "compensation" || known.count(rest), "optim",
               "unexpected key '", key, "' in state dict");
      with_state.insert(i);
    } else {
      TC_CHECK(key == "rounding.stochastic" || key == "rounding.seed" || key == "weight_update", "optim",
               "unexpected key '", key, "' in state dict");
    }
  }
  TC_CHECK(sd_groups == groups_.size(), "optim", "loaded state dict has ", sd_groups,
           " parameter groups but the optimizer has ", groups_.size());
  // The weight update decides the state's dtypes and buffers, so it is the optimizer's
  // setting, checked rather than taken from the dict.
  const auto mode =
      static_cast<WeightUpdate>(sd.count("weight_update") ? read_state_int(sd, "weight_update", "optim", 0, 2) : 0);
  TC_CHECK(mode == weight_update_, "optim", "the state dict was saved with WeightUpdate::", weight_update_name(mode),
           " but this optimizer uses WeightUpdate::", weight_update_name(weight_update_),
           "; call set_weight_update(WeightUpdate::", weight_update_name(mode), ") before loading it");

  // Build everything first, then commit, so a bad dict leaves the optimizer as it was.
  std::vector<std::unique_ptr<OptimizerOptions>> options;
  size_t index = 0;
  for (size_t gi = 0; gi < groups_.size(); ++gi) {
    const std::string pre = group_prefix(gi);
    const Tensor& ids = state_at(sd, pre + "params", "optim");
    const size_t n = groups_[gi].params.size();
    TC_CHECK(ids.dim() == 1 && static_cast<size_t>(ids.numel()) == n, "optim", "parameter group ", gi,
             " of the loaded state dict has ", ids.numel(), " parameters but the optimizer's has ", n);
    const auto v = ids.to_vector();
    for (size_t k = 0; k < n; ++k)
      TC_CHECK(v[k] == static_cast<double>(index + k), "optim", "parameter group ", gi,
               " of the loaded state dict lists parameter ", v[k], " where ", index + k, " was expected");
    index += n;
    for (const auto& [key, t] : sd) {
      size_t i;
      std::string rest;
      if (split_key(key, "param_groups.", &i, &rest) && i == gi && rest != "params") {
        // Unknown option names are caught by comparing with what save_options writes.
        StateDict probe;
        save_options(*groups_[gi].options, probe, pre);
        TC_CHECK(probe.count(key), "optim", "unexpected key '", key, "' in state dict");
      }
    }
    options.push_back(load_options(sd, pre));
    check_options(*options.back());
  }

  std::unordered_map<const TensorImpl*, ParamState> state;
  for (size_t i : with_state) {
    const Tensor& p = *params[i];
    const std::string pre = state_prefix(i);
    const DType sdt = state_dtype(p);
    ParamState s;
    s.step = read_state_int(sd, pre + "step", "optim", 0);
    const bool half = is_reduced_float(p.dtype());
    const bool wants_master = half && mode == WeightUpdate::MasterFloat32;
    const bool wants_comp = half && mode == WeightUpdate::PureKahan;
    const std::string dt_mode =
        ::tc::detail::concat(dtype_name(p.dtype()), " (WeightUpdate::", weight_update_name(mode), ")");
    auto m = sd.find(pre + "master");
    TC_CHECK(wants_master == (m != sd.end()), "optim", "parameter ", i, " has dtype ", dt_mode,
             wants_master ? " but the state dict has no float32 master copy 'state."
                          : " but the state dict has a master copy 'state.",
             i, ".master'");
    if (wants_master) {
      expect_tensor(m->second, pre + "master", kFloat32, p.sizes());
      s.master = owned_copy_on(m->second, p.device());
    }
    auto c = sd.find(pre + "compensation");
    TC_CHECK(wants_comp == (c != sd.end()), "optim", "parameter ", i, " has dtype ", dt_mode,
             wants_comp ? " but the state dict has no Kahan compensation 'state."
                        : " but the state dict has a Kahan compensation 'state.",
             i, ".compensation'");
    if (wants_comp) {
      expect_tensor(c->second, pre + "compensation", p.dtype(), p.sizes());
      s.compensation = owned_copy_on(c->second, p.device());
    }
    for (const auto& name : required_buffers(*options[group_of[i]])) state_at(sd, pre + name, "optim");
    for (const auto& name : known_buffers()) {
      auto it = sd.find(pre + name);
      if (it == sd.end()) continue;
      expect_tensor(it->second, pre + name, sdt, p.sizes());
      s.buffers.emplace_back(name, owned_copy_on(it->second, p.device()));
    }
    state.emplace(p.impl(), std::move(s));
  }
  const bool stochastic = detail::get_bool(sd, "rounding.stochastic");
  const Tensor& seed_t = state_at(sd, "rounding.seed", "optim");
  TC_CHECK(seed_t.dtype() == kInt64 && seed_t.numel() == 1, "optim",
           "state dict entry 'rounding.seed' must be an int64 scalar");
  const int64_t seed = *static_cast<const int64_t*>(seed_t.to(Device(kCPU)).contiguous().raw_data());

  for (size_t gi = 0; gi < groups_.size(); ++gi) groups_[gi].options = std::move(options[gi]);
  state_ = std::move(state);
  rounding_ = stochastic ? Rounding::Stochastic : Rounding::NearestEven;
  std::memcpy(&seed_, &seed, sizeof seed);
}

}  // namespace tc::optim
