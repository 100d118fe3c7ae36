// tc::InferenceMode: grad mode (this layer's) and the inference flag that allocations read
// (core's), set and restored together.
#include "tensorcast/inference_mode.h"

#include "core/tensor_impl.h"
#include "tensorcast/autograd.h"

namespace tc {

InferenceMode::InferenceMode(bool enabled) : prev_inference_(inference_mode_enabled()), prev_grad_(is_grad_enabled()) {
  // c10's: entering inference mode disables grad mode, leaving it (enabled = false) enables
  // it, so a nested InferenceMode(false) records again.
  set_grad_enabled(!enabled);
  set_inference_mode_enabled(enabled);
}

InferenceMode::~InferenceMode() {
  set_grad_enabled(prev_grad_);
  set_inference_mode_enabled(prev_inference_);
}

bool InferenceMode::is_enabled() { return inference_mode_enabled(); }

}  // namespace tc
