/// \file
/// Reverse-mode automatic differentiation: a dynamic tape, as in PyTorch.
///
/// An op whose inputs require grad records a Node holding its backward formula (the
/// formula lives next to the op's forward, in src/ops). backward() walks the graph in
/// dependency order; each input's gradient is cast to that input's dtype, so a leaf's
/// .grad() always has the leaf's dtype.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tensorcast/tensor.h"

namespace tc {

/// Disables graph recording in its scope (torch::NoGradGuard). Thread-local.
class NoGradGuard {
 public:
  NoGradGuard();
  ~NoGradGuard();
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool prev_;
};

/// Whether autograd records ops on this thread (false inside a NoGradGuard).
bool is_grad_enabled();
/// Turns recording on or off for this thread.
void set_grad_enabled(bool enabled);

namespace autograd {

struct Node;

/// Where a gradient goes: input `input_nr` of `fn`, expected to have this dtype and shape.
struct Edge {
  std::shared_ptr<Node> fn;  ///< the node the gradient flows to (nullptr: an input that needs none)
  DType dtype = kFloat32;    ///< the input's dtype (the gradient is cast to it)
  Shape shape;               ///< the input's shape
};

/// Receives dL/d(output), returns dL/d(input_i) for every input (undefined = no gradient).
/// `needs[i]` says whether input i wants a gradient, so formulas can skip work.
using BackwardFn = std::function<std::vector<Tensor>(const Tensor& grad_output, const std::vector<bool>& needs)>;

/// A recorded op: its backward, and the edges to its inputs' nodes.
struct Node {
  std::string name;        ///< the op's name, as errors and the profiler show it
  std::vector<Edge> next;  ///< one per input of the forward op
  virtual ~Node();         ///< iterative: freeing a 100k-op graph must not recurse 100k deep
  /// Gradients for the inputs (one per edge) from the gradient of the output.
  virtual std::vector<Tensor> apply(const Tensor& grad_output) = 0;
  virtual void release() {}  ///< drop saved tensors once the graph is not retained
};

/// Records `fn` as the backward of `output` = op(inputs) when grad mode is on and some
/// floating input requires grad. Returns `output` (now requiring grad if recorded).
Tensor record(const char* name, const Tensor& output, const std::vector<Tensor>& inputs, BackwardFn fn);
/// True when some input requires grad (and grad mode is on).
bool any_requires_grad(const std::vector<Tensor>& inputs);
/// Whether record() would record a backward for a floating output of these inputs (grad
/// mode on, some input requiring grad): a forward keeps what only its backward reads
/// (saved statistics, masks) only then.
bool will_record(const std::vector<Tensor>& inputs);

/// Calls `hook(leaf)` each time backward has accumulated a gradient into leaf.grad()
/// (PyTorch's Tensor.register_post_accumulate_grad_hook): the gradient is complete for this
/// backward when the hook runs, so data-parallel training starts reducing it at once.
/// Hooks run on the thread that runs backward, in registration order; autograd::grad()
/// does not call them. Returns a handle for remove_post_accumulate_grad_hook.
using PostAccumulateGradHook = std::function<void(const Tensor& leaf)>;
/// Calls `hook` each time a gradient has been accumulated into `leaf` (PyTorch's
/// register_post_accumulate_grad_hook); returns a handle.
int64_t register_post_accumulate_grad_hook(const Tensor& leaf, PostAccumulateGradHook hook);
/// Removes a hook by its handle.
void remove_post_accumulate_grad_hook(const Tensor& leaf, int64_t handle);

/// Runs `callback` once the current backward() has finished (PyTorch's
/// Variable._execution_engine.queue_callback): data-parallel training waits for its last
/// reductions there, so .grad() holds the averaged gradients when backward() returns. Only
/// valid while a backward() runs on this thread (a hook may call it). A callback that
/// throws makes backward() throw; the callbacks queued after it still run.
void queue_callback(std::function<void()> callback);

/// The engine behind Tensor::backward.
void backward(const Tensor& root, const Tensor& gradient, bool retain_graph);

/// d(outputs)/d(inputs) without touching .grad(): returns one gradient per input.
std::vector<Tensor> grad(const Tensor& output, const std::vector<Tensor>& inputs, const Tensor& grad_output = Tensor(),
                         bool retain_graph = false);

}  // namespace autograd
}  // namespace tc
