/// \file
/// tc::nn::Module: the base of every layer, in libtorch's shape, and ModuleHolder /
/// TC_MODULE, which make `tc::nn::Linear` a shared handle to a `LinearImpl`:
///
/// \code{.cpp}
///   struct NetImpl : tc::nn::Module {
///     NetImpl() : Module("Net") { fc = register_module("fc", tc::nn::Linear(784, 10)); }
///     tc::Tensor forward(const tc::Tensor& x) { return fc->forward(x.flatten(1)); }
///     tc::nn::Linear fc{nullptr};
///   };
///   TC_MODULE(Net);
///   Net net;  net->to(tc::kBFloat16);  auto sd = net->state_dict();   // "fc.weight", "fc.bias"
/// \endcode
///
/// Parameters, buffers and children are kept in registration order, so parameters() and
/// state_dict() are deterministic and names are PyTorch's dotted paths ("0.weight",
/// "blocks.1.attn.qkv.bias"). The layers live in the other nn/ headers (nn/nn.h has all).
#pragma once
#include <concepts>
#include <cstdint>
#include <iosfwd>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "tensorcast/state_dict.h"
#include "tensorcast/tensor.h"

namespace tc::nn {

class Module;
/// (dotted name, tensor) pairs, in registration order.
using NamedTensors = std::vector<std::pair<std::string, Tensor>>;
/// (dotted name, module) pairs, in registration order.
using NamedModules = std::vector<std::pair<std::string, std::shared_ptr<Module>>>;

template <class Contained>
class ModuleHolder;

namespace detail {
template <class T>
struct is_module_holder : std::false_type {};
template <class C>
struct is_module_holder<ModuleHolder<C>> : std::true_type {};
}  // namespace detail

/// A ModuleHolder or a class derived from one (what TC_MODULE defines).
template <class H>
concept AnyModuleHolder = requires {
  typename std::decay_t<H>::ContainedType;
}
&&std::derived_from<std::decay_t<H>, ModuleHolder<typename std::decay_t<H>::ContainedType>>;

/// The base of every layer (libtorch's torch::nn::Module); see the top of this file.
class Module : public std::enable_shared_from_this<Module> {
 public:
  /// `name` is the type's name, as pretty_print and errors show it ("Linear").
  explicit Module(std::string name = "Module") : name_(std::move(name)) {}
  virtual ~Module() = default;
  /// Parameters are shared handles: copying a module would alias them silently.
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  const std::string& name() const noexcept { return name_; }  ///< the type's name ("Linear")

  /// Registers `tensor` (a leaf; requires_grad set as asked) and returns the same handle.
  /// An undefined tensor registers an absent parameter (a Linear without bias): it keeps
  /// its name but is skipped by parameters() and state_dict(), as in PyTorch.
  Tensor register_parameter(std::string name, Tensor tensor, bool requires_grad = true);
  /// Buffers are state that is not trained (running statistics); they are saved.
  Tensor register_buffer(std::string name, Tensor tensor);
  /// Registers a child module under `name` (its parameters become "name.*") and returns it.
  template <class M>
  requires std::derived_from<M, Module> std::shared_ptr<M> register_module(std::string name,
                                                                           std::shared_ptr<M> module) {
    add_child(std::move(name), module);
    return module;
  }
  /// Returns the holder's own type, so `fc = register_module("fc", Linear(4, 2))` works
  /// with `Linear fc{nullptr};` as in libtorch.
  template <AnyModuleHolder H>
  std::decay_t<H> register_module(std::string name, H&& holder) {
    add_child(std::move(name), holder.ptr());
    return std::forward<H>(holder);
  }

  /// Removes the child module registered under `name` ("[nn]" error when there is none),
  /// as libtorch's unregister_module.
  void unregister_module(const std::string& name);

  /// Every registered parameter that is defined, children's too unless recurse is false.
  std::vector<Tensor> parameters(bool recurse = true) const;
  /// parameters() with their dotted names ("fc.weight").
  NamedTensors named_parameters(bool recurse = true) const;
  /// Every registered buffer that is defined, children's too unless recurse is false.
  std::vector<Tensor> buffers(bool recurse = true) const;
  /// buffers() with their dotted names ("bn.running_mean").
  NamedTensors named_buffers(bool recurse = true) const;
  /// The direct children, in registration order.
  std::vector<std::shared_ptr<Module>> children() const;
  /// The direct children with their names.
  const NamedModules& named_children() const noexcept { return children_; }
  /// Every descendant (not this module), depth first, with dotted names.
  NamedModules named_modules() const;

  /// Training mode for this module and all descendants (Dropout, BatchNorm read it).
  virtual void train(bool on = true);
  /// train(false): evaluation mode.
  void eval() { train(false); }
  /// Whether the module is in training mode.
  bool is_training() const noexcept { return training_; }

  /// Converts every floating parameter and buffer (and their gradients) to `dtype` IN
  /// PLACE: the Tensor handles stay the same objects, so handles held by layers, by the
  /// caller, or by an optimizer built afterwards all see the new dtype. As PyTorch's
  /// module.to(dtype), this includes BatchNorm's running statistics; integer buffers
  /// (num_batches_tracked) are left alone. For mixed precision keep the module fp32 and
  /// use autocast instead; to(kBFloat16) is for pure 16-bit weights (the optimizers then
  /// keep fp32 master copies). An optimizer that already holds state for these
  /// parameters is not updated: build optimizers after to().
  void to(DType dtype);
  /// Moves every parameter and buffer (and their gradients) to `device` in place, the same
  /// way (libtorch's module->to(torch::kCUDA)); build optimizers after it.
  void to(Device device);

  /// Drops (set_to_none, PyTorch's default) or zeroes every parameter's gradient.
  void zero_grad(bool set_to_none = true);

  /// Parameters then buffers, recursively, with dotted names. The tensors are detached
  /// views of the module's own storage (as in PyTorch): clone() them for a snapshot.
  StateDict state_dict() const;
  /// Copies values into the existing tensors. Every entry is checked before anything is
  /// written, so a failed load changes nothing: shape and dtype must match exactly
  /// ("[nn] ..." errors name the key), and with `strict` missing or unexpected keys are
  /// errors too.
  void load_state_dict(const StateDict& sd, bool strict = true);

  /// Writes PyTorch's repr: "Linear(in_features=784, out_features=10, bias=true)", with
  /// children indented below a container's name.
  virtual void pretty_print(std::ostream& os) const;
  friend std::ostream& operator<<(std::ostream& os, const Module& module);

 protected:
  bool training_ = true;  ///< what is_training() returns; set by train()

 private:
  void add_child(std::string name, std::shared_ptr<Module> module);
  void collect(const std::string& prefix, bool recurse, bool buffers, NamedTensors& out) const;
  void print_tree(std::ostream& os, int indent) const;

  std::string name_;
  NamedTensors parameters_;
  NamedTensors buffers_;
  NamedModules children_;
};

/// Prints the module tree (pretty_print of each level).
std::ostream& operator<<(std::ostream& os, const Module& module);

/// The number of parameter elements (recursively), e.g. 421,642 for the Fashion-MNIST CNN.
int64_t parameter_count(const Module& module);

/// A shared handle to a `Contained` module, as libtorch's ModuleHolder: `holder->forward(x)`,
/// `holder(x)`, `holder.ptr()`. `Linear fc{nullptr}` is an empty holder to assign later.
template <class Contained>
class ModuleHolder {
 public:
  using ContainedType = Contained;  ///< the module type it holds

  ModuleHolder() requires std::is_default_constructible_v<Contained> : impl_(std::make_shared<Contained>()) {}
  /// An empty holder, to assign later: `Linear fc = nullptr;`.
  ModuleHolder(std::nullptr_t) {}  // NOLINT: `Linear fc = nullptr;`
  /// Holds an existing module.
  ModuleHolder(std::shared_ptr<Contained> impl) : impl_(std::move(impl)) {}  // NOLINT
  /// Constructs the module from its constructor's arguments (`Linear(784, 10)`).
  template <class A, class... Args>
  requires(!std::is_same_v<std::decay_t<A>, std::nullptr_t> && !std::is_base_of_v<ModuleHolder, std::decay_t<A>> &&
           !std::is_same_v<std::decay_t<A>, std::shared_ptr<Contained>> &&
           std::is_constructible_v<Contained, A, Args...>) explicit ModuleHolder(A&& a, Args&&... args)
      : impl_(std::make_shared<Contained>(std::forward<A>(a), std::forward<Args>(args)...)) {}

  /// The module (throws "[nn] accessing an empty ModuleHolder" when empty).
  Contained* operator->() const { return checked(); }
  /// The module (throws when empty).
  Contained& operator*() const { return *checked(); }
  /// The module, or nullptr when empty.
  Contained* get() const { return impl_.get(); }
  /// The shared pointer to the module.
  const std::shared_ptr<Contained>& ptr() const { return impl_; }
  /// True for a holder constructed with nullptr.
  bool is_empty() const noexcept { return impl_ == nullptr; }
  /// True when the holder holds a module.
  explicit operator bool() const noexcept { return impl_ != nullptr; }
  operator std::shared_ptr<Module>() const { return impl_; }  // NOLINT

  /// The module's forward(args...).
  template <class... Args>
  decltype(auto) operator()(Args&&... args) const {
    return checked()->forward(std::forward<Args>(args)...);
  }

 private:
  Contained* checked() const {
    if (!impl_) throw Error("[nn] accessing an empty ModuleHolder (constructed with nullptr)");
    return impl_.get();
  }
  std::shared_ptr<Contained> impl_;
};

}  // namespace tc::nn

/// TC_MODULE(Linear) defines `tc::nn::Linear`-style holders for `LinearImpl`, as libtorch's
/// TORCH_MODULE.
#define TC_MODULE(Name)                                     \
  class Name : public ::tc::nn::ModuleHolder<Name##Impl> {  \
   public:                                                  \
    using ::tc::nn::ModuleHolder<Name##Impl>::ModuleHolder; \
    using Impl = Name##Impl;                                \
  }
