// tc::nn::Module: registration, traversal, to(dtype), state_dict / load_state_dict.
#include "tensorcast/nn/module.h"

#include <algorithm>
#include <ostream>
#include <set>
#include <sstream>

#include "core/tensor_impl.h"
#include "tensorcast/autograd.h"
#include "tensorcast/ops.h"

namespace tc::nn {
namespace {

void check_name(const std::string& name, const char* what) {
  TC_CHECK(!name.empty() && name.find('.') == std::string::npos, "nn", what, " name '", name,
           "' must be non-empty and contain no '.'");
}

bool has_name(const NamedTensors& v, const std::string& name) {
  for (const auto& [n, t] : v)
    if (n == name) return true;
  return false;
}

// Points `t`'s TensorImpl at a converted copy of its data (convert(t) for the tensor and
// its gradient), so every handle to it (layer members, optimizer groups, the caller's)
// sees the new dtype or device.
template <class F>
void replace_in_place(const Tensor& t, F convert) {
  Tensor converted, grad;
  {
    NoGradGuard no_grad;
    converted = convert(t.detach()).contiguous();
    if (t.grad().defined()) grad = convert(t.grad().detach()).contiguous();
  }
  TensorImpl* impl = t.impl();
  TensorImpl* src = converted.impl();
  impl->storage = src->storage;
  impl->strides = src->strides;
  impl->offset = src->offset;
  impl->dtype = src->dtype;
  // An accumulator created earlier expects gradients of the old dtype and device.
  impl->grad_accumulator.reset();
  impl->grad = grad;
}

void convert_in_place(const Tensor& t, DType dtype) {
  if (!t.defined() || !t.is_floating_point() || t.dtype() == dtype) return;
  replace_in_place(t, [dtype](const Tensor& x) { return x.to(dtype); });
}

void move_in_place(const Tensor& t, Device device) {
  if (!t.defined() || t.device() == device) return;
  replace_in_place(t, [device](const Tensor& x) { return x.to(device); });
}

}  // namespace

Tensor Module::register_parameter(std::string name, Tensor tensor, bool requires_grad) {
  check_name(name, "parameter");
  TC_CHECK(!has_name(parameters_, name) && !has_name(buffers_, name), "nn", name_,
           " already has a parameter or buffer named '", name, "'");
  if (tensor.defined()) {
    TC_CHECK(tensor.is_leaf(), "nn", "parameter '", name, "' must be a leaf tensor (detach it first)");
    if (requires_grad)
      TC_CHECK(tensor.is_floating_point(), "nn", "parameter '", name, "' of dtype ", dtype_name(tensor.dtype()),
               " cannot require grad");
    tensor.requires_grad_(requires_grad);
  }
  parameters_.emplace_back(std::move(name), tensor);
  return tensor;
}

Tensor Module::register_buffer(std::string name, Tensor tensor) {
  check_name(name, "buffer");
  TC_CHECK(!has_name(parameters_, name) && !has_name(buffers_, name), "nn", name_,
           " already has a parameter or buffer named '", name, "'");
  buffers_.emplace_back(std::move(name), tensor);
  return tensor;
}

void Module::add_child(std::string name, std::shared_ptr<Module> module) {
  check_name(name, "submodule");
  TC_CHECK(module != nullptr, "nn", "submodule '", name, "' is empty (nullptr)");
  for (const auto& [n, m] : children_) TC_CHECK(n != name, "nn", name_, " already has a submodule named '", name, "'");
  children_.emplace_back(std::move(name), std::move(module));
}

void Module::unregister_module(const std::string& name) {
  const auto it = std::find_if(children_.begin(), children_.end(), [&](const auto& c) { return c.first == name; });
  TC_CHECK(it != children_.end(), "nn", name_, " has no submodule named '", name, "'");
  children_.erase(it);
}

void Module::collect(const std::string& prefix, bool recurse, bool buffers, NamedTensors& out) const {
  for (const auto& [n, t] : buffers ? buffers_ : parameters_)
    if (t.defined()) out.emplace_back(prefix + n, t);
  if (!recurse) return;
  for (const auto& [n, m] : children_) m->collect(prefix + n + ".", true, buffers, out);
}

NamedTensors Module::named_parameters(bool recurse) const {
  NamedTensors out;
  collect("", recurse, false, out);
  return out;
}

NamedTensors Module::named_buffers(bool recurse) const {
  NamedTensors out;
  collect("", recurse, true, out);
  return out;
}

std::vector<Tensor> Module::parameters(bool recurse) const {
  std::vector<Tensor> out;
  for (auto& [n, t] : named_parameters(recurse)) out.push_back(t);
  return out;
}

std::vector<Tensor> Module::buffers(bool recurse) const {
  std::vector<Tensor> out;
  for (auto& [n, t] : named_buffers(recurse)) out.push_back(t);
  return out;
}

std::vector<std::shared_ptr<Module>> Module::children() const {
  std::vector<std::shared_ptr<Module>> out;
  for (const auto& [n, m] : children_) out.push_back(m);
  return out;
}

NamedModules Module::named_modules() const {
  NamedModules out;
  for (const auto& [n, m] : children_) {
    out.emplace_back(n, m);
    for (auto& [sub, sm] : m->named_modules()) out.emplace_back(n + "." + sub, sm);
  }
  return out;
}

void Module::train(bool on) {
  training_ = on;
  for (auto& [n, m] : children_) m->train(on);
}

void Module::to(DType dtype) {
  TC_CHECK(is_floating(dtype), "nn", "Module::to: dtype ", dtype_name(dtype),
           " is not a floating type (only floating parameters and buffers are converted)");
  for (auto& [n, t] : named_parameters()) convert_in_place(t, dtype);
  for (auto& [n, t] : named_buffers()) convert_in_place(t, dtype);
}

void Module::to(Device device) {
  for (auto& [n, t] : named_parameters()) move_in_place(t, device);
  for (auto& [n, t] : named_buffers()) move_in_place(t, device);
}

void Module::zero_grad(bool set_to_none) {
  NoGradGuard no_grad;
  for (auto& p : parameters()) {
    if (!p.grad().defined()) continue;
    if (set_to_none) {
      p.set_grad(Tensor());
    } else {
      Tensor g = p.grad();
      g.zero_();
    }
  }
}

StateDict Module::state_dict() const {
  StateDict sd;
  for (auto& [n, t] : named_parameters()) sd[n] = t.detach();
  for (auto& [n, t] : named_buffers()) sd[n] = t.detach();
  return sd;
}

void Module::load_state_dict(const StateDict& sd, bool strict) {
  NamedTensors own = named_parameters();
  for (auto& e : named_buffers()) own.push_back(e);

  std::vector<std::string> missing, unexpected;
  std::set<std::string> own_names;
  std::vector<std::pair<Tensor, Tensor>> copies;  // (destination, source)
  for (auto& [n, t] : own) {
    own_names.insert(n);
    auto it = sd.find(n);
    if (it == sd.end()) {
      missing.push_back(n);
      continue;
    }
    const Tensor& src = it->second;
    TC_CHECK(src.defined(), "nn", "load_state_dict: entry '", n, "' is an undefined tensor");
    TC_CHECK(src.sizes() == t.sizes(), "nn", "load_state_dict: '", n, "' has shape ", shape_str(t.sizes()),
             " in the module but ", shape_str(src.sizes()), " in the state dict");
    TC_CHECK(src.dtype() == t.dtype(), "nn", "load_state_dict: '", n, "' has dtype ", dtype_name(t.dtype()),
             " in the module but ", dtype_name(src.dtype()), " in the state dict (convert the module with to(",
             dtype_name(src.dtype()), ") first)");
    copies.emplace_back(t, src);
  }
  for (auto& [n, t] : sd)
    if (!own_names.count(n)) unexpected.push_back(n);
  if (strict && (!missing.empty() || !unexpected.empty())) {
    std::ostringstream os;
    os << "[nn] load_state_dict for " << name_ << ":";
    auto list = [&](const char* what, const std::vector<std::string>& keys) {
      if (keys.empty()) return;
      os << " " << what << " keys";
      const char* sep = " ";
      for (auto& k : keys) os << sep << "'" << k << "'", sep = ", ";
      os << ";";
    };
    list("missing", missing);
    list("unexpected", unexpected);
    throw Error(os.str());
  }
  NoGradGuard no_grad;
  for (auto& [dst, src] : copies)
    if (!dst.is_same(src)) dst.copy_(src);
}

void Module::pretty_print(std::ostream& os) const { os << name_ << "()"; }

void Module::print_tree(std::ostream& os, int indent) const {
  if (children_.empty()) {
    pretty_print(os);
    return;
  }
  os << name_ << "(\n";
  for (const auto& [n, m] : children_) {
    os << std::string(indent + 2, ' ') << "(" << n << "): ";
    m->print_tree(os, indent + 2);
    os << "\n";
  }
  os << std::string(indent, ' ') << ")";
}

std::ostream& operator<<(std::ostream& os, const Module& module) {
  module.print_tree(os, 0);
  return os;
}

int64_t parameter_count(const Module& module) {
  int64_t n = 0;
  for (const auto& p : module.parameters()) n += p.numel();
  return n;
}

}  // namespace tc::nn
