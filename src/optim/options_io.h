// Internal: reading and writing option values as state-dict entries, with [optim] errors.
#pragma once
#include <string>

#include "tensorcast/state_dict.h"

namespace tc::optim::detail {

inline void put_double(StateDict& sd, const std::string& key, double v) { sd[key] = state_scalar(v); }
inline void put_bool(StateDict& sd, const std::string& key, bool v) { sd[key] = state_int(v ? 1 : 0); }

// A one-element entry as a double; "[optim] state dict has no entry 'key'" when missing.
double get_double(const StateDict& sd, const std::string& key);
bool get_bool(const StateDict& sd, const std::string& key);

}  // namespace tc::optim::detail
