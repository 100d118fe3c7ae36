// Tensor metadata and element access. The Tensor methods that run kernels or record
// autograd nodes are the ops layer's: views in ops/views.cpp, copies, casts and in-place
// updates in ops/tensor_methods.cpp, to_vector and printing in ops/tensor_print.cpp.
#include <algorithm>
#include <sstream>

#include "core/tensor_impl.h"
#include "core/tls.h"
#include "tensorcast/convert.h"

namespace tc {

std::string shape_str(const Shape& s) {
  std::ostringstream os;
  os << "(";
  for (size_t i = 0; i < s.size(); ++i) os << (i ? ", " : "") << s[i];
  os << (s.size() == 1 ? ",)" : ")");
  return os.str();
}

namespace {

// a * b, or a tc::Error when it does not fit in int64: shapes come from files too, and an
// overflowing product would be undefined behaviour and a wrong allocation size.
int64_t checked_mul(int64_t a, int64_t b, const Shape& sizes) {
  int64_t r = 0;
  TC_CHECK(!__builtin_mul_overflow(a, b, &r), "tensor", "shape ", shape_str(sizes),
           " is too large: its element count or strides overflow int64");
  return r;
}

}  // namespace

int64_t shape_numel(const Shape& sizes) {
  for (int64_t s : sizes)
    if (s == 0) return 0;  // before multiplying: [0, 2^62, 4] is empty, not an overflow
  int64_t n = 1;
  for (int64_t s : sizes) n = checked_mul(n, s, sizes);
  return n;
}

Shape contiguous_strides(const Shape& sizes) {
  Shape st(sizes.size());
  int64_t acc = 1;
  for (size_t i = sizes.size(); i-- > 0;) {
    st[i] = acc;
    if (i > 0) acc = checked_mul(acc, std::max<int64_t>(sizes[i], 1), sizes);  // the outermost extent is not a stride
  }
  return st;
}

bool is_contiguous_layout(const Shape& sizes, const Shape& strides) {
  // A tensor without elements is contiguous whatever its strides (PyTorch's rule), so
  // contiguous() never copies one and no stride of it is ever multiplied out.
  if (std::find(sizes.begin(), sizes.end(), int64_t{0}) != sizes.end()) return true;
  int64_t expected = 1;
  for (size_t i = sizes.size(); i-- > 0;) {
    if (sizes[i] == 1) continue;
    if (strides[i] != expected) return false;
    expected *= sizes[i];
  }
  return true;
}

int64_t TensorImpl::numel() const { return shape_numel(sizes); }

namespace {
// tc::InferenceMode's flag; read by every allocation (make_tensor), so initial-exec.
thread_local bool t_inference_mode TC_TLS_FAST = false;
}  // namespace

bool inference_mode_enabled() { return t_inference_mode; }
void set_inference_mode_enabled(bool enabled) { t_inference_mode = enabled; }

Tensor make_tensor(const Shape& sizes, DType dtype, Device device, bool pinned_host) {
  for (int64_t s : sizes) TC_CHECK(s >= 0, "empty", "negative size in shape ", shape_str(sizes));
  auto impl = std::make_shared<TensorImpl>();
  impl->storage =
      std::make_shared<Storage>(static_cast<size_t>(shape_numel(sizes)) * element_size(dtype), device, pinned_host);
  impl->sizes = sizes;
  impl->strides = contiguous_strides(sizes);
  impl->dtype = dtype;
  impl->inference = t_inference_mode;
  return Tensor(std::move(impl));
}

Tensor make_view(const Tensor& base, Shape sizes, Shape strides, int64_t offset) {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = base.impl()->storage;
  impl->sizes = std::move(sizes);
  impl->strides = std::move(strides);
  impl->offset = offset;
  impl->dtype = base.dtype();
  impl->inference = base.impl()->inference;  // whatever the mode: c10's rule for views
  return Tensor(std::move(impl));
}

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  const size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    const int64_t x = i < n - a.size() ? 1 : a[i - (n - a.size())];
    const int64_t y = i < n - b.size() ? 1 : b[i - (n - b.size())];
    TC_CHECK(x == y || x == 1 || y == 1, op, "shapes ", shape_str(a), " and ", shape_str(b),
             " cannot be broadcast together");
    out[i] = x == 1 ? y : x;
  }
  return out;
}

int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op) {
  const int64_t n = std::max<int64_t>(ndim, 1);  // 0-d tensors accept dim 0 and -1
  TC_CHECK(dim >= -n && dim < n, op, "dimension ", dim, " out of range for a ", ndim, "-d tensor (expected to be in [",
           -n, ", ", n - 1, "])");
  return dim < 0 ? dim + n : dim;
}

#define TC_DEFINED(op) TC_CHECK(defined(), op, "called on an undefined tensor")

DType Tensor::dtype() const {
  TC_DEFINED("dtype");
  return impl_->dtype;
}
Device Tensor::device() const {
  TC_DEFINED("device");
  return impl_->device();
}
const Shape& Tensor::sizes() const {
  TC_DEFINED("sizes");
  return impl_->sizes;
}
const Shape& Tensor::strides() const {
  TC_DEFINED("strides");
  return impl_->strides;
}
int64_t Tensor::dim() const {
  TC_DEFINED("dim");
  return static_cast<int64_t>(impl_->sizes.size());
}
int64_t Tensor::numel() const {
  TC_DEFINED("numel");
  return impl_->numel();
}
int64_t Tensor::_version() const {
  TC_DEFINED("_version");
  if (impl_->inference) return 0;  // no version counter (PyTorch raises here; 0 keeps generic code working)
  return static_cast<int64_t>(impl_->storage->version.load(std::memory_order_relaxed));
}

bool Tensor::is_inference() const {
  TC_DEFINED("is_inference");
  return impl_->inference;
}

void increment_version(const Tensor& t) {
  if (t.defined()) t.impl()->storage->version.fetch_add(1, std::memory_order_relaxed);
}

int64_t Tensor::storage_offset() const {
  TC_DEFINED("storage_offset");
  return impl_->offset;
}
size_t Tensor::nbytes() const { return static_cast<size_t>(numel()) * element_size(dtype()); }
bool Tensor::is_contiguous() const {
  TC_DEFINED("is_contiguous");
  return is_contiguous_layout(impl_->sizes, impl_->strides);
}
bool Tensor::is_contiguous(MemoryFormat format) const {
  TC_DEFINED("is_contiguous");
  if (format == MemoryFormat::Contiguous) return is_contiguous();
  if (dim() != 4) return false;
  const Shape& sz = impl_->sizes;
  const Shape& st = impl_->strides;
  // NHWC: the (N, H, W, C) permutation is row-major.
  return is_contiguous_layout({sz[0], sz[2], sz[3], sz[1]}, {st[0], st[2], st[3], st[1]});
}
void* Tensor::raw_data() const {
  TC_DEFINED("data_ptr");
  return impl_->data();
}

int64_t Tensor::size(int64_t d) const {
  TC_CHECK(dim() > 0, "size", "a 0-d tensor has no dimensions");
  return impl_->sizes[wrap_dim(d, dim(), "size")];
}
int64_t Tensor::stride(int64_t d) const {
  TC_CHECK(dim() > 0, "stride", "a 0-d tensor has no dimensions");
  return impl_->strides[wrap_dim(d, dim(), "stride")];
}

double Tensor::item_double() const {
  TC_CHECK(numel() == 1, "item", "a tensor with ", numel(), " elements cannot be converted to a scalar");
  if (!device().is_cpu()) return detach().to(Device(kCPU)).item_double();  // waits for the device, as PyTorch's
  double v = 0;
  convert(raw_data(), dtype(), &v, kFloat64, 1);
  return v;
}

// ---- Tensor's autograd metadata (the engine, Tensor::backward, is src/autograd's)

Tensor& Tensor::requires_grad_(bool r) {
  TC_CHECK(defined(), "requires_grad_", "called on an undefined tensor");
  TC_CHECK(!r || is_floating(dtype()), "requires_grad_",
           "only tensors of floating point dtype can require "
           "gradients, got ",
           dtype_name(dtype()));
  TC_CHECK(impl_->grad_fn == nullptr || r, "requires_grad_",
           "you can only change requires_grad flags of leaf variables; use detach() to get a leaf");
  // Outside InferenceMode an inference tensor is immutable, its autograd flag included
  // (c10's check); inside, a parameter may be made requiring grad as usual.
  TC_CHECK(!r || !impl_->inference || t_inference_mode, "requires_grad_",
           "Setting requires_grad=True on inference tensor outside InferenceMode is not allowed.");
  impl_->requires_grad = r;
  return *this;
}

bool Tensor::requires_grad() const { return defined() && (impl_->requires_grad || impl_->grad_fn != nullptr); }
bool Tensor::is_leaf() const {
  TC_CHECK(defined(), "is_leaf", "called on an undefined tensor");
  return impl_->grad_fn == nullptr;
}
const Tensor& Tensor::grad() const {
  TC_CHECK(defined(), "grad", "called on an undefined tensor");
  return impl_->grad;
}
void Tensor::set_grad(const Tensor& g) const {
  TC_CHECK(!g.defined() || (g.sizes() == sizes() && g.dtype() == dtype()), "set_grad", "gradient of shape ",
           shape_str(g.sizes()), " and dtype ", dtype_name(g.dtype()), " does not match the tensor's ",
           shape_str(sizes()), " ", dtype_name(dtype()));
  impl_->grad = g;
}
std::shared_ptr<autograd::Node> Tensor::grad_fn() const {
  TC_CHECK(defined(), "grad_fn", "called on an undefined tensor");
  return impl_->grad_fn;
}

}  // namespace tc
