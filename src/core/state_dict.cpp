// StateDict scalar helpers. Core: they make and read 0-d tensors directly, without ops.
#include "tensorcast/state_dict.h"

#include <cmath>

#include "core/tensor_impl.h"
#include "tensorcast/convert.h"

namespace tc {

Tensor state_scalar(double value) {
  Tensor t = make_tensor({}, kFloat64);
  *t.data_ptr<double>() = value;
  return t;
}

Tensor state_int(int64_t value) {
  Tensor t = make_tensor({}, kInt64);
  *t.data_ptr<int64_t>() = value;
  return t;
}

const Tensor& state_at(const StateDict& sd, const std::string& key, const char* owner) {
  auto it = sd.find(key);
  TC_CHECK(it != sd.end() && it->second.defined(), owner, "state dict has no entry '", key, "'");
  return it->second;
}

namespace {

const Tensor& one_value(const StateDict& sd, const std::string& key, const char* owner) {
  const Tensor& t = state_at(sd, key, owner);
  TC_CHECK(t.numel() == 1, owner, "state dict entry '", key, "' should hold one value, got shape ",
           shape_str(t.sizes()));
  TC_CHECK(t.device().is_cpu(), owner, "state dict entry '", key, "' is not a CPU tensor");
  return t;
}

}  // namespace

double read_state_double(const StateDict& sd, const std::string& key, const char* owner, double lo, double hi) {
  const double v = one_value(sd, key, owner).item_double();
  TC_CHECK(v >= lo && v <= hi, owner, "state dict entry '", key, "' is ", v, ", expected a finite value in [", lo, ", ",
           hi, "]");
  return v;
}

int64_t read_state_int(const StateDict& sd, const std::string& key, const char* owner, int64_t lo, int64_t hi) {
  const Tensor& t = one_value(sd, key, owner);
  int64_t v = 0;
  if (is_floating(t.dtype())) {
    // Float entries (PyTorch's GradScaler keeps its counters as floats) must be integral and
    // inside int64 before the cast, which is undefined behaviour otherwise.
    const double d = t.item_double();
    TC_CHECK(std::isfinite(d) && d == std::floor(d) && d >= -0x1p63 && d < 0x1p63, owner, "state dict entry '", key,
             "' is ", d, ", expected an integer");
    v = static_cast<int64_t>(d);
  } else {
    convert(t.raw_data(), t.dtype(), &v, kInt64, 1);  // its one element; exact for every integer dtype
  }
  TC_CHECK(v >= lo && v <= hi, owner, "state dict entry '", key, "' is ", v, ", expected an integer in [", lo, ", ", hi,
           "]");
  return v;
}

}  // namespace tc
