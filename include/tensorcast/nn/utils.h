/// \file
/// tc::nn::utils: gradient clipping, as torch.nn.utils.
#pragma once
#include <functional>
#include <limits>
#include <vector>

#include "tensorcast/tensor.h"

namespace tc::nn::utils {

/// Scales the gradients of `parameters` in place so that their total norm (the norm of the
/// per-tensor norms) is at most `max_norm`, and returns the total norm before clipping.
/// norm_type: any p > 0, or infinity for the max-norm. The norm is accumulated in float64
/// whatever the gradients' dtype; parameters without a gradient are skipped.
/// With the GradScaler, clip between unscale_ and step, as PyTorch documents:
/// \code{.cpp}
///   scaler.scale(loss).backward(); scaler.unscale_(opt);
///   tc::nn::utils::clip_grad_norm_(model->parameters(), 1.0); scaler.step(opt); scaler.update();
/// \endcode
/// A non-finite total norm (an overflowed fp16 step) is returned as is and the gradients
/// are left untouched, so the scaler still skips the step and its report still names the
/// tensor that overflowed (PyTorch would multiply them by NaN or 0); error_if_nonfinite
/// throws "[clip_grad_norm_] ..." instead.
double clip_grad_norm_(const std::vector<Tensor>& parameters, double max_norm, double norm_type = 2.0,
                       bool error_if_nonfinite = false);
/// clip_grad_norm_ of gradients split across processes: `combine` turns this process's
/// sum of |g|^norm_type (its max for the inf-norm) into the total over all of them (an
/// all-reduce), so that every process clips by the same norm. Every process must call it,
/// with or without gradients.
double clip_grad_norm_combined(const std::vector<Tensor>& parameters, double max_norm, double norm_type,
                               bool error_if_nonfinite, const std::function<double(double)>& combine);
/// clip_grad_norm_ of one parameter.
double clip_grad_norm_(const Tensor& parameter, double max_norm, double norm_type = 2.0,
                       bool error_if_nonfinite = false);

/// Clamps every gradient element to [-clip_value, clip_value] in place.
void clip_grad_value_(const std::vector<Tensor>& parameters, double clip_value);

}  // namespace tc::nn::utils
