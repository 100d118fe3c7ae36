// Internal: every op of the op list (tensorcast/ops.def) as an enumerator, in the list's
// order, which is also the order of the built-in rows of the policy table. The public op
// definitions name their op as amp::OpId::op, so an op without a TC_POLICY line fails
// to compile ("'op' is not a member of 'tc::amp::OpId'").
#pragma once
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <string_view>

namespace tc::amp {

#define TC_DEFAULT(...)
#define TC_OP(...)

enum class OpId : uint16_t {
#define TC_POLICY(op, ...) op,
#include "tensorcast/ops.def"
#undef TC_POLICY
};

inline constexpr std::string_view kOpNames[] = {
#define TC_POLICY(op, ...) #op,
#include "tensorcast/ops.def"
#undef TC_POLICY
};

#undef TC_OP
#undef TC_DEFAULT

inline constexpr size_t kOpCount = std::size(kOpNames);
constexpr std::string_view op_name(OpId id) { return kOpNames[static_cast<size_t>(id)]; }

}  // namespace tc::amp
