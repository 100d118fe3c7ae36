/// \file
/// tc::InferenceMode: no_grad for code that will never meet autograd (c10::InferenceMode).
///
/// Inside an InferenceMode scope nothing is recorded, as under NoGradGuard, and every tensor
/// allocated there (factories and op results) is an *inference tensor*
/// (Tensor::is_inference()); a view has its base's kind. Inference tensors have no version
/// counter: in-place ops on them leave _version() at 0. In exchange they are restricted
/// outside the scope: a recorded op that takes one (it would be saved for backward, or
/// another input requires grad) raises "[autograd] OP: Inference tensors cannot be saved
/// for backward. ...", an in-place op on one raises "[OP] Inplace update to inference
/// tensor outside InferenceMode is not allowed. ...", and so does requires_grad_(true).
/// Functional ops outside that record nothing take them and give normal tensors; clone()
/// gives a normal copy to use with autograd. Normal tensors written in place inside the
/// scope still bump their version.
#pragma once

namespace tc {

/// Enables (or, with false, disables) inference mode in its scope, restoring the previous
/// state on destruction (c10::InferenceMode). Thread-local and nestable. Enabling it turns
/// grad mode off; disabling it turns grad mode on, as c10's does.
class InferenceMode {
 public:
  /// Enters inference mode (enabled) or leaves it for this scope (!enabled).
  explicit InferenceMode(bool enabled = true);
  /// Restores inference mode and grad mode as they were before this guard.
  ~InferenceMode();
  InferenceMode(const InferenceMode&) = delete;             ///< a scope guard: not copyable
  InferenceMode& operator=(const InferenceMode&) = delete;  ///< a scope guard: not assignable

  /// Whether inference mode is on for this thread (c10::InferenceMode::is_enabled()).
  static bool is_enabled();

 private:
  bool prev_inference_;
  bool prev_grad_;
};

}  // namespace tc
