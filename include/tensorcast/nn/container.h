/// \file
/// Sequential: a chain of Tensor -> Tensor modules, named "0", "1", ... as in PyTorch.
///
/// \code{.cpp}
///   tc::nn::Sequential net(tc::nn::Flatten(), tc::nn::Linear(784, 10));
///   net->push_back(tc::nn::ReLU());
///   auto y = net->forward(x);
///   auto fc = net->at<tc::nn::LinearImpl>(1);
/// \endcode
#pragma once
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "tensorcast/nn/module.h"
#include "tensorcast/ops.h"  // Activation

namespace tc::nn {

class LinearImpl;
class ReLUImpl;
class GELUImpl;

namespace detail {
template <class T>
concept ModulePtr = requires(const T& p) {
  typename T::element_type;
}
&&std::derived_from<typename T::element_type, Module>;
template <class T>
concept SequentialItem = AnyModuleHolder<T> || ModulePtr<std::decay_t<T>>;
}  // namespace detail

/// Runs its modules in order, each on the previous one's output (libtorch's Sequential); TC_MODULE(Sequential) is
/// its holder.
class SequentialImpl : public Module {
 public:
  SequentialImpl() : Module("Sequential") {}
  /// The modules in order, named "0", "1", ...
  template <detail::SequentialItem... Ms>
  explicit SequentialImpl(Ms&&... modules) : Module("Sequential") {
    (push_back(std::forward<Ms>(modules)), ...);
  }

  /// Appends `module` under `name`; its forward must take and return one Tensor.
  template <class M>
  requires std::derived_from<M, Module>
  void push_back(std::string name, std::shared_ptr<M> module) {
    static_assert(
        requires(M & m, const Tensor& x) {
          { m.forward(x) } -> std::convertible_to<Tensor>;
        },
        "Sequential holds modules whose forward takes and returns one Tensor");
    M* raw = module.get();
    register_module(std::move(name), module);
    forwards_.push_back([raw](const Tensor& x) -> Tensor { return raw->forward(x); });
    // What the fuse step may fold, by the type whose forward runs here (M::forward, which
    // is not virtual: a ReLU is run as a ReLU whatever the object's own class).
    Fusion fusion;
    if constexpr (std::is_same_v<M, LinearImpl>) fusion.linear = raw;
    if constexpr (std::is_same_v<M, ReLUImpl>) fusion.activation = [] { return Activation::kRelu; };
    if constexpr (std::is_same_v<M, GELUImpl>) fusion.activation = [raw] { return raw->activation(); };
    fusions_.push_back(std::move(fusion));
    modules_.push_back(std::move(module));
  }
  /// Appends `module`, named by its index.
  template <class M>
  requires std::derived_from<M, Module>
  void push_back(std::shared_ptr<M> module) { push_back(std::to_string(modules_.size()), std::move(module)); }
  /// Appends the holder's module under `name`.
  template <AnyModuleHolder H>
  void push_back(std::string name, const H& holder) {
    push_back(std::move(name), holder.ptr());
  }
  /// Appends the holder's module, named by its index.
  template <AnyModuleHolder H>
  void push_back(const H& holder) {
    push_back(holder.ptr());
  }

  /// Each module's forward in turn, nothing else: fusing a Linear with the activation
  /// after it is the caller's explicit choice (fuse_linear_activation, or
  /// LinearOptions::activation).
  Tensor forward(const Tensor& input);
  /// forward, passing each module's output through after(index, output) before the next
  /// module (e.g. tc::amp::NumericsReport::watch on every layer's output).
  Tensor forward(const Tensor& input, const std::function<Tensor(size_t, const Tensor&)>& after);

  /// The number of modules.
  size_t size() const noexcept { return modules_.size(); }
  /// True when it holds no module.
  bool is_empty() const noexcept { return modules_.empty(); }
  /// The module at `index`.
  const std::shared_ptr<Module>& operator[](size_t index) const { return ptr(index); }
  /// The module at `index` ("[nn]" error past the end).
  const std::shared_ptr<Module>& ptr(size_t index) const;
  /// The module at `index` as its concrete type; "[nn]" error when it is another type.
  template <class M>
  std::shared_ptr<M> at(size_t index) const {
    auto p = std::dynamic_pointer_cast<M>(ptr(index));
    TC_CHECK(p != nullptr, "nn", "Sequential::at: module ", index, " is a ", ptr(index)->name(),
             ", not the requested type");
    return p;
  }
  /// Iterates over the modules (shared pointers).
  auto begin() const { return modules_.begin(); }
  /// The end of the modules.
  auto end() const { return modules_.end(); }

 private:
  /// Removes the activations it folds into their Linear layers.
  friend size_t fuse_linear_activation(SequentialImpl& sequential);
  // Removes the module at `index`; the others keep their names.
  void erase(size_t index);

  // A module fuse_linear_activation may fold: a Linear, or the activation it computes.
  struct Fusion {
    LinearImpl* linear = nullptr;
    std::function<Activation()> activation;
  };

  std::vector<std::shared_ptr<Module>> modules_;
  std::vector<std::function<Tensor(const Tensor&)>> forwards_;
  std::vector<Fusion> fusions_;
};
TC_MODULE(Sequential);

/// Fuses each Linear (without an activation of its own) that is followed by a ReLU or a
/// GELU into one layer: the Linear takes the activation (LinearOptions::activation, so it
/// runs tc::linear_activation where that gives the same bits) and the activation module is
/// removed. The other modules keep their names, so state_dict keys do not change (the
/// activations hold no parameters). Only modules pushed as LinearImpl, ReLUImpl or GELUImpl
/// are fused (Sequential runs the forward of the type it was given): one pushed as a
/// subclass runs the subclass's forward, which may compute something else. Returns the
/// number of pairs fused.
///
/// \code{.cpp}
///   tc::nn::Sequential net(tc::nn::Linear(1024, 4096), tc::nn::GELU(), tc::nn::Linear(4096, 10));
///   tc::nn::fuse_linear_activation(*net);  // "0": Linear with GELU, "2": Linear
/// \endcode
size_t fuse_linear_activation(SequentialImpl& sequential);

}  // namespace tc::nn
