// StateDict scalar helpers.
#include "tensorcast/state_dict.h"

#include "tensorcast/ops.h"

namespace tc {

Tensor state_scalar(double value) { return scalar_tensor(value, kFloat64); }
Tensor state_int(int64_t value) { return tensor(std::vector<int64_t>{value}, {}, kInt64).reshape({}); }

const Tensor& state_at(const StateDict& sd, const std::string& key, const char* owner) {
  auto it = sd.find(key);
  TC_CHECK(it != sd.end() && it->second.defined(), owner, "state dict has no entry '", key, "'");
  return it->second;
}

}  // namespace tc
