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
#include <optional>
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
struct Node : std::enable_shared_from_this<Node> {
  std::string name;        ///< the op's name, as errors and the profiler show it
  std::vector<Edge> next;  ///< one per input of the forward op
  virtual ~Node();         ///< iterative: freeing a 100k-op graph must not recurse 100k deep
  /// Gradients for the inputs (one per edge) from the gradient of the output.
  virtual std::vector<Tensor> apply(const Tensor& grad_output) = 0;
  virtual void release() {}  ///< drop saved tensors once the graph is not retained
};

/// Whether a backward formula can itself be differentiated. kTwice: the formula is written
/// with recorded ops only (no fused backward kernel, nothing in place on what it returns),
/// and it saves its inputs as they are (not detached) and its output through
/// detail::saved_output; backward(create_graph = true) then records it. kOnce: backward
/// with create_graph runs it unrecorded, and a second backward that reaches what it
/// returned raises "[autograd] double backward of OP is not implemented".
enum class Differentiable : bool { kOnce, kTwice };

/// Records `fn` as the backward of `output` = op(inputs) when grad mode is on and some
/// floating input requires grad. Returns `output` (now requiring grad if recorded).
Tensor record(const char* name, const Tensor& output, const std::vector<Tensor>& inputs, BackwardFn fn,
              Differentiable differentiable = Differentiable::kOnce);
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

/// The engine behind Tensor::backward. retain_graph defaults to create_graph; with
/// create_graph the backward formulas are recorded, so the gradients written into .grad()
/// can be differentiated again (PyTorch's backward(create_graph=True)).
void backward(const Tensor& root, const Tensor& gradient = Tensor(), std::optional<bool> retain_graph = std::nullopt,
              bool create_graph = false);

/// The gradients of `outputs` (weighted by `grad_outputs`, one per output; empty: ones for
/// scalar outputs) with respect to `inputs`, without touching any .grad()
/// (torch::autograd::grad). retain_graph defaults to create_graph; with create_graph the
/// results carry a graph of their own, for gradient penalties and higher derivatives. An
/// input the outputs do not depend on is an error unless allow_unused, which gives an
/// undefined tensor for it.
std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs = {}, std::optional<bool> retain_graph = std::nullopt,
                         bool create_graph = false, bool allow_unused = false);
/// grad() of one output.
std::vector<Tensor> grad(const Tensor& output, const std::vector<Tensor>& inputs, const Tensor& grad_output = Tensor(),
                         std::optional<bool> retain_graph = std::nullopt, bool create_graph = false,
                         bool allow_unused = false);

}  // namespace autograd
}  // namespace tc
