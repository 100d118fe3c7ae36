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
#include <string>
#include <vector>

#include "tensorcast/nn/module.h"

namespace tc::nn {

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

  /// Each module's forward in turn; a Linear followed by a GELU runs as one
  /// linear_activation where that gives the pair's bits (a 16-bit product: under autocast
  /// or of 16-bit input), so that without a graph the GELU is applied as the product is
  /// written (the profiler then shows linear_activation, not linear and gelu).
  Tensor forward(const Tensor& input);
  /// forward, passing each module's output through after(index, output) before the next
  /// module (e.g. tc::amp::NumericsReport::watch on every layer's output); nothing fused.
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
  std::vector<std::shared_ptr<Module>> modules_;
  std::vector<std::function<Tensor(const Tensor&)>> forwards_;
};
TC_MODULE(Sequential);

}  // namespace tc::nn
