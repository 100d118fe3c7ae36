// The autograd tape: grad mode, recording nodes, and the backward engine.
//
// Each node has one output; its incoming gradients are summed in a buffer until every
// consumer has contributed (dependency counting), then its formula runs under no-grad, or,
// with create_graph, recorded like any op (see Differentiable in tensorcast/autograd.h).
// Gradients are cast to the dtype each input had in the forward pass, so mixed-precision
// graphs hand fp32 gradients to fp32 parameters.
#include <algorithm>
#include <atomic>
#include <exception>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "autograd/nodes.h"
#include "core/tensor_impl.h"
#include "profiler/hooks.h"
#include "tensorcast/autograd.h"
#include "tensorcast/ops.h"

namespace tc {
namespace {
thread_local bool g_grad_enabled = true;
}  // namespace

bool is_grad_enabled() { return g_grad_enabled; }
void set_grad_enabled(bool enabled) { g_grad_enabled = enabled; }
NoGradGuard::NoGradGuard() : prev_(g_grad_enabled) { g_grad_enabled = false; }
NoGradGuard::~NoGradGuard() { g_grad_enabled = prev_; }

namespace autograd {

Node::~Node() {
  // Children that die with this node are moved to a thread-local list and destroyed by
  // the outermost destructor in a loop, so a long chain is freed without deep recursion.
  thread_local std::vector<std::shared_ptr<Node>> pending;
  thread_local bool draining = false;
  for (Edge& e : next)
    if (e.fn && e.fn.use_count() == 1) pending.push_back(std::move(e.fn));
  if (draining) return;
  draining = true;
  while (!pending.empty()) {
    std::shared_ptr<Node> n = std::move(pending.back());
    pending.pop_back();
    n.reset();  // may push its own children
  }
  draining = false;
}

namespace {

// A node built from an op's backward lambda.
struct FunctionNode final : Node {
  BackwardFn fn;
  std::vector<bool> needs;
  std::optional<DType> grad_in;  // take_grad_in's dtype, else the output's own
  Differentiable differentiable = Differentiable::kOnce;
  std::vector<Tensor> apply(const Tensor& grad) override {
    profiler::detail::Scope rec(name, " backward");
    TC_CHECK(fn != nullptr, "autograd",
             "trying to backward through the graph a second time (or after its saved tensors were freed); "
             "call backward(..., retain_graph=true) the first time");
    return fn(grad, needs);
  }
  void release() override { fn = nullptr; }
};

// Stands for a kOnce formula's result under create_graph: its edges are the formula's
// inputs (the forward's inputs and the incoming gradient), and differentiating through it
// is the error PyTorch gives for a missing double backward.
struct OnceNode final : Node {
  std::vector<Tensor> apply(const Tensor&) override {
    TC_CHECK(false, "autograd", "double backward of ", name,
             " is not implemented; take this gradient without create_graph, or write the function with ops "
             "whose double backward exists (docs/ops.md lists them)");
    return {};
  }
};

// True when `t` is referenced by `holders` handles and no view: safe to keep or update in place.
bool exclusively_held(const Tensor& t, long holders) {
  return t.impl_ptr().use_count() == holders && t.is_contiguous() && t.impl()->storage.use_count() == 1;
}

// Accumulates into a leaf's .grad(), in the leaf's dtype.
struct AccumulateGrad final : Node {
  std::shared_ptr<TensorImpl> leaf;
  std::vector<Tensor> apply(const Tensor& grad) override {
    profiler::detail::Scope rec("AccumulateGrad");
    const bool cast = grad.dtype() != leaf->dtype;
    Tensor g = cast ? grad.to(leaf->dtype) : grad;
    if (is_grad_enabled()) {
      // create_graph: the gradient keeps its graph, and an existing one is added to out of
      // place (as PyTorch), so both stay differentiable.
      leaf->grad = !leaf->grad.defined() ? (exclusively_held(g, cast ? 1 : 2) ? g : g.clone()) : add(leaf->grad, g);
    } else if (!leaf->grad.defined()) {
      // Own the gradient: never alias a tensor someone else may still hold. `grad` is the
      // engine's buffer, so besides it and `g` nobody holds a fresh gradient.
      const long holders = cast ? 1 : 2;
      leaf->grad = exclusively_held(g, holders) ? g : g.clone();
    } else {
      leaf->grad.add_(g);
    }
    if (!leaf->post_accumulate_grad_hooks.empty()) {
      const Tensor handle(leaf);
      // A copy: a hook may register or remove hooks.
      auto hooks = leaf->post_accumulate_grad_hooks;
      for (auto& [id, hook] : hooks) hook(handle);
    }
    return {};
  }
};

// Tensor::to's backward: the gradient back to the source dtype.
struct CastNode final : Node {
  DType source = kFloat32;
  std::vector<Tensor> apply(const Tensor& grad) override {
    profiler::detail::Scope rec("to backward");
    return {grad.to(source)};
  }
};

// A dense buffer (of any dim order) held by nobody but the engine: safe to write in place.
bool engine_owned(const Tensor& t) {
  return t.impl_ptr().use_count() == 1 && t.impl()->storage.use_count() == 1 &&
         (t.is_contiguous() || !dense_stride_order(t.sizes(), t.strides()).empty());
}

// A slice's backward: zeros of the input's shape and layout with the slice's part set to
// the gradient. The engine may instead write the gradient into that part of a buffer it
// assembles from several slices (see autograd/nodes.h and run_backward).
struct SliceNode final : Node {
  detail::SlicePart part;
  Shape in_shape, in_strides;  // in_strides: the input's dense layout, or empty (contiguous)
  DType in_dtype = kFloat32;
  Device in_device;
  std::vector<Tensor> apply(const Tensor& grad) override {
    profiler::detail::Scope rec(name, " backward");
    Tensor gi;
    {
      NoGradGuard written_in_place;
      gi = new_buffer();
      gi.zero_();
      part.view(gi).copy_(grad);
    }
    // create_graph: the scatter is linear in grad, and its own backward is the slice.
    return {record(
        "slice_backward", gi, {grad},
        [view = part.view](const Tensor& gg, const std::vector<bool>&) { return std::vector<Tensor>{view(gg)}; },
        Differentiable::kTwice)};
  }
  // An uninitialized gradient for the input.
  Tensor new_buffer() const {
    const Tensor base = make_tensor(in_shape, in_dtype, in_device);
    return in_strides.empty() ? base : make_view(base, in_shape, in_strides, 0);
  }
  bool fits(const Tensor& buffer) const {
    return buffer.dtype() == in_dtype && buffer.sizes() == in_shape && buffer.device() == in_device;
  }
  // Whether g is exactly this slice's part of `buffer` (the same memory, not a copy).
  bool is_part_of(const Tensor& buffer, const Tensor& g) const {
    if (buffer.impl()->storage != g.impl()->storage) return false;
    const Tensor v = part.view(buffer);
    return v.sizes() == g.sizes() && v.strides() == g.strides() && v.storage_offset() == g.storage_offset();
  }
  // The input-shaped tensor, laid out as the input, whose part g already is within g's own
  // storage (a backward that wrote several slices' gradients into one block: attention's
  // q, k and v selected from one projection), or undefined.
  Tensor enclosing(const Tensor& g) const {
    if (part.dim < 0 || g.dtype() != in_dtype || g.device() != in_device) return Tensor();
    const Shape st = in_strides.empty() ? contiguous_strides(in_shape) : in_strides;
    const int64_t offset = g.storage_offset() - part.start * st[static_cast<size_t>(part.dim)];
    int64_t last = offset;  // the buffer's last element
    for (size_t d = 0; d < in_shape.size(); ++d) {
      if (in_shape[d] == 0) return Tensor();
      last += (in_shape[d] - 1) * st[d];
    }
    if (offset < 0 || static_cast<size_t>(last + 1) * element_size(in_dtype) > g.impl()->storage->nbytes)
      return Tensor();
    const Tensor buffer = make_view(g, in_shape, st, offset);
    return is_part_of(buffer, g) ? buffer : Tensor();
  }
};

// An input's gradient buffer assembled from slices along `dim`: only the index ranges
// written so far hold values; the rest is uninitialized until complete() zero-fills it.
struct PartialBuffer {
  int64_t dim = 0;
  std::vector<std::pair<int64_t, int64_t>> written;
  bool overlaps(int64_t start, int64_t end) const {
    for (const auto& [s, e] : written)
      if (start < e && s < end) return true;
    return false;
  }
  // Makes `buffer` the engine's own before it is written: a buffer adopted from a
  // backward's output that something else still holds gets its written parts copied out.
  void own(Tensor& buffer) const {
    if (engine_owned(buffer)) return;
    Tensor mine = empty_like_layout(buffer, buffer.dtype());
    for (const auto& [s, e] : written) mine.narrow(dim, s, e - s).copy_(buffer.narrow(dim, s, e - s));
    buffer = std::move(mine);
  }
  void complete(Tensor& buffer) {
    own(buffer);
    std::sort(written.begin(), written.end());
    int64_t at = 0;
    for (const auto& [s, e] : written) {
      if (s > at) buffer.narrow(dim, at, s - at).zero_();
      at = std::max(at, e);
    }
    if (at < buffer.size(dim)) buffer.narrow(dim, at, buffer.size(dim) - at).zero_();
  }
};

// See autograd/nodes.h: a 16-bit cast of a wider tensor takes its gradient in the wider
// dtype, as does an output marked by take_grad_in.
DType gradient_dtype(const TensorImpl* impl) {
  const Node* fn = impl->grad_fn.get();
  DType wide = impl->dtype;
  if (const auto* cast = dynamic_cast<const CastNode*>(fn))
    wide = cast->source;
  else if (const auto* f = dynamic_cast<const FunctionNode*>(fn); f != nullptr && f->grad_in)
    wide = *f->grad_in;
  return is_floating(wide) && element_size(wide) > element_size(impl->dtype) ? wide : impl->dtype;
}

Edge edge_for(const Tensor& t) {
  TensorImpl* impl = t.impl();
  if (impl->grad_fn) return {impl->grad_fn, gradient_dtype(impl), impl->sizes};
  if (!impl->requires_grad) return {nullptr, impl->dtype, impl->sizes};
  std::shared_ptr<Node> acc = impl->grad_accumulator.lock();
  if (!acc) {
    auto a = std::make_shared<AccumulateGrad>();
    a->name = "AccumulateGrad";
    a->leaf = t.impl_ptr();
    impl->grad_accumulator = a;
    acc = a;
  }
  return {acc, impl->dtype, impl->sizes};
}

}  // namespace

bool any_requires_grad(const std::vector<Tensor>& inputs) {
  for (const Tensor& t : inputs)
    if (t.defined() && t.requires_grad()) return true;
  return false;
}

// Inside InferenceMode nothing is recorded even where grad mode was turned back on
// (c10 excludes the autograd keys whatever GradMode says); read only once some input
// requires grad, so the usual no-grad path costs nothing more.
bool will_record(const std::vector<Tensor>& inputs) {
  return g_grad_enabled && any_requires_grad(inputs) && !inference_mode_enabled();
}

namespace {
// An inference tensor has no version counter, so a graph could not tell whether it was
// written after being saved: a recorded op refuses it. PyTorch refuses it where the op
// saves it for backward; which inputs an op saves is each formula's detail here (and
// changes with fused paths), so every input of a recorded op is refused alike.
void check_not_inference(const char* name, const Tensor& t) {
  TC_CHECK(!t.defined() || !t.is_inference(), "autograd", name,
           ": Inference tensors cannot be saved for backward. To work around you can make a clone to get a normal "
           "tensor and use it in autograd.");
}
}  // namespace

Tensor record(const char* name, const Tensor& output, const std::vector<Tensor>& inputs, BackwardFn fn,
              Differentiable differentiable) {
  if (!is_floating(output.dtype()) || !will_record(inputs)) return output;
  for (const Tensor& t : inputs) check_not_inference(name, t);
  auto node = std::make_shared<FunctionNode>();
  node->name = name;
  node->fn = std::move(fn);
  node->differentiable = differentiable;
  node->next.reserve(inputs.size());
  node->needs.reserve(inputs.size());
  for (const Tensor& t : inputs) {
    if (t.defined() && t.requires_grad()) {
      node->next.push_back(edge_for(t));
      node->needs.push_back(true);
    } else {
      node->next.push_back(Edge{});
      node->needs.push_back(false);
    }
  }
  output.impl()->grad_fn = std::move(node);
  return output;
}

namespace detail {

Tensor record_cast(const Tensor& out, const Tensor& in) {
  if (!g_grad_enabled || !is_floating(out.dtype()) || !in.requires_grad() || inference_mode_enabled()) return out;
  check_not_inference("to", in);
  auto node = std::make_shared<CastNode>();
  node->name = "to";
  node->source = in.dtype();
  node->next.push_back(edge_for(in));
  out.impl()->grad_fn = std::move(node);
  return out;
}

Tensor record_slice(const char* name, const Tensor& out, const Tensor& in, SlicePart part) {
  if (!g_grad_enabled || !is_floating(out.dtype()) || !in.requires_grad() || inference_mode_enabled()) return out;
  check_not_inference(name, in);
  auto node = std::make_shared<SliceNode>();
  node->name = name;
  node->part = std::move(part);
  node->in_shape = in.sizes();
  // The gradient laid out as the input (a permuted view of a projection, say), so that the
  // backward of the view ops between them gives a contiguous gradient without a copy.
  if (!in.is_contiguous()) {
    const Shape order = dense_stride_order(in.sizes(), in.strides());
    if (!order.empty()) node->in_strides = strides_for_order(in.sizes(), order);
  }
  node->in_dtype = edge_for(in).dtype;
  node->in_device = in.device();
  node->next.push_back(edge_for(in));
  out.impl()->grad_fn = std::move(node);
  return out;
}

void take_grad_in(const Tensor& out, DType dtype) {
  if (auto* f = dynamic_cast<FunctionNode*>(out.impl()->grad_fn.get())) f->grad_in = dtype;
}

DType grad_dtype(const Tensor& t) {
  if (!t.defined()) return kFloat32;  // no gradient will be asked for
  return t.impl()->grad_fn ? gradient_dtype(t.impl()) : t.dtype();
}

namespace {
// The running node's take_accumulated_grad (null outside its formula, and with create_graph).
thread_local const std::function<Tensor(size_t)>* g_take_accumulated = nullptr;
// The node whose formula runs on this thread (null outside a formula).
thread_local Node* g_running = nullptr;
}  // namespace

Tensor take_accumulated_grad(size_t input) { return g_take_accumulated ? (*g_take_accumulated)(input) : Tensor(); }

Tensor saved_output(const Tensor& saved) {
  if (!g_grad_enabled || g_running == nullptr || !saved.defined()) return saved;
  Tensor alias = saved.detach();
  alias.impl()->grad_fn = g_running->shared_from_this();
  return alias;
}

std::vector<Tensor> recomputed_grads(const std::function<Tensor(const std::vector<Tensor>&)>& compose,
                                     const std::vector<Tensor>& inputs, const Tensor& grad,
                                     const std::vector<bool>& needs) {
  std::vector<Tensor> result(inputs.size()), wrt;
  std::vector<size_t> at;
  for (size_t i = 0; i < inputs.size(); ++i)
    if (i < needs.size() && needs[i] && inputs[i].defined() && inputs[i].requires_grad()) {
      wrt.push_back(inputs[i]);
      at.push_back(i);
    }
  if (wrt.empty()) return result;
  const Tensor out = compose(inputs);
  const std::vector<Tensor> gs = autograd::grad({out}, wrt, {grad}, /*retain_graph=*/true, /*create_graph=*/true,
                                                /*allow_unused=*/true);
  for (size_t k = 0; k < at.size(); ++k) result[at[k]] = gs[k];
  return result;
}

}  // namespace detail

namespace {

// Sets grad mode for a scope: backward formulas are recorded with create_graph only.
struct GradModeFor {
  bool prev = is_grad_enabled();
  explicit GradModeFor(bool on) { set_grad_enabled(on); }
  ~GradModeFor() { set_grad_enabled(prev); }
  GradModeFor(const GradModeFor&) = delete;
  GradModeFor& operator=(const GradModeFor&) = delete;
};

// Callbacks queued by the backward() running on this thread (nullptr: none runs).
thread_local std::vector<std::function<void()>>* g_backward_callbacks = nullptr;
std::atomic<int64_t> g_next_hook_handle{1};

// Runs the graph below `root_fn` with `root_grad`. If `capture` is given, gradients
// arriving at those nodes are stored there instead of flowing into .grad().
void run_backward(const std::shared_ptr<Node>& root_fn, const Tensor& root_grad, bool retain_graph, bool create_graph,
                  std::unordered_map<Node*, Tensor>* capture) {
  profiler::detail::Scope rec("backward (engine)");
  // Count, for each node, how many edges point at it.
  std::unordered_map<Node*, int> deps;
  std::unordered_map<Node*, std::vector<Node*>> parents;  // autograd::grad only
  std::vector<Node*> stack{root_fn.get()};
  deps[root_fn.get()] = 0;
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    for (const Edge& e : n->next) {
      if (!e.fn) continue;
      auto [it, inserted] = deps.try_emplace(e.fn.get(), 0);
      ++it->second;
      if (capture) parents[e.fn.get()].push_back(n);
      if (inserted) stack.push_back(e.fn.get());
    }
  }
  // autograd::grad: the nodes some requested input lies below. Only their formulas run
  // (PyTorch's exec_info), so a gradient with respect to an intermediate tensor does not
  // walk the graph beneath it.
  std::unordered_set<Node*> feeds;
  if (capture) {
    for (const auto& [target, unused] : *capture) stack.push_back(target);
    while (!stack.empty()) {
      Node* n = stack.back();
      stack.pop_back();
      for (Node* p : parents[n])
        if (feeds.insert(p).second) stack.push_back(p);
    }
  }
  std::unordered_map<Node*, Tensor> buffers;
  std::unordered_map<Node*, PartialBuffer> partial;  // buffers being assembled from slices
  // The buffer of `target` with every element set (what no slice wrote zero-filled).
  auto completed = [&](Node* target) -> Tensor& {
    Tensor& buf = buffers[target];
    if (auto it = partial.find(target); it != partial.end()) {
      it->second.complete(buf);
      partial.erase(it);
    }
    return buf;
  };
  // A slice's gradient written into its input's buffer: made by the first slice (or, when
  // that gradient already is its part of an input-shaped block, that block itself), copied
  // into by disjoint later slices along the same dim (nothing to copy when they are parts
  // of that block too), else added. False: n runs as usual.
  auto assemble = [&](SliceNode& n, const Tensor& g) {
    Node* target = n.next[0].fn.get();
    auto it = buffers.find(target);
    const bool have = it != buffers.end() && it->second.defined();
    if (have ? !n.fits(it->second) : n.part.dim < 0) return false;
    auto p = partial.find(target);
    if (have && p == partial.end() && !engine_owned(it->second)) return false;
    profiler::detail::Scope rec(n.name, " backward (into buffer)");
    if (!have) {
      Tensor buf = n.enclosing(g);
      if (!buf.defined()) {
        buf = n.new_buffer();
        n.part.view(buf).copy_(g);
      }
      buffers[target] = std::move(buf);
      partial[target] = PartialBuffer{n.part.dim, {{n.part.start, n.part.end}}};
    } else if (p != partial.end() && p->second.dim == n.part.dim && !p->second.overlaps(n.part.start, n.part.end)) {
      if (!n.is_part_of(it->second, g)) {
        p->second.own(it->second);
        n.part.view(it->second).copy_(g);
      }
      p->second.written.emplace_back(n.part.start, n.part.end);
    } else {
      n.part.view(completed(target)).add_(g);
    }
    return true;
  };
  buffers[root_fn.get()] = root_grad;
  std::vector<Node*> ready{root_fn.get()};
  const GradModeFor recorded_only_with(create_graph);
  Node* running = nullptr;
  // detail::take_accumulated_grad for the node whose formula runs: its input's buffer so far.
  const std::function<Tensor(size_t)> take = [&](size_t i) -> Tensor {
    if (running == nullptr || i >= running->next.size() || !running->next[i].fn) return Tensor();
    const Edge& e = running->next[i];
    auto it = buffers.find(e.fn.get());
    if (it == buffers.end() || !it->second.defined()) return Tensor();
    Tensor& buf = completed(e.fn.get());
    if (buf.dtype() != e.dtype || buf.sizes() != e.shape || !buf.is_contiguous()) return Tensor();
    return std::move(buf);
  };
  // Runs n's formula with take_accumulated_grad and saved_output answering for it. With
  // create_graph a kOnce formula runs unrecorded and its results lead to an OnceNode.
  auto apply = [&](Node* n, const Tensor& g) {
    running = n;
    struct Restore {
      const std::function<Tensor(size_t)>* outer_take = detail::g_take_accumulated;
      Node* outer_running = detail::g_running;
      Node*& running;
      ~Restore() {
        detail::g_take_accumulated = outer_take;
        detail::g_running = outer_running;
        running = nullptr;
      }
    } restore{.running = running};
    detail::g_take_accumulated = create_graph ? nullptr : &take;
    detail::g_running = n;
    const auto* f = dynamic_cast<const FunctionNode*>(n);
    if (!create_graph || f == nullptr || f->differentiable == Differentiable::kTwice) return n->apply(g);
    std::vector<Tensor> grads;
    {
      NoGradGuard once;
      grads = n->apply(g);
    }
    for (Tensor& gi : grads) {
      if (!gi.defined() || !is_floating(gi.dtype())) continue;
      auto stand_in = std::make_shared<OnceNode>();  // one per result: a node has one output
      stand_in->name = n->name;
      stand_in->next = n->next;
      if (g.requires_grad()) stand_in->next.push_back(edge_for(g));
      gi = gi.detach();  // an alias: the formula may have returned g itself
      gi.impl()->grad_fn = std::move(stand_in);
    }
    return grads;
  };
  while (!ready.empty()) {
    Node* n = ready.back();
    ready.pop_back();
    Tensor g = std::move(completed(n));
    buffers.erase(n);
    std::vector<Tensor> grads;  // stays empty when no gradient reached n
    auto* slice = capture || create_graph ? nullptr : dynamic_cast<SliceNode*>(n);
    if (slice && g.defined() && slice->next[0].fn && assemble(*slice, g)) {
      // Written into the input's gradient buffer: nothing more flows from n.
    } else if (capture) {
      // autograd::grad reports the gradients it was asked for instead of writing .grad()
      // (not even of leaves it was not asked about), and runs only what leads to them.
      if (auto it = capture->find(n); it != capture->end()) it->second = g;
      if (feeds.count(n) && g.defined()) grads = apply(n, g);
    } else if (g.defined()) {
      grads = apply(n, g);
    }
    if (!retain_graph) n->release();
    for (size_t i = 0; i < n->next.size(); ++i) {
      const Edge& e = n->next[i];
      if (!e.fn) continue;
      Tensor gi = i < grads.size() ? grads[i] : Tensor();
      if (gi.defined()) {
        TC_CHECK(gi.sizes() == e.shape, "autograd", "function ", n->name, " returned a gradient of shape ",
                 shape_str(gi.sizes()), " for an input of shape ", shape_str(e.shape));
        if (gi.dtype() != e.dtype) gi = gi.to(e.dtype);
        Tensor& buf = completed(e.fn.get());
        if (!buf.defined())
          buf = std::move(gi);
        else if (!create_graph && engine_owned(buf))
          buf.add_(gi);  // as PyTorch's InputBuffer: no new tensor
        else
          buf = add(buf, gi);
      }
      if (--deps[e.fn.get()] == 0) ready.push_back(e.fn.get());
    }
  }
}

Tensor default_root_grad(const Tensor& root, const Tensor& gradient, const char* op) {
  if (gradient.defined()) {
    TC_CHECK(gradient.sizes() == root.sizes(), op, "gradient has shape ", shape_str(gradient.sizes()),
             " but the output has shape ", shape_str(root.sizes()));
    TC_CHECK(gradient.device() == root.device(), op, "gradient is on ", gradient.device(), " but the output is on ",
             root.device());
    return gradient.dtype() == root.dtype() ? gradient : gradient.to(root.dtype());
  }
  TC_CHECK(root.numel() == 1, op, "grad can be implicitly created only for scalar outputs; the output has shape ",
           shape_str(root.sizes()));
  return ones(root.sizes(), TensorOptions(root.dtype()).device(root.device()));
}

}  // namespace

void backward(const Tensor& root, const Tensor& gradient, std::optional<bool> retain_graph, bool create_graph) {
  TC_CHECK(root.defined(), "backward", "called on an undefined tensor");
  TC_CHECK(root.requires_grad(), "backward", "element 0 of tensors does not require grad and does not have a grad_fn");
  Tensor g = default_root_grad(root, gradient, "backward");
  Edge e = edge_for(root);
  // A nested backward (one run from a hook or a custom Function) queues into the outer list.
  std::vector<std::function<void()>> callbacks;
  const bool outermost = g_backward_callbacks == nullptr;
  if (outermost) g_backward_callbacks = &callbacks;
  std::exception_ptr error;
  try {
    run_backward(e.fn, g, retain_graph.value_or(create_graph), create_graph, nullptr);
  } catch (...) {
    error = std::current_exception();
  }
  if (!outermost) {
    if (error) std::rethrow_exception(error);
    return;
  }
  // The callbacks run even when the graph failed: a data-parallel reduction already in
  // flight must be waited for, or the next collective would pair with it.
  for (size_t i = 0; i < callbacks.size(); ++i) {  // a callback may queue another
    try {
      std::function<void()> cb = std::move(callbacks[i]);
      cb();
    } catch (...) {
      if (!error) error = std::current_exception();
    }
  }
  g_backward_callbacks = nullptr;
  if (error) std::rethrow_exception(error);
}

void queue_callback(std::function<void()> callback) {
  TC_CHECK(g_backward_callbacks != nullptr, "autograd::queue_callback",
           "can only be called while backward() runs on this thread (from a hook)");
  g_backward_callbacks->push_back(std::move(callback));
}

int64_t register_post_accumulate_grad_hook(const Tensor& leaf, PostAccumulateGradHook hook) {
  TC_CHECK(leaf.defined() && leaf.requires_grad() && !leaf.impl()->grad_fn, "register_post_accumulate_grad_hook",
           "post accumulate grad hooks cannot be registered on non-leaf tensors (or tensors that do not require grad)");
  TC_CHECK(hook != nullptr, "register_post_accumulate_grad_hook", "the hook is empty");
  const int64_t handle = g_next_hook_handle++;
  leaf.impl()->post_accumulate_grad_hooks.emplace_back(handle, std::move(hook));
  return handle;
}

void remove_post_accumulate_grad_hook(const Tensor& leaf, int64_t handle) {
  auto& hooks = leaf.impl()->post_accumulate_grad_hooks;
  std::erase_if(hooks, [&](const auto& h) { return h.first == handle; });
}

namespace {
// The root of autograd::grad's graph: the outputs' gradients, one per edge.
struct GraphRoot final : Node {
  std::vector<Tensor> grads;
  std::vector<Tensor> apply(const Tensor&) override { return grads; }
};
}  // namespace

std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs, std::optional<bool> retain_graph, bool create_graph,
                         bool allow_unused) {
  TC_CHECK(!outputs.empty(), "autograd::grad", "no outputs given");
  TC_CHECK(grad_outputs.empty() || grad_outputs.size() == outputs.size(), "autograd::grad", "got ", grad_outputs.size(),
           " grad_outputs for ", outputs.size(), " outputs");
  auto root = std::make_shared<GraphRoot>();
  root->name = "GraphRoot";
  for (size_t i = 0; i < outputs.size(); ++i) {
    const Tensor& y = outputs[i];
    TC_CHECK(y.defined() && y.requires_grad(), "autograd::grad", "output ", i,
             " does not require grad and does not have a grad_fn");
    root->grads.push_back(default_root_grad(y, grad_outputs.empty() ? Tensor() : grad_outputs[i], "autograd::grad"));
    root->next.push_back(edge_for(y));
  }
  std::unordered_map<Node*, Tensor> capture;
  std::vector<Node*> keys;
  // Holds the inputs' nodes: an accumulator made here for a leaf outside the graph would
  // otherwise die at once and its address could be reused by another node.
  std::vector<std::shared_ptr<Node>> alive;
  for (size_t i = 0; i < inputs.size(); ++i) {
    TC_CHECK(inputs[i].defined() && inputs[i].requires_grad(), "autograd::grad", "input ", i, " does not require grad");
    alive.push_back(edge_for(inputs[i]).fn);
    keys.push_back(alive.back().get());
    capture[keys.back()] = Tensor();
  }
  run_backward(root, root->grads[0], retain_graph.value_or(create_graph), create_graph, &capture);
  std::vector<Tensor> out;
  for (size_t i = 0; i < inputs.size(); ++i) {
    Tensor r = capture[keys[i]];
    TC_CHECK(r.defined() || allow_unused, "autograd::grad", "input ", i, " (shape ", shape_str(inputs[i].sizes()),
             ") was not used to compute the outputs; pass allow_unused = true to get an undefined gradient for it");
    if (r.defined() && r.dtype() != inputs[i].dtype()) {
      GradModeFor keep(create_graph);
      r = r.to(inputs[i].dtype());
    }
    out.push_back(r);
  }
  return out;
}

std::vector<Tensor> grad(const Tensor& output, const std::vector<Tensor>& inputs, const Tensor& grad_output,
                         std::optional<bool> retain_graph, bool create_graph, bool allow_unused) {
  return grad(std::vector<Tensor>{output}, inputs, std::vector<Tensor>{grad_output}, retain_graph, create_graph,
              allow_unused);
}

}  // namespace autograd

// ---- Tensor::backward (the other autograd accessors only read TensorImpl: core/tensor.cpp)

void Tensor::backward(const Tensor& gradient, std::optional<bool> retain_graph, bool create_graph) const {
  autograd::backward(*this, gradient, retain_graph, create_graph);
}

}  // namespace tc
