// Internal: the value of a one-element float32 tensor on its way to the host. For a CUDA
// tensor the copy goes into pinned memory behind the work queued on the current stream so
// far, and nothing waits until value() is asked for (then only for that copy): how the
// GradScaler and the optimizers learn about a skipped step without a host sync per step.
// For a CPU tensor the value is taken at once.
#pragma once
#include <memory>

#include "tensorcast/cuda.h"
#include "tensorcast/tensor.h"

namespace tc::detail {

class AsyncScalarRead {
 public:
  AsyncScalarRead() = default;
  explicit AsyncScalarRead(const Tensor& src);
  bool ready() const { return !done_ || done_->query(); }  // value() would not wait
  float value() const;                                     // waits for the copy when needed

 private:
  Tensor host_;  // CPU (pinned for a CUDA source)
  std::unique_ptr<cuda::Event> done_;
};

}  // namespace tc::detail
