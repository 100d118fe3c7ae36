// What the dispatcher casts for one call: the plan (device, target dtype) from the op's
// policy and its tensor arguments, and autocast_args for users' own ops.
#include "amp/state.h"

namespace tc::amp {
namespace detail {
namespace {

// PyTorch's is_eligible: a floating tensor on the region's device; float64 never casts.
bool eligible(const Tensor& t, DeviceType device) {
  return t.defined() && t.device().type == device && is_floating(t.dtype()) && t.dtype() != kFloat64;
}

}  // namespace

CastPlan plan_casts(CastPolicy policy, const Tensor* const* tensors, size_t n) {
  CastPlan plan;
  if (policy == CastPolicy::Passthrough) return plan;
  const Tensor* first = nullptr;
  for (size_t i = 0; i < n && !first; ++i)
    if (tensors[i]->defined()) first = tensors[i];
  if (!first) return plan;
  plan.device = first->device().type;
  if (!is_autocast_enabled(plan.device)) return plan;
  switch (policy) {
    case CastPolicy::LowerPrecision:
      plan.to = get_autocast_dtype(plan.device);
      plan.cast = true;
      break;
    case CastPolicy::Fp32:
      plan.to = kFloat32;
      plan.cast = true;
      break;
    case CastPolicy::Promote: {
      // The widest eligible floating type. As torch.result_type, 0-d tensors decide only
      // when no dimensioned one is floating: bf16 (N) * fp32 () stays bf16, as in PyTorch.
      bool have_dim = false, have_scalar = false;
      DType dim_t = kFloat32, scalar_t = kFloat32;
      for (size_t i = 0; i < n; ++i) {
        const Tensor& t = *tensors[i];
        if (!eligible(t, plan.device)) continue;
        bool& have = t.dim() > 0 ? have_dim : have_scalar;
        DType& acc = t.dim() > 0 ? dim_t : scalar_t;
        acc = have ? promote_types(acc, t.dtype()) : t.dtype();
        have = true;
      }
      if (!have_dim && !have_scalar) return plan;
      plan.to = have_dim ? dim_t : scalar_t;
      plan.cast = true;
      plan.widen_only = true;  // the op's own result_type handles a wider 0-d operand
      break;
    }
    case CastPolicy::Passthrough:
      break;
  }
  return plan;
}

Tensor apply_cast(const CastPlan& plan, const Tensor& t) {
  if (plan.widen_only && t.defined() && promote_types(t.dtype(), plan.to) != plan.to) return t;
  return cached_cast(plan.to, t, plan.device);
}

}  // namespace detail

std::vector<Tensor> autocast_args(std::string_view op, const std::vector<Tensor>& tensors) {
  if (!detail::t_autocast_active) return tensors;
  std::vector<const Tensor*> ptrs;
  ptrs.reserve(tensors.size());
  for (const Tensor& t : tensors) ptrs.push_back(&t);
  const detail::CastPlan plan = detail::plan_casts(get_policy(op), ptrs.data(), ptrs.size());
  if (!plan.cast) return tensors;
  std::vector<Tensor> out;
  out.reserve(tensors.size());
  for (const Tensor& t : tensors) out.push_back(detail::apply_cast(plan, t));
  return out;
}

}  // namespace tc::amp
