// Internal: Storage and TensorImpl, the objects behind tc::Tensor, and helpers the ops
// use to make outputs and views.
#pragma once
#include <cstddef>
#include <functional>
#include <memory>

#include "tensorcast/autograd.h"
#include "tensorcast/tensor.h"

namespace tc {

// A block of device memory. Allocated storages are counted by memory_stats; storages
// wrapping caller memory (from_blob) are not and never free it.
struct Storage {
  void* data = nullptr;
  size_t nbytes = 0;
  Device device;
  bool owned = true;

  Storage(size_t nbytes, Device device);          // allocates
  Storage(void* data, size_t nbytes, Device device);  // wraps, does not own
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
};

struct TensorImpl {
  std::shared_ptr<Storage> storage;
  Shape sizes;
  Shape strides;    // in elements
  int64_t offset = 0;  // in elements
  DType dtype = kFloat32;

  // autograd
  bool requires_grad = false;        // only meaningful on leaves; non-leaves have grad_fn
  std::shared_ptr<autograd::Node> grad_fn;
  std::weak_ptr<autograd::Node> grad_accumulator;  // leaves: the node that fills .grad
  Tensor grad;

  int64_t numel() const;
  Device device() const { return storage->device; }
  char* data() const { return static_cast<char*>(storage->data) + offset * element_size(dtype); }
};

Shape contiguous_strides(const Shape& sizes);
int64_t shape_numel(const Shape& sizes);
bool is_contiguous_layout(const Shape& sizes, const Shape& strides);

// A new, contiguous, uninitialized tensor.
Tensor make_tensor(const Shape& sizes, DType dtype, Device device = Device{});
// A view of `base`'s storage with new geometry (no autograd recording).
Tensor make_view(const Tensor& base, Shape sizes, Shape strides, int64_t offset);

// NumPy broadcasting of two shapes; throws "[op] shapes (..) and (..) cannot be broadcast".
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);

}  // namespace tc
