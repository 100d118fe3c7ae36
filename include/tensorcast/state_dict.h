/// \file
/// StateDict: named tensors, the one format for everything that saves and restores state
/// (optimizers, the GradScaler, modules). Scalars are stored as 0-d tensors (float64 or
/// int64) so a state dict maps one-to-one onto a safetensors file.
#pragma once
#include <limits>
#include <map>
#include <string>

#include "tensorcast/tensor.h"

namespace tc {

/// Named tensors: a module's, an optimizer's or a scaler's state (PyTorch's state_dict).
using StateDict = std::map<std::string, Tensor>;

/// \name Scalar entries
/// @{

/// A 0-d float64 tensor.
Tensor state_scalar(double value);
/// A 0-d int64 tensor.
Tensor state_int(int64_t value);
/// The entry `key`, or "[owner] state dict has no entry 'key'".
const Tensor& state_at(const StateDict& sd, const std::string& key, const char* owner);
/// @}

/// Checked reads of scalar entries, for dicts that come from files (which may hold anything):
/// the entry must hold exactly one value, finite, within [lo, hi] (and integral for
/// read_state_int, exact for int64 entries). Errors name the owner, the key, what was found
/// and what was expected.
double read_state_double(const StateDict& sd, const std::string& key, const char* owner,
                         double lo = -std::numeric_limits<double>::max(),
                         double hi = std::numeric_limits<double>::max());
/// The integer entry `key`, checked to lie in [lo, hi] ("[owner] ..." error otherwise).
int64_t read_state_int(const StateDict& sd, const std::string& key, const char* owner,
                       int64_t lo = std::numeric_limits<int64_t>::min(),
                       int64_t hi = std::numeric_limits<int64_t>::max());

}  // namespace tc
