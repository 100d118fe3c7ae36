// Internal: Storage and TensorImpl, the objects behind tc::Tensor, and helpers the ops
// use to make outputs and views.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "tensorcast/tensor.h"  // declares autograd::Node (incomplete here: core only holds pointers)

namespace tc {

// A block of device memory. Allocated storages are counted by memory_stats; storages
// wrapping caller memory (from_blob) are not and never free it.
struct Storage {
  void* data = nullptr;
  size_t nbytes = 0;
  Device device;
  bool owned = true;
  void* stream = nullptr;  // device storages: the cudaStream_t the block was allocated on, freed on
  // Bumped by every write tensorcast makes into existing memory (in-place ops, optimizer
  // steps, collectives): Tensor::_version(), PyTorch's version counter shared by views.
  // Inference tensors count their writes here too, though their _version() stays 0 (they
  // have no version counter, as PyTorch's): the caches that key on this count (autocast's
  // weight-cast cache, the product kernels' kept tiles) must see an inference weight
  // written in place inside InferenceMode as changed, and one relaxed add per in-place op
  // is not the cost InferenceMode exists to save.
  std::atomic<uint64_t> version{0};

  // Page-locked host memory (Tensor::pin_memory; CUDA builds): copies between it and a GPU
  // run asynchronously.
  bool pinned = false;

  Storage(size_t nbytes, Device device, bool pinned_host = false);  // allocates
  Storage(void* data, size_t nbytes, Device device);                // wraps, does not own
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
};

struct TensorImpl {
  std::shared_ptr<Storage> storage;
  Shape sizes;
  Shape strides;       // in elements
  int64_t offset = 0;  // in elements
  DType dtype = kFloat32;

  // autograd metadata, carried by core as c10's TensorImpl carries AutogradMeta; the node
  // type and the engine are the ops layer's (tensorcast/autograd.h, src/autograd)
  bool requires_grad = false;  // only meaningful on leaves; non-leaves have grad_fn
  // An inference tensor (c10's: no Autograd/ADInplaceOrView keys): allocated inside
  // tc::InferenceMode, or a view of one. Fixed at creation: make_tensor takes the thread's
  // mode, make_view the base's flag (a view of a normal tensor stays normal).
  bool inference = false;
  std::shared_ptr<autograd::Node> grad_fn;
  std::weak_ptr<autograd::Node> grad_accumulator;  // leaves: the node that fills .grad
  Tensor grad;
  // leaves: called with the leaf after each accumulation into .grad (data-parallel
  // training starts reducing a gradient as soon as it is complete); {handle, hook}
  std::vector<std::pair<int64_t, std::function<void(const Tensor&)>>> post_accumulate_grad_hooks;

  int64_t numel() const;
  Device device() const { return storage->device; }
  char* data() const { return static_cast<char*>(storage->data) + offset * element_size(dtype); }
};

// The thread's inference-mode flag (tc::InferenceMode, which src/autograd defines, sets it
// with grad mode): read here because every tensor allocated while it is on is an inference
// tensor.
bool inference_mode_enabled();
void set_inference_mode_enabled(bool enabled);

Shape contiguous_strides(const Shape& sizes);
int64_t shape_numel(const Shape& sizes);
bool is_contiguous_layout(const Shape& sizes, const Shape& strides);

// A new, contiguous, uninitialized tensor.
// A new contiguous tensor, uninitialized; pinned_host: in page-locked host memory.
Tensor make_tensor(const Shape& sizes, DType dtype, Device device = Device{}, bool pinned_host = false);
// A view of `base`'s storage with new geometry (no autograd recording).
Tensor make_view(const Tensor& base, Shape sizes, Shape strides, int64_t offset);

// ---- Dense layouts (PyTorch's memory-format preservation) ----
// A tensor is dense when its elements fill numel() consecutive slots of its storage in
// some order of its dims (e.g. channels-last NCHW: strides (H*W*C, 1, W*C, C)).

// The dims of (sizes, strides) from outermost to innermost in memory when the layout is
// dense and non-overlapping (size-1 dims first, in logical order); empty when it is not
// dense or has no elements.
Shape dense_stride_order(const Shape& sizes, const Shape& strides);
// The strides of a new dense tensor of `sizes` whose dims lie in memory in `order`.
Shape strides_for_order(const Shape& sizes, const Shape& order);
// A new uninitialized tensor of t's sizes in `dtype`, with t's layout when t is dense but
// not contiguous (empty_like preserving the memory format); contiguous otherwise.
Tensor empty_like_layout(const Tensor& t, DType dtype);
// The view of dense t with its dims permuted to memory order `order` (so it is contiguous).
Tensor memory_order_view(const Tensor& t, const Shape& order);

// Element strides of `t` broadcast to `shape` (t's dims align to the right of shape; a
// repeated dim gets stride 0); `op` names the caller in the error for incompatible shapes.
Shape broadcast_strides(const Tensor& t, const Shape& shape, const char* op);

// NumPy broadcasting of two shapes; throws "[op] shapes (..) and (..) cannot be broadcast".
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);

}  // namespace tc
