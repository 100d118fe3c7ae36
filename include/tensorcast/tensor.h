// tc::Tensor: a cheap, shared handle to an n-d strided array plus its autograd metadata.
//
// Copies of a Tensor share one TensorImpl; views (view, transpose, narrow, expand, ...)
// make a new TensorImpl over the same Storage. Methods mirror libtorch's names.
#pragma once
#include <cstdint>
#include <initializer_list>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tensorcast/arg.h"
#include "tensorcast/device.h"
#include "tensorcast/dtype.h"
#include "tensorcast/error.h"

namespace tc {

using Shape = std::vector<int64_t>;
std::string shape_str(const Shape& s);  // "(64, 784)"

// A memory layout (libtorch's at::MemoryFormat): Contiguous is row-major; ChannelsLast is
// NHWC order for a 4-d (N, C, H, W) tensor (PyTorch's torch.channels_last).
enum class MemoryFormat { Contiguous, ChannelsLast };

struct TensorImpl;  // src/core/tensor_impl.h
namespace autograd {
struct Node;
}

struct TensorOptions {
  TensorOptions() = default;
  TensorOptions(DType d) : dtype_(d) {}        // NOLINT: tc::zeros({2}, tc::kBFloat16)
  TensorOptions(Device d) : device_(d) {}      // NOLINT
  TensorOptions(DeviceType d) : device_(d) {}  // NOLINT
  TC_ARG(DType, dtype) = kFloat32;
  TC_ARG(Device, device) = Device{};
  TC_ARG(bool, requires_grad) = false;
};

class Tensor {
 public:
  Tensor() = default;  // undefined: the "no tensor" of optional arguments
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  bool defined() const noexcept { return impl_ != nullptr; }
  TensorImpl* impl() const noexcept { return impl_.get(); }
  const std::shared_ptr<TensorImpl>& impl_ptr() const noexcept { return impl_; }
  bool is_same(const Tensor& o) const noexcept { return impl_ == o.impl_; }

  // --- metadata
  DType dtype() const;
  Device device() const;
  const Shape& sizes() const;
  const Shape& strides() const;
  int64_t size(int64_t dim) const;  // negative dims count from the end
  int64_t stride(int64_t dim) const;
  int64_t dim() const;
  int64_t numel() const;
  int64_t storage_offset() const;
  size_t nbytes() const;  // numel * element size
  bool is_contiguous() const;
  bool is_contiguous(MemoryFormat format) const;  // ChannelsLast: 4-d with NHWC strides
  bool is_floating_point() const { return is_floating(dtype()); }

  // How often the memory under this tensor (shared by its views) has been written in place
  // by tensorcast (PyTorch's tensor._version): the autocast weight-cast cache uses it to
  // tell a stale copy. Writes through data_ptr are not seen: call increment_version after.
  int64_t _version() const;

  // --- data access (CPU). data_ptr<T> checks T against the dtype.
  void* raw_data() const;  // address of the first element
  template <class T>
  T* data_ptr() const {
    TC_CHECK(dtype() == dtype_of<T>, "data_ptr", "tensor has dtype ", dtype_name(dtype()), " but data_ptr<",
             dtype_name(dtype_of<T>), "> was requested");
    return static_cast<T*>(raw_data());
  }
  double item_double() const;  // numel must be 1
  template <class T>
  T item() const {
    return static_cast<T>(item_double());
  }
  std::vector<double> to_vector() const;  // all elements in row-major order, as double

  // --- conversions and copies (differentiable where it makes sense)
  Tensor to(DType dtype) const;  // returns *this when the dtype already matches
  // Between devices. non_blocking (libtorch's): a copy from pinned host memory to a GPU
  // returns without waiting for the device (from pageable memory it is the same as
  // blocking); a copy from a GPU to the CPU returns at once with its result in pinned
  // memory, to be read only after tc::cuda::synchronize() (or a later wait on the stream).
  Tensor to(Device device, bool non_blocking = false) const;
  // A copy in page-locked host memory (CUDA builds with a GPU; *this when already pinned),
  // so copies to a GPU run asynchronously; is_pinned() says whether a tensor's memory is.
  Tensor pin_memory() const;
  bool is_pinned() const;
  Tensor clone() const;
  Tensor contiguous() const;  // *this when already contiguous
  // The same values in `format`'s memory layout, sizes unchanged (libtorch's
  // contiguous(MemoryFormat)): ChannelsLast gives a 4-d (N, C, H, W) tensor with NHWC
  // strides, which convolutions and pooling run on without layout reorders.
  Tensor contiguous(MemoryFormat format) const;
  Tensor detach() const;  // shares storage, no autograd history

  // --- views: share storage with *this
  Tensor view(const Shape& shape) const;     // one -1 is inferred; strides must allow it
  Tensor reshape(const Shape& shape) const;  // a view when possible, else a copy
  Tensor flatten(int64_t start_dim = 0, int64_t end_dim = -1) const;
  Tensor transpose(int64_t dim0, int64_t dim1) const;
  Tensor t() const;  // 2-d transpose (0-d and 1-d unchanged)
  Tensor permute(const Shape& dims) const;
  Tensor narrow(int64_t dim, int64_t start, int64_t length) const;
  Tensor slice(int64_t dim, int64_t start, int64_t end, int64_t step = 1) const;
  Tensor select(int64_t dim, int64_t index) const;
  Tensor operator[](int64_t index) const { return select(0, index); }
  Tensor expand(const Shape& shape) const;  // -1 keeps a size
  Tensor expand_as(const Tensor& other) const { return expand(other.sizes()); }
  Tensor unsqueeze(int64_t dim) const;
  Tensor squeeze() const;
  Tensor squeeze(int64_t dim) const;

  // --- autograd
  Tensor& requires_grad_(bool requires_grad = true);
  bool requires_grad() const;
  bool is_leaf() const;
  const Tensor& grad() const;  // undefined until a backward reaches it
  void set_grad(const Tensor& grad) const;
  std::shared_ptr<autograd::Node> grad_fn() const;
  // Gradient of this (scalar) tensor, or with an explicit `gradient` of the same shape.
  void backward(const Tensor& gradient = Tensor(), bool retain_graph = false) const;

  // --- in-place (not recorded by autograd; refused on leaves that require grad
  //     while grad mode is on, like PyTorch)
  Tensor& zero_();
  Tensor& fill_(double value);
  Tensor& copy_(const Tensor& src);  // broadcasts src, converts dtype
  Tensor& add_(const Tensor& other, double alpha = 1.0);
  Tensor& mul_(const Tensor& other);
  Tensor& mul_(double value);

  // --- math as methods (see ops.h for the free functions)
  Tensor sum() const;
  Tensor sum(const Shape& dims, bool keepdim = false) const;
  Tensor mean() const;
  Tensor mean(const Shape& dims, bool keepdim = false) const;
  Tensor exp() const;
  Tensor log() const;
  Tensor sqrt() const;
  Tensor abs() const;
  Tensor neg() const;
  Tensor pow(double exponent) const;
  Tensor relu() const;
  Tensor sigmoid() const;
  Tensor tanh() const;
  Tensor matmul(const Tensor& other) const;
  Tensor argmax(std::optional<int64_t> dim = std::nullopt, bool keepdim = false) const;

  std::string str() const;  // what operator<< prints

 private:
  std::shared_ptr<TensorImpl> impl_;
};

std::ostream& operator<<(std::ostream& os, const Tensor& t);

// Records a write into t's memory made outside tensorcast's ops (through data_ptr), so that
// caches keyed by the version (the autocast weight-cast cache) do not serve stale copies
// (torch.autograd.graph.increment_version).
void increment_version(const Tensor& t);

// Wraps a dimension index: -1 is the last dim. Throws "[op] dimension d out of range ...".
int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op);

}  // namespace tc
