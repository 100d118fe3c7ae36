// Internal: the implementations behind the dispatched public ops, in namespace tc::impl,
// declared from the op list (tensorcast/ops.def) with the same defaults.
//
// The public functions (src/amp/ops.cpp) hand these to the autocast dispatcher
// (src/amp/dispatch.h). Code inside an op that needs another op calls the impl:: form: it
// is already below the autocast layer, and a composite op must not be re-cast piece by piece.
#pragma once
#include "tensorcast/autograd.h"
#include "tensorcast/ops.h"

namespace tc::impl {

#define TC_DEFAULT(...) = __VA_ARGS__
#define TC_POLICY(op, policy, pytorch, note)
#define TC_OP(ret, op, params, args) ret op params;
#include "tensorcast/ops.def"
#undef TC_OP
#undef TC_POLICY
#undef TC_DEFAULT

}  // namespace tc::impl
