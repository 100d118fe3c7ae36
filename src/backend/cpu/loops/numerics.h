// Internal: the counting passes behind tc::amp::NumericsReport (what a tensor's values
// would become in fp16, and which weight updates bf16 would lose).
#pragma once
#include <cstdint>

#include "core/tensor_impl.h"

namespace tc::cpu {

// How the values of a tensor fall against fp16's range. The thresholds are those of
// round-to-nearest-even into fp16: at most 2^-25 in magnitude rounds to zero, below
// 2^-14 - 2^-25 rounds to a subnormal (fewer than 11 significant bits), 65520 and above
// rounds to inf.
struct Fp16RangeCounts {
  int64_t total = 0;
  int64_t zero = 0;       // exactly 0 already
  int64_t flush = 0;      // nonzero but would round to 0 in fp16
  int64_t subnormal = 0;  // would be an fp16 subnormal
  int64_t overflow = 0;   // finite but would round to inf in fp16
  int64_t nonfinite = 0;  // inf or NaN already
  double amax = 0;        // largest finite magnitude
};

// One read-only pass over `t` (floating, on the CPU, any strides and dtype).
Fp16RangeCounts count_fp16_range(const Tensor& t);

// Adds counts into any struct with the same fields (the report's per-tensor totals too).
template <class Totals>
void accumulate(Totals& into, const Fp16RangeCounts& c) {
  into.total += c.total;
  into.zero += c.zero;
  into.flush += c.flush;
  into.subnormal += c.subnormal;
  into.overflow += c.overflow;
  into.nonfinite += c.nonfinite;
  into.amax = into.amax > c.amax ? into.amax : c.amax;
}

// Of the elements of `before`/`after` (the same weights around one optimizer step, same
// size, any floating dtypes) whose gradient `grad` is nonzero, those that moved by less
// than half a bf16 ulp of the old weight: the updates that bf16 weights would lose.
struct LostUpdates {
  int64_t with_grad = 0, lost = 0;
};
LostUpdates count_lost_bf16_updates(const Tensor& before, const Tensor& after, const Tensor& grad);

}  // namespace tc::cpu
