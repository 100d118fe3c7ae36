// The loader's own permutation generator (internal). Fully specified here (SplitMix64 +
// Fisher-Yates with Lemire's unbiased bounded draw), unlike std::shuffle, so an epoch's
// order is the same on every platform and standard library.
#pragma once
#include <cstdint>
#include <vector>

namespace tc::data {

std::vector<int64_t> permutation(int64_t n, uint64_t seed);

}  // namespace tc::data
