// The op database: one OpInfo per dispatched public op of ops.h (and per call variant
// where the differentiable inputs differ, as PyTorch's OpInfo variant_test_name), so that
// every op is checked the same way on every dtype and device by tests/test_op_db.cpp.
//
// An entry gives the op's policy-table name, the dtypes it supports, which inputs are
// differentiable, tolerances, the expected autocast policy (PyTorch's lists, as written
// in docs/amp-policy.md) and a sample generator. Each Sample carries its input tensors,
// the call (a closure holding the non-tensor arguments) and a float64 reference written
// with plain loops over the inputs' values (never the same tensorcast op in float64).
//
//   for (const OpInfo& op : op_db())
//     for (const Sample& s : op.samples(kBFloat16)) { auto out = s.op(s.inputs); ... }
//
// Adding an op: add an entry in op_db.cpp with contiguous, non-contiguous (transposed,
// sliced, expanded, permuted), 0-d and empty samples where the op allows them. The
// coverage test in test_op_db.cpp fails for a dispatched op without an entry.
#pragma once
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/testing.h"
#include "tensorcast/amp/policy.h"

namespace tc::testing {

// One output of a reference: row-major float64 values and the shape.
struct RefOut {
  Shape shape;
  std::vector<double> values;
  bool integral = false;       // an int64 index output, compared exactly
  std::optional<DType> dtype;  // the expected dtype when not the sample's dtype
};

using OpCall = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;
using RefFn = std::function<std::vector<RefOut>(const std::vector<Tensor>&)>;

struct Sample {
  std::string desc;            // "contiguous", "transposed", "0-d", "dims (0, 2) keepdim", ...
  std::vector<Tensor> inputs;  // tensor arguments (undefined = an optional tensor left out)
  OpCall op;                   // runs the op; outputs[0] is the differentiable output
  RefFn ref;                   // float64 reference from the (CPU) inputs; null: none
  // Accumulation bound for reductions and products: (number of terms) * (largest term) *
  // log2 growth. The tolerance gains 2 * u_acc * acc, u_acc the unit roundoff of the
  // accumulation dtype (float32 for 16-bit and float32, float64 for float64).
  double acc = 0;
  bool gradcheck = true;   // small and smooth enough for gradcheck
  bool autocast = true;    // the call is the op alone (no derived statistics)
  std::optional<Tol> tol;  // replaces the entry's forward tolerance (statistical checks)

  bool noncontiguous() const;  // some defined input is not contiguous
};

struct OpInfo {
  std::string name;     // the policy-table name ("add")
  std::string variant;  // "" or a variant ("scalar"); id() = name[_variant]
  std::vector<DType> dtypes;
  std::function<std::vector<Sample>(DType)> samples;
  std::vector<int> grad_inputs;  // differentiable inputs (indices into Sample::inputs); empty: none
  bool gradgrad = false;         // double backward implemented (create_graph): gradgradcheck runs
  amp::CastPolicy policy = amp::CastPolicy::Passthrough;  // expected autocast policy
  std::map<DType, Tol> fwd_tol;                           // overrides of the forward tolerance
  std::map<DType, Tol> grad_tol;                          // overrides of the gradcheck tolerance

  std::string id() const { return variant.empty() ? name : name + "_" + variant; }
  bool differentiable() const { return !grad_inputs.empty(); }
  // Defaults: tol_for(dt, 4) forward; float64 {1e-7, 1e-7} and tol_for(dt, 8) gradcheck.
  Tol forward_tolerance(DType dt) const;
  Tol gradcheck_tolerance(DType dt) const;
};

const std::vector<OpInfo>& op_db();

// The ids of the entries whose double backward exists (Differentiable::kTwice in src/ops,
// so backward with create_graph can be differentiated again): the op table runs
// gradgradcheck on them and checks that every other differentiable entry refuses a second
// backward with "[autograd] double backward of OP is not implemented".
const std::set<std::string>& double_backward_ops();

// Unit roundoff of the dtype reductions and products of `dt` accumulate in.
double accumulation_roundoff(DType dt);

}  // namespace tc::testing
