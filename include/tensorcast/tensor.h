/// \file
/// tc::Tensor: a cheap, shared handle to an n-d strided array plus its autograd metadata.
///
/// Copies of a Tensor share one TensorImpl; views (view, transpose, narrow, expand, ...)
/// make a new TensorImpl over the same Storage. Methods mirror libtorch's names.
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

/// A tensor's sizes (or strides), outermost dimension first.
using Shape = std::vector<int64_t>;
std::string shape_str(const Shape& s);  ///< "(64, 784)"

/// A memory layout (libtorch's at::MemoryFormat): Contiguous is row-major; ChannelsLast is
/// NHWC order for a 4-d (N, C, H, W) tensor (PyTorch's torch.channels_last).
enum class MemoryFormat { Contiguous, ChannelsLast };

struct TensorImpl;  // src/core/tensor_impl.h
namespace autograd {
struct Node;
}

/// What a factory makes: dtype, device and whether the result requires grad (libtorch's TensorOptions).
struct TensorOptions {
  TensorOptions() = default;
  /// Options with this dtype, e.g. `tc::zeros({2}, tc::kBFloat16)`.
  TensorOptions(DType d) : dtype_(d) {}  // NOLINT: tc::zeros({2}, tc::kBFloat16)
  /// Options on this device.
  TensorOptions(Device d) : device_(d) {}  // NOLINT
  /// Options on this device type (index 0).
  TensorOptions(DeviceType d) : device_(d) {}  // NOLINT
  TC_ARG(DType, dtype) = kFloat32;             ///< the element type (default float32)
  TC_ARG(Device, device) = Device{};           ///< the device (default the CPU)
  TC_ARG(bool, requires_grad) = false;         ///< whether the result is a leaf that requires grad
};

/// An n-d strided array (or none: see defined()) with its autograd metadata; copies share it.
class Tensor {
 public:
  Tensor() = default;  ///< undefined: the "no tensor" of optional arguments
  /// Wraps an implementation (tensorcast's own code makes these).
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  /// False for a default-constructed (undefined) tensor.
  bool defined() const noexcept { return impl_ != nullptr; }
  /// The implementation (src/core/tensor_impl.h), for tensorcast's own code.
  TensorImpl* impl() const noexcept { return impl_.get(); }
  /// The implementation's shared handle, for tensorcast's own code.
  const std::shared_ptr<TensorImpl>& impl_ptr() const noexcept { return impl_; }
  /// Whether both handles share one TensorImpl (the same tensor, not just equal values).
  bool is_same(const Tensor& o) const noexcept { return impl_ == o.impl_; }

  // --- metadata
  /// \name Metadata
  /// Element type, device, geometry and layout.
  /// @{

  /// The element type.
  DType dtype() const;
  /// Where the memory lives.
  Device device() const;
  /// Sizes, outermost dimension first.
  const Shape& sizes() const;
  /// Strides in elements, outermost dimension first.
  const Shape& strides() const;
  int64_t size(int64_t dim) const;  ///< negative dims count from the end
  /// The stride of `dim` in elements (negative dims count from the end).
  int64_t stride(int64_t dim) const;
  /// The number of dimensions.
  int64_t dim() const;
  /// The number of elements (1 for a 0-d tensor).
  int64_t numel() const;
  /// Where this tensor's first element is in its storage, in elements.
  int64_t storage_offset() const;
  size_t nbytes() const;  ///< numel * element size
  /// Whether the elements are row-major without gaps.
  bool is_contiguous() const;
  bool is_contiguous(MemoryFormat format) const;  ///< ChannelsLast: 4-d with NHWC strides
  /// Whether the dtype is a floating type (float32, float64, bfloat16, float16).
  bool is_floating_point() const { return is_floating(dtype()); }
  /// @}

  /// How often the memory under this tensor (shared by its views) has been written in place
  /// by tensorcast (PyTorch's tensor._version): the autocast weight-cast cache uses it to
  /// tell a stale copy. Writes through data_ptr are not seen: call increment_version after.
  /// An inference tensor has no version counter: 0, whatever is written into it.
  int64_t _version() const;
  /// Whether this is an inference tensor (torch.Tensor.is_inference): allocated inside a
  /// tc::InferenceMode scope, or a view of such a tensor (tensorcast/inference_mode.h).
  bool is_inference() const;

  // --- data access (CPU). data_ptr<T> checks T against the dtype.
  void* raw_data() const;  ///< address of the first element
  template <class T>
  /// The CPU address of the first element as T*; throws unless T matches the dtype.
  T* data_ptr() const {
    TC_CHECK(dtype() == dtype_of<T>, "data_ptr", "tensor has dtype ", dtype_name(dtype()), " but data_ptr<",
             dtype_name(dtype_of<T>), "> was requested");
    return static_cast<T*>(raw_data());
  }
  double item_double() const;  ///< numel must be 1
  template <class T>
  /// The single element (numel must be 1), converted to T.
  T item() const {
    return static_cast<T>(item_double());
  }
  std::vector<double> to_vector() const;  ///< all elements in row-major order, as double

  // --- conversions and copies (differentiable where it makes sense)
  Tensor to(DType dtype) const;  ///< returns *this when the dtype already matches
  /// Between devices. non_blocking (libtorch's): a copy from pinned host memory to a GPU
  /// returns without waiting for the device (from pageable memory it is the same as
  /// blocking); a copy from a GPU to the CPU returns at once with its result in pinned
  /// memory, to be read only after tc::cuda::synchronize() (or a later wait on the stream).
  Tensor to(Device device, bool non_blocking = false) const;
  /// A copy in page-locked host memory (CUDA builds with a GPU; *this when already pinned),
  /// so copies to a GPU run asynchronously; is_pinned() says whether a tensor's memory is.
  Tensor pin_memory() const;
  /// Whether the memory is page-locked (see pin_memory()).
  bool is_pinned() const;
  /// A copy with its own (contiguous) storage; differentiable.
  Tensor clone() const;
  Tensor contiguous() const;  ///< *this when already contiguous
  /// The same values in `format`'s memory layout, sizes unchanged (libtorch's
  /// contiguous(MemoryFormat)): ChannelsLast gives a 4-d (N, C, H, W) tensor with NHWC
  /// strides, which convolutions and pooling run on without layout reorders.
  Tensor contiguous(MemoryFormat format) const;
  Tensor detach() const;  ///< shares storage, no autograd history

  // --- views: share storage with *this
  Tensor view(const Shape& shape) const;     ///< one -1 is inferred; strides must allow it
  Tensor reshape(const Shape& shape) const;  ///< a view when possible, else a copy
  /// Dimensions start_dim..end_dim merged into one (a view when strides allow, else a copy).
  Tensor flatten(int64_t start_dim = 0, int64_t end_dim = -1) const;
  /// dim0 and dim1 swapped (a view).
  Tensor transpose(int64_t dim0, int64_t dim1) const;
  Tensor t() const;  ///< 2-d transpose (0-d and 1-d unchanged)
  /// Dimensions reordered: dimension i of the result is dims[i] of this tensor (a view).
  Tensor permute(const Shape& dims) const;
  /// `length` elements of `dim` from `start` (a view).
  Tensor narrow(int64_t dim, int64_t start, int64_t length) const;
  /// Elements start, start + step, ... before end along `dim` (a view; ends are clamped, as Python's slices).
  Tensor slice(int64_t dim, int64_t start, int64_t end, int64_t step = 1) const;
  /// The index-th entry along `dim`, which is removed (a view).
  Tensor select(int64_t dim, int64_t index) const;
  /// select(0, index): the index-th row.
  Tensor operator[](int64_t index) const { return select(0, index); }
  Tensor expand(const Shape& shape) const;  ///< -1 keeps a size
  /// expand(other.sizes()).
  Tensor expand_as(const Tensor& other) const { return expand(other.sizes()); }
  /// A size-1 dimension inserted at `dim` (a view).
  Tensor unsqueeze(int64_t dim) const;
  /// Every size-1 dimension removed (a view).
  Tensor squeeze() const;
  /// `dim` removed if its size is 1, else the same shape (a view).
  Tensor squeeze(int64_t dim) const;

  // --- autograd
  /// Sets whether autograd records ops on this leaf; returns *this.
  Tensor& requires_grad_(bool requires_grad = true);
  /// Whether autograd records ops on this tensor (a leaf that asked, or a result of one).
  bool requires_grad() const;
  /// True for a tensor not made by a recorded op (parameters, inputs, detached tensors).
  bool is_leaf() const;
  const Tensor& grad() const;  ///< undefined until a backward reaches it
  /// Replaces the accumulated gradient (an undefined tensor clears it).
  void set_grad(const Tensor& grad) const;
  /// The autograd node that made this tensor (nullptr for a leaf).
  std::shared_ptr<autograd::Node> grad_fn() const;
  /// Gradient of this (scalar) tensor, or with an explicit `gradient` of the same shape.
  /// retain_graph defaults to create_graph; create_graph records the backward formulas, so
  /// the .grad() it writes can be differentiated again (autograd::backward).
  void backward(const Tensor& gradient = Tensor(), std::optional<bool> retain_graph = std::nullopt,
                bool create_graph = false) const;

  // --- in-place (not recorded by autograd; refused on leaves that require grad
  //     while grad mode is on, like PyTorch)
  /// \name In-place
  /// Not recorded by autograd; refused on leaves that require grad while grad mode is on, like
  /// PyTorch. They return *this.
  /// @{

  /// Sets every element to zero.
  Tensor& zero_();
  /// Sets every element to `value`.
  Tensor& fill_(double value);
  Tensor& copy_(const Tensor& src);  ///< broadcasts src, converts dtype
  /// this += alpha * other (other broadcasts).
  Tensor& add_(const Tensor& other, double alpha = 1.0);
  /// this *= other (other broadcasts).
  Tensor& mul_(const Tensor& other);
  /// this *= value.
  Tensor& mul_(double value);
  /// @}

  // --- math as methods (see ops.h for the free functions)
  /// \name Math as methods
  /// The ops of ops.h as methods: `x.sum()` is `tc::sum(x)`, recorded by autograd the same way.
  /// @{

  /// The sum of all elements (0-d).
  Tensor sum() const;
  /// The sum over `dims`; keepdim keeps them with size 1.
  Tensor sum(const Shape& dims, bool keepdim = false) const;
  /// The mean of all elements (0-d).
  Tensor mean() const;
  /// The mean over `dims`; keepdim keeps them with size 1.
  Tensor mean(const Shape& dims, bool keepdim = false) const;
  /// e^x, elementwise.
  Tensor exp() const;
  /// The natural logarithm, elementwise.
  Tensor log() const;
  /// The square root, elementwise.
  Tensor sqrt() const;
  /// |x|, elementwise.
  Tensor abs() const;
  /// -x, elementwise.
  Tensor neg() const;
  /// x^exponent, elementwise.
  Tensor pow(double exponent) const;
  /// max(x, 0), elementwise.
  Tensor relu() const;
  /// 1 / (1 + e^-x), elementwise.
  Tensor sigmoid() const;
  /// The hyperbolic tangent, elementwise.
  Tensor tanh() const;
  /// The matrix product with `other` (tc::matmul: batched, broadcasting).
  Tensor matmul(const Tensor& other) const;
  /// The index of the largest element (over all, flattened, or along `dim`), as int64.
  Tensor argmax(std::optional<int64_t> dim = std::nullopt, bool keepdim = false) const;
  /// @}

  std::string str() const;  ///< what operator<< prints

 private:
  std::shared_ptr<TensorImpl> impl_;
};

/// Prints str(): the values, then dtype and shape.
std::ostream& operator<<(std::ostream& os, const Tensor& t);

/// Records a write into t's memory made outside tensorcast's ops (through data_ptr), so that
/// caches keyed by the version (the autocast weight-cast cache) do not serve stale copies
/// (torch.autograd.graph.increment_version).
void increment_version(const Tensor& t);

/// Wraps a dimension index: -1 is the last dim. Throws "[op] dimension d out of range ...".
int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op);

}  // namespace tc
