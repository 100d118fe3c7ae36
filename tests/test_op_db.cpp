// The op table test (PyTorch's OpInfo tests): every entry of tests/common/op_db.h, on every
// dtype it supports and every device, checked the same way:
//   forward         each sample against its float64 plain-loop reference (inputs are exact
//                   in the dtype, so the reference sees the same values), with the dtype's
//                   tolerance plus the accumulation bound of reductions and products;
//   gradcheck       the analytic gradient (backward in the dtype) against float64 central
//                   differences, all differentiable inputs at once and each one alone;
//   non-contiguous  transposed / sliced / expanded / permuted samples give the outputs and
//                   gradients of their contiguous copies;
//   autocast        the policy table says what PyTorch's lists say (docs/amp-policy.md),
//                   and inside an autocast region the op really runs in that dtype.
// Test names read Ops/OpDb.Checks/<op>[_<variant>]_<dtype>_<device>; CUDA cases skip without
// a GPU, and run every check above on the device (gradcheck's differences evaluated there).
// OpDbCoverage: every op of tensorcast/ops.def has an entry. OpDbSelfTest:
// the checks do fail on broken entries (a wrong kernel, a wrong gradient, a kernel that
// ignores strides, a policy turned passthrough), and no tolerance passes a 5% error.
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <cctype>
#include <cmath>
#include <functional>
#include <optional>
#include <ostream>
#include <set>
#include <string>
#include <vector>

#include "amp/dispatch.h"
#include "common/cuda_testing.h"  // kBuiltWithCudnn
#include "common/op_db.h"
#include "common/testing.h"
#include "tensorcast/cuda.h"

namespace tc {
namespace {

using testing::OpInfo;
using testing::RefOut;
using testing::Sample;
using testing::Tol;

struct Param {
  const OpInfo* op;
  DType dtype;
  DeviceType device;
};

void PrintTo(const Param& p, std::ostream* os) {
  *os << p.op->id() << " " << dtype_name(p.dtype) << " " << (p.device == kCPU ? "cpu" : "cuda");
}

std::vector<Param> all_params() {
  std::vector<Param> p;
  for (const OpInfo& op : testing::op_db())
    for (DType dt : op.dtypes)
      for (DeviceType dev : {kCPU, kCUDA}) p.push_back({&op, dt, dev});
  return p;
}

std::string param_name(const ::testing::TestParamInfo<Param>& info) {
  std::string s = info.param.op->id() + "_" + std::string(dtype_name(info.param.dtype)) + "_" +
                  (info.param.device == kCPU ? "cpu" : "cuda");
  for (char& c : s)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return s;
}

std::string describe(const Tensor& t) {
  return t.defined() ? std::string(dtype_name(t.dtype())) + shape_str(t.sizes()) : std::string("undefined");
}

std::string describe(const Sample& s) {
  std::string d = s.desc + " [";
  for (size_t i = 0; i < s.inputs.size(); ++i) d += (i ? ", " : "") + describe(s.inputs[i]);
  return d + "]";
}

// The checks of one entry in one dtype on one device; the TEST_P below runs them all, and
// the self-tests at the end run them on deliberately broken entries.
struct Check {
  const OpInfo& op;
  DType dt;
  DeviceType dev;

  Device device() const { return Device(dev); }
  std::vector<Tensor> on_device(const std::vector<Tensor>& in) const {
    std::vector<Tensor> out;
    for (const Tensor& t : in) out.push_back(t.defined() ? t.to(device()) : t);
    return out;
  }
  // The inputs gradcheck differentiates: the entry's differentiable inputs that are
  // defined and floating in this sample.
  std::vector<size_t> grad_positions(const std::vector<Tensor>& in) const {
    std::vector<size_t> pos;
    for (int i : op.grad_inputs)
      if (static_cast<size_t>(i) < in.size() && in[i].defined() && in[i].is_floating_point()) pos.push_back(i);
    return pos;
  }
  Tol output_tolerance(const Sample& s, bool integral, double acc_factor) const {
    if (integral) return {0, 0};
    Tol tol = s.tol.value_or(op.forward_tolerance(dt));
    tol.atol += acc_factor * testing::accumulation_roundoff(dt) * s.acc;
    return tol;
  }

  // A gradcheck sample as a function of its differentiable inputs alone: only they go
  // through gradcheck (it makes float64 copies of them); integer targets, conditions and
  // the like stay bound as they are. `leaves`: those inputs as leaves requiring grad;
  // `plain`: the same, not requiring grad. Nullopt when the sample has none.
  struct GradCase {
    testing::Fn f;
    std::vector<Tensor> leaves, plain;
    std::vector<size_t> pos;
  };
  std::optional<GradCase> grad_case(const Sample& s) const {
    const std::vector<Tensor> inputs = on_device(s.inputs);
    GradCase c;
    c.pos = grad_positions(inputs);
    if (c.pos.empty()) return std::nullopt;
    c.f = [inputs, pos = c.pos, op = s.op](const std::vector<Tensor>& g) {
      std::vector<Tensor> in = inputs;
      for (size_t k = 0; k < pos.size(); ++k) in[pos[k]] = g[k];
      return op(in)[0];
    };
    for (size_t p : c.pos) {
      c.leaves.push_back(inputs[p].detach().requires_grad_());
      c.plain.push_back(inputs[p].detach());
    }
    return c;
  }

  void forward() const;
  void gradcheck() const;
  void gradgradcheck() const;
  void double_backward_refused() const;
  void noncontiguous() const;
  void autocast() const;
};

// Runs s.op, turning an exception into a failure that names the sample.
std::optional<std::vector<Tensor>> run(const Sample& s, const std::vector<Tensor>& in) {
  try {
    return s.op(in);
  } catch (const std::exception& e) {
    ADD_FAILURE() << describe(s) << " threw: " << e.what();
    return std::nullopt;
  }
}

void Check::forward() const {
  int checked = 0;
  for (const Sample& s : op.samples(dt)) {
    if (!s.ref) continue;
    SCOPED_TRACE(describe(s));
    const auto out = run(s, on_device(s.inputs));
    if (!out) continue;
    const std::vector<RefOut> ref = s.ref(s.inputs);
    EXPECT_EQ(out->size(), ref.size());
    for (size_t k = 0; k < std::min(ref.size(), out->size()); ++k) {
      const Tensor y = (*out)[k].to(Device(kCPU));
      const DType want = ref[k].integral ? kInt64 : ref[k].dtype.value_or(dt);
      EXPECT_EQ(y.dtype(), want) << "output " << k;
      EXPECT_EQ(y.sizes(), ref[k].shape) << "output " << k << ": shape " << shape_str(y.sizes());
      if (y.sizes() != ref[k].shape) continue;
      EXPECT_TRUE(testing::all_close(y, ref[k].values, output_tolerance(s, ref[k].integral, 2.0))) << "output " << k;
    }
    ++checked;
  }
  EXPECT_GT(checked, 0) << op.id() << " has no sample with a reference";
}

// Sets the intra-op thread count for its scope.
class ThreadsGuard {
 public:
  explicit ThreadsGuard(int n) : prev_(get_num_threads()) { set_num_threads(n); }
  ~ThreadsGuard() { set_num_threads(prev_); }
  ThreadsGuard(const ThreadsGuard&) = delete;
  ThreadsGuard& operator=(const ThreadsGuard&) = delete;

 private:
  int prev_;
};

void Check::gradcheck() const {
  // gradcheck evaluates the op thousands of times on tiny tensors: with several threads
  // each evaluation pays a fork/join (and, on a loaded machine, seconds in all). The other
  // checks run multi-threaded, including a backward of every non-contiguous sample.
  const ThreadsGuard one_thread(1);
  const Tol tol = op.gradcheck_tolerance(dt);
  int checked = 0;
  for (const Sample& s : op.samples(dt)) {
    if (!s.gradcheck) continue;
    SCOPED_TRACE(describe(s));
    const std::optional<GradCase> c = grad_case(s);
    if (!c) continue;
    try {
      EXPECT_TRUE(testing::gradcheck(c->f, c->leaves, tol)) << "all differentiable inputs";
      // Each input alone: the backward must skip the others' gradients and still give this one's.
      for (size_t only = 0; c->pos.size() > 1 && only < c->pos.size(); ++only) {
        std::vector<Tensor> one = c->plain;
        one[only] = c->leaves[only];
        EXPECT_TRUE(testing::gradcheck(c->f, one, tol)) << "only input " << c->pos[only];
      }
    } catch (const std::exception& e) {
      ADD_FAILURE() << "threw: " << e.what();
    }
    ++checked;
  }
  EXPECT_GT(checked, 0) << op.id() << " is differentiable but has no gradcheck sample";
}

// Double backward, in float64 only (second differences of 16-bit math say little), on
// the first few gradcheck samples: each costs a backward per perturbed element.
void Check::gradgradcheck() const {
  const ThreadsGuard one_thread(1);
  int checked = 0;
  for (const Sample& s : op.samples(dt)) {
    if (!s.gradcheck || checked == 4) continue;
    SCOPED_TRACE(describe(s));
    const std::optional<GradCase> c = grad_case(s);
    if (!c) continue;
    try {
      EXPECT_TRUE(testing::gradgradcheck(c->f, c->leaves, {1e-6, 1e-6}));
    } catch (const std::exception& e) {
      ADD_FAILURE() << "threw: " << e.what();
    }
    ++checked;
  }
  EXPECT_GT(checked, 0) << op.id() << " claims double backward but has no gradcheck sample";
}

// An op that does not claim double backward: differentiating its create_graph gradient
// raises the named error (rather than giving a silently wrong second derivative).
void Check::double_backward_refused() const {
  for (const Sample& s : op.samples(dt)) {
    if (!s.gradcheck) continue;
    SCOPED_TRACE(describe(s));
    const std::optional<GradCase> c = grad_case(s);
    if (!c) continue;
    const Tensor y = c->f(c->leaves);
    const Tensor w = testing::uniform(y.sizes(), y.dtype(), 0.5, 1.5, 7).to(device()).requires_grad_();
    const std::vector<Tensor> gs =
        autograd::grad({y}, c->leaves, {w}, true, /*create_graph=*/true, /*allow_unused=*/true);
    Tensor total;
    for (const Tensor& g : gs)
      if (g.defined()) total = total.defined() ? add(total, sum(g)) : sum(g);
    ASSERT_TRUE(total.defined() && total.requires_grad()) << "the create_graph gradient has no graph";
    try {
      total.backward();
      ADD_FAILURE()
          << "double backward of " << op.id()
          << " works: add it to double_backward_ops() (tests/common/op_db.cpp) so that gradgradcheck checks it";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("[autograd] double backward of "), std::string::npos) << e.what();
    }
    return;
  }
}

void Check::noncontiguous() const {
  int checked = 0;
  for (const Sample& s : op.samples(dt)) {
    if (!s.noncontiguous()) continue;
    SCOPED_TRACE(describe(s));
    std::vector<Tensor> a = on_device(s.inputs), b;
    for (const Tensor& t : a) b.push_back(t.defined() ? t.contiguous() : t);
    const std::vector<size_t> pos = grad_positions(a);
    for (size_t p : pos) {
      a[p] = a[p].detach().requires_grad_();
      b[p] = b[p].detach().requires_grad_();
    }
    const auto ya = run(s, a), yb = run(s, b);
    if (!ya || !yb) continue;
    EXPECT_EQ(ya->size(), yb->size());
    for (size_t k = 0; k < std::min(ya->size(), yb->size()); ++k) {
      const Tensor& u = (*ya)[k];
      const Tensor& v = (*yb)[k];
      EXPECT_EQ(u.dtype(), v.dtype()) << "output " << k;
      EXPECT_TRUE(testing::all_close(u, v, output_tolerance(s, !u.is_floating_point(), 4.0))) << "output " << k;
    }
    std::vector<Tensor> ga, gb;
    for (size_t p : pos) {
      ga.push_back(a[p]);
      gb.push_back(b[p]);
    }
    const Tensor& y0a = (*ya)[0];
    const Tensor& y0b = (*yb)[0];
    EXPECT_EQ(y0a.requires_grad(), y0b.requires_grad());
    if (!ga.empty() && y0a.requires_grad() && y0b.requires_grad()) {
      const Tensor g = testing::uniform(y0a.sizes(), y0a.dtype(), 0.5, 1.5, 99).to(device());
      try {
        const std::vector<Tensor> da = autograd::grad(y0a, ga, g), db = autograd::grad(y0b, gb, g);
        EXPECT_EQ(da.size(), db.size());
        for (size_t k = 0; k < std::min(da.size(), db.size()); ++k) {
          EXPECT_EQ(da[k].sizes(), ga[k].sizes()) << "gradient of input " << pos[k];
          EXPECT_TRUE(testing::all_close(da[k], db[k], op.gradcheck_tolerance(dt))) << "gradient of input " << pos[k];
        }
      } catch (const std::exception& e) {
        ADD_FAILURE() << "backward threw: " << e.what();
      }
    }
    ++checked;
  }
  EXPECT_GT(checked, 0) << op.id() << " has no non-contiguous sample";
}

void Check::autocast() const {
  const amp::CastPolicy want = op.policy;
  EXPECT_TRUE(amp::has_policy(op.name)) << op.name << " is not in the policy table";
  EXPECT_EQ(amp::policy_name(amp::get_policy(op.name)), amp::policy_name(want))
      << "tc::amp::get_policy(\"" << op.name << "\") (docs/amp-policy.md lists PyTorch's choice)";
  // Behaviour: inside a region, the op gives what it gives on inputs cast by hand as the
  // policy says. A region dtype other than the inputs' makes lower_precision visible.
  const DType region = dt == kBFloat16 ? kFloat16 : kBFloat16;
  std::optional<DType> cast_to;  // what the policy does to a floating input of dtype dt
  if (dt != kFloat64 && want == amp::CastPolicy::LowerPrecision) cast_to = region;
  if (dt != kFloat64 && want == amp::CastPolicy::Fp32) cast_to = kFloat32;
  int checked = 0;
  for (const Sample& s : op.samples(dt)) {
    if (!s.autocast) continue;
    SCOPED_TRACE(describe(s));
    const std::vector<Tensor> in = on_device(s.inputs);
    std::vector<Tensor> by_hand = in;
    if (cast_to)
      for (Tensor& t : by_hand)  // float64 and non-floating tensors are never cast
        if (t.defined() && t.is_floating_point() && t.dtype() != kFloat64) t = t.to(*cast_to);
    const auto expected = run(s, by_hand);
    std::optional<std::vector<Tensor>> got;
    {
      amp::AutocastGuard guard(dev, region);
      got = run(s, in);
    }
    if (!expected || !got) continue;
    EXPECT_EQ(got->size(), expected->size());
    for (size_t k = 0; k < std::min(got->size(), expected->size()); ++k) {
      EXPECT_EQ(dtype_name((*got)[k].dtype()), dtype_name((*expected)[k].dtype()))
          << "output " << k << " under autocast (" << dtype_name(region) << " region, policy " << amp::policy_name(want)
          << ")";
      EXPECT_TRUE(testing::equal((*got)[k], (*expected)[k])) << "output " << k;
    }
    ++checked;
  }
  EXPECT_GT(checked, 0);
}

class OpDb : public ::testing::TestWithParam<Param> {
 protected:
  void SetUp() override {
    if (GetParam().device != kCUDA) return;
    if (!cuda::is_available()) GTEST_SKIP() << "no CUDA device: " << cuda::unavailable_reason();
    if (GetParam().op->id() == "conv2d" && !testing::kBuiltWithCudnn)
      GTEST_SKIP() << "built without cuDNN (conv2d's CUDA kernels)";
  }
  Check check() const { return {*GetParam().op, GetParam().dtype, GetParam().device}; }
};

// One test per entry, dtype and device (ctest runs each in its own process: four tests
// each would quadruple the process start-ups, which cost more than the checks). A failure
// names the check in its trace.
TEST_P(OpDb, Checks) {
  const Check c = check();
  {
    SCOPED_TRACE("check: forward against the float64 reference");
    c.forward();
  }
  // On CUDA every check runs on the device: gradcheck's analytic gradients are the CUDA
  // backward's, its float64 central differences evaluate the op on the GPU too.
  if (c.op.differentiable()) {
    SCOPED_TRACE("check: gradcheck");
    c.gradcheck();
  }
  if (c.op.differentiable() && c.dt == kFloat64) {
    SCOPED_TRACE(c.op.gradgrad ? "check: gradgradcheck" : "check: double backward refused");
    c.op.gradgrad ? c.gradgradcheck() : c.double_backward_refused();
  }
  {
    SCOPED_TRACE("check: non-contiguous samples against their contiguous copies");
    c.noncontiguous();
  }
  {
    SCOPED_TRACE("check: autocast policy");
    c.autocast();
  }
}

INSTANTIATE_TEST_SUITE_P(Ops, OpDb, ::testing::ValuesIn(all_params()), param_name);

// Every id in double_backward_ops() names an entry (a typo would silently check nothing).
TEST(OpDbCoverage, DoubleBackwardListNamesEntries) {
  std::set<std::string> ids;
  for (const OpInfo& op : testing::op_db()) ids.insert(op.id());
  for (const std::string& id : testing::double_backward_ops()) EXPECT_TRUE(ids.count(id)) << id;
}

// The ops the dispatcher defines: every op with a TC_OP line in the op list.
std::set<std::string> dispatched_ops() {
  std::set<std::string> ops;
#define TC_DEFAULT(...)
#define TC_POLICY(op, policy, pytorch, note)
#define TC_OP(ret, op, params, args) ops.insert(#op);
#include "tensorcast/ops.def"
#undef TC_OP
#undef TC_POLICY
#undef TC_DEFAULT
  return ops;
}

// Every dispatched op has an entry, and every entry names a dispatched op of the policy
// table.
TEST(OpDbCoverage, EveryDispatchedOpHasAnEntry) {
  const std::set<std::string> dispatched = dispatched_ops();
  std::set<std::string> names, ids;
  for (const OpInfo& op : testing::op_db()) {
    names.insert(op.name);
    EXPECT_TRUE(ids.insert(op.id()).second) << "duplicate entry " << op.id();
    EXPECT_TRUE(dispatched.count(op.name)) << op.name << " is not a dispatched op of tensorcast/ops.def";
    EXPECT_TRUE(amp::has_policy(op.name)) << op.name << " is not in the policy table";
  }
  for (const std::string& op : dispatched)
    EXPECT_TRUE(names.count(op)) << op
                                 << " is dispatched (tensorcast/ops.def) but has no entry in tests/common/op_db.cpp";
  EXPECT_GT(dispatched.size(), 40u);
}

// ------------------------------------------------------------------ the checks can fail

// The checks run on deliberately broken entries (a wrong kernel, a wrong gradient, a
// kernel that ignores strides, a policy turned to passthrough) must report failures.

int failures_of(const std::function<void()>& f) {
  ::testing::TestPartResultArray results;
  {
    ::testing::ScopedFakeTestPartResultReporter reporter(
        ::testing::ScopedFakeTestPartResultReporter::INTERCEPT_ONLY_CURRENT_THREAD, &results);
    f();
  }
  int n = 0;
  for (int i = 0; i < results.size(); ++i) n += results.GetTestPartResult(i).failed();
  return n;
}

const OpInfo& entry(const std::string& id) {
  for (const OpInfo& op : testing::op_db())
    if (op.id() == id) return op;
  throw std::runtime_error("no op_db entry " + id);
}

// `id`'s entry restricted to the samples `pick` selects, each calling `op` instead.
OpInfo mutant(const std::string& id, std::function<bool(const Sample&)> pick, testing::OpCall op) {
  OpInfo m = entry(id);
  m.samples = [gen = m.samples, pick, op](DType dt) {
    std::vector<Sample> kept;
    for (Sample& s : gen(dt))
      if (pick(s)) {
        s.op = op;
        kept.push_back(std::move(s));
      }
    return kept;
  };
  return m;
}

bool starts_with(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

TEST(OpDbSelfTest, ForwardCatchesAWrongKernel) {
  // gelu's erf form computed with the tanh approximation (at most ~5e-4 off).
  const OpInfo m = mutant(
      "gelu", [](const Sample& s) { return starts_with(s.desc, "none"); },
      [](const std::vector<Tensor>& in) { return std::vector<Tensor>{gelu(in[0], "tanh")}; });
  for (DType dt : {kFloat32, kFloat64}) {
    EXPECT_EQ(failures_of([&] { Check{entry("gelu"), dt, kCPU}.forward(); }), 0) << dtype_name(dt);
    EXPECT_GT(failures_of([&] { Check{m, dt, kCPU}.forward(); }), 0) << dtype_name(dt);
  }
}

TEST(OpDbSelfTest, ForwardAndLayoutChecksCatchAKernelIgnoringStrides) {
  // exp reading a transposed input's storage as if it were contiguous.
  const OpInfo m = mutant(
      "exp", [](const Sample& s) { return s.desc == "exp transposed"; },
      [](const std::vector<Tensor>& in) {
        const Tensor raw = from_blob(in[0].raw_data(), in[0].sizes(), TensorOptions(in[0].dtype()));
        return std::vector<Tensor>{exp(raw)};
      });
  for (DType dt : {kFloat32, kBFloat16}) {
    ASSERT_EQ(m.samples(dt).size(), 1u);
    EXPECT_GT(failures_of([&] { Check{m, dt, kCPU}.forward(); }), 0) << dtype_name(dt);
    EXPECT_GT(failures_of([&] { Check{m, dt, kCPU}.noncontiguous(); }), 0) << dtype_name(dt);
  }
}

TEST(OpDbSelfTest, GradcheckCatchesAWrongGradient) {
  // The forward of exp, the gradient 1.25 exp(x).
  const OpInfo m = mutant(
      "exp", [](const Sample& s) { return s.desc == "exp contiguous"; },
      [](const std::vector<Tensor>& in) {
        const Tensor d = in[0].detach();
        return std::vector<Tensor>{add(exp(d), mul(sub(in[0], d), mul(exp(d), 1.25)))};
      });
  for (DType dt : {kFloat32, kBFloat16, kFloat16, kFloat64}) {
    EXPECT_EQ(failures_of([&] { Check{m, dt, kCPU}.forward(); }), 0) << dtype_name(dt);
    EXPECT_GT(failures_of([&] { Check{m, dt, kCPU}.gradcheck(); }), 0) << dtype_name(dt);
  }
}

// exp with its backward recorded by hand: `formula` from the output (detached) and the
// incoming gradient, marked `d`.
OpInfo exp_recorded(autograd::Differentiable d,
                    std::function<Tensor(const Tensor& g, const Tensor& x, const Tensor& out)> formula) {
  return mutant(
      "exp", [](const Sample& s) { return s.desc == "exp contiguous"; },
      [d, formula](const std::vector<Tensor>& in) {
        const Tensor out = exp(in[0].detach());
        return std::vector<Tensor>{autograd::record(
            "exp_by_hand", out, {in[0]},
            [x = in[0], out = out.detach(), formula](const Tensor& g, const std::vector<bool>&) {
              return std::vector<Tensor>{formula(g, x, out)};
            },
            d)};
      });
}

TEST(OpDbSelfTest, DoubleBackwardChecksCatchAMissingOrWrongSecondDerivative) {
  // Right first derivatives throughout (gradcheck passes); the second ones differ.
  const OpInfo once = exp_recorded(autograd::Differentiable::kOnce,
                                   [](const Tensor& g, const Tensor&, const Tensor& out) { return mul(g, out); });
  // Claims kTwice but multiplies by the detached output: no derivative through x.
  const OpInfo wrong = exp_recorded(autograd::Differentiable::kTwice,
                                    [](const Tensor& g, const Tensor&, const Tensor& out) { return mul(g, out); });
  const OpInfo right = exp_recorded(autograd::Differentiable::kTwice,
                                    [](const Tensor& g, const Tensor& x, const Tensor&) { return mul(g, exp(x)); });
  for (const OpInfo* m : {&once, &wrong, &right})
    EXPECT_EQ(failures_of([&] { Check{*m, kFloat64, kCPU}.gradcheck(); }), 0);
  EXPECT_EQ(failures_of([&] { Check{once, kFloat64, kCPU}.double_backward_refused(); }), 0);
  EXPECT_GT(failures_of([&] { Check{once, kFloat64, kCPU}.gradgradcheck(); }), 0);  // the named error
  EXPECT_GT(failures_of([&] { Check{wrong, kFloat64, kCPU}.gradgradcheck(); }), 0);
  EXPECT_EQ(failures_of([&] { Check{right, kFloat64, kCPU}.gradgradcheck(); }), 0);
  EXPECT_GT(failures_of([&] { Check{right, kFloat64, kCPU}.double_backward_refused(); }), 0);  // works: list it
}

TEST(OpDbSelfTest, AutocastCheckCatchesAPolicyTurnedPassthrough) {
  const OpInfo& e = entry("exp");
  EXPECT_EQ(failures_of([&] { Check{e, kBFloat16, kCPU}.autocast(); }), 0);
  amp::set_policy("exp", amp::CastPolicy::Passthrough);
  const int failures = failures_of([&] { Check{e, kBFloat16, kCPU}.autocast(); });
  amp::reset_policy("exp");
  // The table comparison, and each sample's output dtype under autocast.
  EXPECT_GT(failures, 1);
  // A lower_precision op turned fp32: its outputs stop being 16-bit in a region.
  amp::set_policy("mm", amp::CastPolicy::Fp32);
  const int mm_failures = failures_of([&] { Check{entry("mm"), kFloat32, kCPU}.autocast(); });
  amp::reset_policy("mm");
  EXPECT_GT(mm_failures, 1);
}

// A tolerance wide enough to pass a 5% error in a sample's largest output (or an error of
// 0.05 when it is below 1) would make the forward check nearly unable to fail; reductions
// and products add their accumulation bound, which must stay small too.
TEST(OpDbSelfTest, EveryToleranceCatchesAFivePercentError) {
  for (const OpInfo& op : testing::op_db())
    for (DType dt : op.dtypes) {
      const Check c{op, dt, kCPU};
      int nonzero = 0;
      for (const Sample& s : op.samples(dt)) {
        if (!s.ref) continue;
        for (const RefOut& r : s.ref(s.inputs)) {
          double m = 0;
          for (double v : r.values)
            if (std::isfinite(v)) m = std::max(m, std::fabs(v));
          if (m == 0) continue;
          ++nonzero;
          const Tol t = c.output_tolerance(s, r.integral, 2.0);
          EXPECT_LT(t.atol + t.rtol * m, 0.05 * std::max(m, 1.0))
              << op.id() << " " << dtype_name(dt) << " " << describe(s) << " (largest output " << m << ")";
        }
      }
      EXPECT_GT(nonzero, 0) << op.id() << " " << dtype_name(dt) << ": no sample with a nonzero reference";
    }
}

// The meta device runs every op of the table as the CPU does, without values: each
// output has the CPU's shape, dtype and strides, and backward gives each differentiable
// input a gradient of the CPU's shape and dtype. (An op that read a value on the host, or a
// kernel the meta table lacked, would throw here.)
TEST(OpDbMeta, EveryOpRunsOnMetaTensorsAsOnTheCpu) {
  auto to_meta = [](const std::vector<Tensor>& in, bool leaves) {
    std::vector<Tensor> out;
    for (const Tensor& t : in) {
      Tensor m = t.defined() ? t.to(Device(kMeta)) : t;
      if (leaves && m.defined() && m.is_floating_point()) m = m.detach().requires_grad_();
      out.push_back(m);
    }
    return out;
  };
  auto leaves_of = [](const std::vector<Tensor>& in, bool leaves) {
    std::vector<Tensor> out;
    for (const Tensor& t : in)
      out.push_back(leaves && t.defined() && t.is_floating_point() ? t.detach().requires_grad_() : t);
    return out;
  };
  int ops = 0;
  for (const OpInfo& op : testing::op_db())
    for (DType dt : op.dtypes)
      for (const Sample& s : op.samples(dt)) {
        if (!s.autocast) continue;  // the call derives statistics from the values: not the op alone
        SCOPED_TRACE(op.id() + " " + std::string(dtype_name(dt)) + " " + describe(s));
        const bool backward = op.differentiable() && s.gradcheck;
        const std::vector<Tensor> cpu_in = leaves_of(s.inputs, backward), meta_in = to_meta(s.inputs, backward);
        std::vector<Tensor> want, got;
        try {
          want = s.op(cpu_in);
        } catch (const Error&) {
          continue;  // a sample the op refuses (an error case) is refused on meta by the same checks
        }
        try {
          got = s.op(meta_in);
        } catch (const std::exception& e) {
          ADD_FAILURE() << "threw on meta: " << e.what();
          continue;
        }
        ASSERT_EQ(got.size(), want.size());
        for (size_t k = 0; k < want.size(); ++k) {
          if (!want[k].defined()) continue;
          EXPECT_EQ(got[k].device(), Device(kMeta)) << "output " << k;
          EXPECT_EQ(got[k].sizes(), want[k].sizes()) << "output " << k;
          EXPECT_EQ(got[k].dtype(), want[k].dtype()) << "output " << k;
          for (int64_t d = 0; d < want[k].dim(); ++d)  // a size-1 dim's stride says nothing about the layout
            if (want[k].size(d) > 1) EXPECT_EQ(got[k].stride(d), want[k].stride(d)) << "output " << k << " dim " << d;
        }
        if (backward && want[0].defined() && want[0].requires_grad()) {
          want[0].sum().backward();
          try {
            got[0].sum().backward();
          } catch (const std::exception& e) {
            ADD_FAILURE() << "backward threw on meta: " << e.what();
            continue;
          }
          for (size_t i = 0; i < cpu_in.size(); ++i) {
            if (!cpu_in[i].defined() || !cpu_in[i].requires_grad()) continue;
            const Tensor& gw = cpu_in[i].grad();
            const Tensor& gg = meta_in[i].grad();
            EXPECT_EQ(gg.defined(), gw.defined()) << "input " << i;
            if (!gw.defined() || !gg.defined()) continue;
            EXPECT_EQ(gg.sizes(), gw.sizes()) << "gradient " << i;
            EXPECT_EQ(gg.dtype(), gw.dtype()) << "gradient " << i;
          }
        }
        ++ops;
      }
  EXPECT_GT(ops, 300);
}

}  // namespace
}  // namespace tc
