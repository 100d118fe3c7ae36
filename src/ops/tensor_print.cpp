// Reading a tensor's values out: to_vector (any dtype and layout, as double) and printing
// (Tensor::str, operator<<). The strided, converting copy is a kernel, and str() names the
// grad_fn node, so these Tensor methods are the ops layer's.
#include <cmath>
#include <iomanip>
#include <ostream>
#include <sstream>

#include "backend/cpu/loops/elementwise.h"
#include "core/tensor_impl.h"
#include "tensorcast/autograd.h"
#include "tensorcast/factories.h"

namespace tc {

std::vector<double> Tensor::to_vector() const {
  TC_CHECK(defined(), "to_vector", "called on an undefined tensor");
  if (!device().is_cpu()) return detach().to(Device(kCPU)).to_vector();
  std::vector<double> out(static_cast<size_t>(numel()));
  Tensor dst = from_blob(out.data(), sizes(), kFloat64);
  cpu::copy_into(dst, *this);
  return out;
}

namespace {

void print_value(std::ostream& os, double v, DType dt) {
  if (std::isnan(v))
    os << "nan";
  else if (std::isinf(v))
    os << (v > 0 ? "inf" : "-inf");
  else if (dt == kBool)
    os << (v != 0 ? "True" : "False");
  else if (!is_floating(dt))
    os << static_cast<int64_t>(v);
  else if (v == std::trunc(v) && std::fabs(v) < 1e16)  // PyTorch's "3." for integral floats
    os << (std::signbit(v) && v == 0 ? "-" : "") << static_cast<int64_t>(v) << ".";
  else
    os << std::setprecision(dt == kFloat64 ? 8 : 4) << v;
}

void print_dims(std::ostream& os, const std::vector<double>& v, const Shape& s, size_t d, int64_t& idx, DType dt,
                int indent, bool summarize) {
  if (d == s.size()) {
    print_value(os, v[idx++], dt);
    return;
  }
  // Like PyTorch, tensors over 1000 elements elide the middle of dims longer than 6.
  const int64_t limit = summarize ? 6 : INT64_MAX;
  os << "[";
  const int64_t inner = shape_numel(Shape(s.begin() + d + 1, s.end()));
  for (int64_t i = 0; i < s[d]; ++i) {
    if (i > 0) {
      os << ",";
      if (d + 1 < s.size())
        os << "\n" << std::string(indent + 1, ' ');
      else
        os << " ";
    }
    if (s[d] > limit && i == limit / 2) {
      os << "...";
      idx += (s[d] - limit) * inner;
      i = s[d] - limit / 2 - 1;
      continue;
    }
    print_dims(os, v, s, d + 1, idx, dt, indent + 1, summarize);
  }
  os << "]";
}

}  // namespace

std::string Tensor::str() const {
  if (!defined()) return "tensor(undefined)";
  std::ostringstream os;
  os << "tensor(";
  int64_t idx = 0;
  print_dims(os, to_vector(), sizes(), 0, idx, dtype(), 7, numel() > 1000);
  if (dtype() != kFloat32 && dtype() != kInt64 && dtype() != kBool) os << ", dtype=" << dtype_name(dtype());
  if (impl_->grad_fn)
    os << ", grad_fn=<" << impl_->grad_fn->name << ">";
  else if (impl_->requires_grad)
    os << ", requires_grad=True";
  os << ")";
  return os.str();
}

std::ostream& operator<<(std::ostream& os, const Tensor& t) { return os << t.str(); }

}  // namespace tc
