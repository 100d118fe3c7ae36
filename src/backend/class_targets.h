// Internal: the targets of a class-index loss (cross_entropy, nll_loss) as the device's
// kernels read them, made by the device's class_targets kernel (backend/kernels.def).
#pragma once
#include <cstdint>
#include <memory>

#include "tensorcast/tensor.h"

namespace tc::backend {

struct ClassTargets {
  int64_t cdim = 0;  // the class dim of the input (1, or 0 for unbatched (C))
  int64_t classes = 0;
  int64_t ignore_index = -100;
  Tensor target;  // contiguous int64, one per row (row-major over the non-class dims)
  Tensor weight;  // contiguous float64, one per class; undefined: all ones
  // What a backend keeps besides, in its own form (the CPU: the targets read to the host).
  std::shared_ptr<const void> host;
};

}  // namespace tc::backend
