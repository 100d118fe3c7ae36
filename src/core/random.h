// Internal: the global generator behind rand, randn, randint and dropout.
#pragma once
#include <cstdint>
#include <mutex>
#include <random>

namespace tc {

struct Generator {
  std::mutex mutex;
  std::mt19937_64 engine{0x5eed};
  // Uniform double in [0, 1) with 53 random bits.
  double uniform() { return static_cast<double>(engine() >> 11) * 0x1p-53; }
};
Generator& default_generator();

}  // namespace tc
