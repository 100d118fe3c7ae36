// The global generator (core/random.h) and its seed. The tensors made from it (rand, randn,
// randint, randperm, dropout masks) and its state as a tensor are the ops layer's.
#include "core/random.h"

#include "tensorcast/factories.h"

namespace tc {

Generator& default_generator() {
  static Generator g;
  return g;
}

void manual_seed(uint64_t seed) {
  Generator& g = default_generator();
  std::lock_guard<std::mutex> lock(g.mutex);
  g.engine.seed(seed);
}

}  // namespace tc
