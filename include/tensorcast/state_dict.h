// StateDict: named tensors, the one format for everything that saves and restores state
// (optimizers, the GradScaler, modules). Scalars are stored as 0-d tensors (float64 or
// int64) so a state dict maps one-to-one onto a safetensors file.
#pragma once
#include <map>
#include <string>

#include "tensorcast/tensor.h"

namespace tc {

using StateDict = std::map<std::string, Tensor>;

// Helpers for scalar entries; `at` throws "[owner] state dict has no entry 'key'".
Tensor state_scalar(double value);
Tensor state_int(int64_t value);
const Tensor& state_at(const StateDict& sd, const std::string& key, const char* owner);

}  // namespace tc
