/// \file
/// The autocast policy table: which dtype each op runs in inside an autocast region.
///
/// Every public op of ops.h passes through one dispatcher (src/amp/dispatch.h) that reads
/// this table: lower_precision casts the floating inputs to the region's 16-bit dtype,
/// fp32 casts them to float32, promote casts them to the widest floating input type, and
/// passthrough leaves them alone. The entries follow PyTorch's lists
/// (aten/src/ATen/autocast_mode.cpp); docs/amp-policy.md is generated from this table.
///
/// \code{.cpp}
///   tc::amp::set_policy("my_attention", tc::amp::CastPolicy::LowerPrecision);
///   auto [q16, k16] = tc::amp::autocast_args("my_attention", q, k);   // inside my op
/// \endcode
#pragma once
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <vector>

#include "tensorcast/tensor.h"

namespace tc::amp {

/// What autocast does with an op's floating inputs: cast to the autocast dtype, cast to float32, promote to the
/// widest, or leave them.
enum class CastPolicy : uint8_t { LowerPrecision, Fp32, Promote, Passthrough };

/// "lower_precision", "fp32", "promote", "passthrough" (the spelling of the issue and docs).
std::string_view policy_name(CastPolicy p);

/// One op's row of the policy table.
struct PolicyEntry {
  std::string op;                               ///< the op's name ("matmul")
  CastPolicy policy = CastPolicy::Passthrough;  ///< what autocast does with it
  std::string pytorch;                          ///< what PyTorch does with this op (CUDA list / CPU list), for the docs
  std::string note;                             ///< why, where we differ or where it needs saying
  bool builtin = true;                          ///< false: registered by set_policy for a user's own op
};

/// A snapshot of the table in a stable order: built-in ops as listed, then user ops.
std::vector<PolicyEntry> policy_table();
/// The policy of `op`; an op not in the table is passthrough.
CastPolicy get_policy(std::string_view op);
/// Whether `op` is in the table.
bool has_policy(std::string_view op);
/// Overrides a built-in entry or registers a user op. Takes effect for every thread at
/// the next call of that op.
void set_policy(std::string_view op, CastPolicy policy);
/// Puts a built-in entry back to its shipped policy (user ops are left as they are).
void reset_policy(std::string_view op);

/// The markdown of docs/amp-policy.md (tools/tc_amp_policy_doc prints it).
std::string policy_table_markdown();

/// Applies `op`'s policy to these tensors as the dispatcher would for a built-in op and
/// returns them in order. Outside an autocast region they come back unchanged.
std::vector<Tensor> autocast_args(std::string_view op, const std::vector<Tensor>& tensors);

/// autocast_args for separate tensors: returns them cast, as a tuple.
template <class... Ts>
requires(sizeof...(Ts) >= 1 && (std::is_convertible_v<const Ts&, const Tensor&> && ...))
    std::tuple<decltype((void)sizeof(Ts), Tensor())...> autocast_args(std::string_view op, const Ts&... tensors) {
  std::vector<Tensor> cast = autocast_args(op, std::vector<Tensor>{Tensor(tensors)...});
  size_t i = 0;
  return {(static_cast<void>(sizeof(Ts)), cast[i++])...};
}

}  // namespace tc::amp
