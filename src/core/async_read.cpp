// AsyncScalarRead (async_read.h).
#include "core/async_read.h"

#include "tensorcast/factories.h"

namespace tc::detail {

AsyncScalarRead::AsyncScalarRead(const Tensor& src) {
  TC_CHECK(src.defined() && src.numel() == 1 && src.dtype() == kFloat32, "AsyncScalarRead",
           "expected a one-element float32 tensor");
  TC_CHECK(!src.device().is_meta(), "AsyncScalarRead", "a meta tensor has no value to read");
  if (src.device().is_cpu()) {
    host_ = tc::full({}, static_cast<double>(*src.contiguous().data_ptr<float>()), kFloat32);
    return;
  }
  host_ = src.to(Device(kCPU), /*non_blocking=*/true);
  done_ = std::make_unique<cuda::Event>();
  done_->record(cuda::current_stream(src.device().index));
}

float AsyncScalarRead::value() const {
  TC_CHECK(host_.defined(), "AsyncScalarRead", "value() of an empty read");
  if (done_) done_->synchronize();
  return *host_.data_ptr<float>();
}

}  // namespace tc::detail
