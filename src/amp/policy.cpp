// The autocast policy table: the shipped entries (following PyTorch's lists in
// aten/src/ATen/autocast_mode.cpp for the ops we have), user overrides and registrations,
// and the markdown of docs/amp-policy.md.
#include <atomic>
#include <deque>
#include <mutex>
#include <sstream>
#include <unordered_map>

#include "amp/state.h"

namespace tc::amp {

using P = CastPolicy;

namespace {

struct Builtin {
  const char* op;
  CastPolicy policy;
  const char* pytorch;
  const char* note;
};

constexpr const char* kNotListed = "not listed: runs in its inputs' dtype";
constexpr const char* kCudaOnlyFp32 = "fp32 on CUDA; not in the CPU list (runs in bf16 there)";
constexpr const char* kWhyFp32 = "fp32 on every device: numerically sensitive (issue 3's list; needed for fp16 on CPU)";
constexpr const char* kResultType = "not listed: the op's own promotion (torch.result_type)";
constexpr const char* kWhyNative =
    "mixed dtypes handled by the kernel itself: it reads each input in its own dtype and writes result_type's, "
    "so a cast copy would only cost time and memory";
constexpr const char* kNotDispatched = "not dispatched: bool output, no gradient";

// In the order of ops.h. Ops of issue 3's lists that tensorcast does not have yet
// (addmm, baddbmm, conv1d, prelu, group_norm, expm1, log2, log10, prod, cumsum, norm,
// l1/smooth_l1/kl_div losses, addcmul, addcdiv, dot, index_put, scatter_add,
// scaled_dot_product_attention) get their entries when they land.
const Builtin kBuiltins[] = {
    // elementwise
    {"add", P::Passthrough, kResultType, kWhyNative},
    {"sub", P::Passthrough, kResultType, kWhyNative},
    {"mul", P::Passthrough, kResultType, kWhyNative},
    {"div", P::Passthrough, kResultType, kWhyNative},
    {"pow", P::Fp32, kCudaOnlyFp32, kWhyFp32},
    {"maximum", P::Passthrough, kResultType, kWhyNative},
    {"minimum", P::Passthrough, kResultType, kWhyNative},
    {"neg", P::Passthrough, kNotListed, ""},
    {"abs", P::Passthrough, kNotListed, ""},
    {"exp", P::Fp32, kCudaOnlyFp32, kWhyFp32},
    {"log", P::Fp32, kCudaOnlyFp32, kWhyFp32},
    {"log1p", P::Fp32, kCudaOnlyFp32, kWhyFp32},
    {"sqrt", P::Passthrough, kNotListed, ""},
    {"rsqrt", P::Fp32, kCudaOnlyFp32, kWhyFp32},
    {"reciprocal", P::Fp32, kCudaOnlyFp32, kWhyFp32},
    {"tanh", P::Passthrough, kNotListed, ""},
    {"sigmoid", P::Passthrough, kNotListed, ""},
    {"relu", P::Passthrough, kNotListed, ""},
    {"gelu", P::Passthrough, kNotListed, ""},
    {"silu", P::Passthrough, kNotListed, ""},
    {"clamp", P::Passthrough, kNotListed, ""},
    {"where", P::Passthrough, kResultType, kWhyNative},
    {"eq", P::Passthrough, kNotListed, kNotDispatched},
    {"ne", P::Passthrough, kNotListed, kNotDispatched},
    {"lt", P::Passthrough, kNotListed, kNotDispatched},
    {"le", P::Passthrough, kNotListed, kNotDispatched},
    {"gt", P::Passthrough, kNotListed, kNotDispatched},
    {"ge", P::Passthrough, kNotListed, kNotDispatched},
    {"isnan", P::Passthrough, kNotListed, kNotDispatched},
    {"isfinite", P::Passthrough, kNotListed, kNotDispatched},
    // reductions
    {"sum", P::Fp32, "fp32 on CUDA (fp32_set_opt_dtype); not in the CPU list", kWhyFp32},
    {"mean", P::Passthrough, kNotListed, "only sum/prod/cumsum are fp32 in PyTorch; ours accumulate in fp32 anyway"},
    {"var", P::Passthrough, kNotListed, "accumulates in fp32 for 16-bit inputs"},
    {"max", P::Passthrough, kNotListed, ""},
    {"min", P::Passthrough, kNotListed, ""},
    {"argmax", P::Passthrough, kNotListed, ""},
    {"argmin", P::Passthrough, kNotListed, ""},
    {"sum_to_size", P::Passthrough, "internal (broadcast backward)", "keeps the dtype"},
    // linear algebra, convolution, pooling
    {"matmul", P::LowerPrecision, "lower_precision_fp (CUDA, CPU)", ""},
    {"mm", P::LowerPrecision, "lower_precision_fp (CUDA, CPU)", ""},
    {"bmm", P::LowerPrecision, "lower_precision_fp (CUDA, CPU)", ""},
    {"linear", P::LowerPrecision, "lower_precision_fp (CUDA, CPU)", ""},
    {"conv2d", P::LowerPrecision, "lower_precision_fp (CUDA, CPU)", ""},
    {"max_pool2d", P::Passthrough, kNotListed, "the CPU list has only the 3-d pools (fp32)"},
    {"avg_pool2d", P::Passthrough, kNotListed, "the CPU list has only the 3-d pools (fp32)"},
    {"adaptive_avg_pool2d", P::Passthrough, kNotListed, "the CPU list has only the 3-d pools (fp32)"},
    // neural-network ops
    {"softmax", P::Fp32, "fp32 on CUDA (fp32_set_opt_dtype); not in the CPU list", kWhyFp32},
    {"log_softmax", P::Fp32, "fp32 on CUDA (fp32_set_opt_dtype); not in the CPU list", kWhyFp32},
    {"layer_norm", P::Fp32, kCudaOnlyFp32, kWhyFp32},
    {"batch_norm", P::Passthrough, "not listed: cuDNN/oneDNN batch norm takes 16-bit input with fp32 parameters",
     "keeps fp32 statistics: x stays 16-bit; weight, bias and running stats stay fp32; output has x's dtype"},
    {"dropout", P::Passthrough, kNotListed, ""},
    {"embedding", P::Passthrough, kNotListed, "the output has the weight's dtype"},
    {"cat", P::Promote, "promote (CUDA, CPU)", "widest floating input type"},
    {"stack", P::Promote, "promote (CUDA, CPU)", "widest floating input type"},
    // losses
    {"cross_entropy", P::Fp32, "fp32 (CPU: cross_entropy_loss; CUDA: log_softmax and nll_loss, both fp32)", ""},
    {"nll_loss", P::Fp32, "fp32 (CUDA, CPU)", ""},
    {"mse_loss", P::Fp32, "fp32 (CUDA, CPU)", ""},
    {"binary_cross_entropy_with_logits", P::Fp32, "fp32 (CUDA, CPU)", ""},
};

}  // namespace

namespace detail {

struct OpEntry {
  std::string op;
  std::atomic<CastPolicy> policy;
  CastPolicy shipped;
  std::string pytorch;
  std::string note;
  bool builtin;
  OpEntry(std::string o, CastPolicy p, std::string pt, std::string n, bool b)
      : op(std::move(o)), policy(p), shipped(p), pytorch(std::move(pt)), note(std::move(n)), builtin(b) {}
};

namespace {

// A deque never moves its elements, so OpEntry* handles stay valid as entries are added.
struct Table {
  std::mutex mutex;
  std::deque<OpEntry> entries;
  std::unordered_map<std::string, OpEntry*> by_name;
  Table() {
    for (const Builtin& b : kBuiltins) {
      entries.emplace_back(b.op, b.policy, b.pytorch, b.note, true);
      by_name.emplace(b.op, &entries.back());
    }
  }
};

Table& table() {
  static Table t;
  return t;
}

OpEntry* find_locked(Table& t, std::string_view op) {
  auto it = t.by_name.find(std::string(op));
  return it == t.by_name.end() ? nullptr : it->second;
}

}  // namespace

OpEntry* op_entry(std::string_view op) {
  Table& t = table();
  std::lock_guard<std::mutex> lock(t.mutex);
  if (OpEntry* e = find_locked(t, op)) return e;
  t.entries.emplace_back(std::string(op), P::Passthrough, "", "", false);
  t.by_name.emplace(std::string(op), &t.entries.back());
  return &t.entries.back();
}

CastPolicy entry_policy(const OpEntry* e) { return e->policy.load(std::memory_order_relaxed); }

}  // namespace detail

std::string_view policy_name(CastPolicy p) {
  switch (p) {
    case P::LowerPrecision: return "lower_precision";
    case P::Fp32: return "fp32";
    case P::Promote: return "promote";
    case P::Passthrough: return "passthrough";
  }
  return "?";
}

std::vector<PolicyEntry> policy_table() {
  detail::Table& t = detail::table();
  std::lock_guard<std::mutex> lock(t.mutex);
  std::vector<PolicyEntry> out;
  out.reserve(t.entries.size());
  for (const detail::OpEntry& e : t.entries)
    out.push_back({e.op, e.policy.load(std::memory_order_relaxed), e.pytorch, e.note, e.builtin});
  return out;
}

CastPolicy get_policy(std::string_view op) {
  detail::Table& t = detail::table();
  std::lock_guard<std::mutex> lock(t.mutex);
  const detail::OpEntry* e = detail::find_locked(t, op);
  return e ? e->policy.load(std::memory_order_relaxed) : P::Passthrough;
}

bool has_policy(std::string_view op) {
  detail::Table& t = detail::table();
  std::lock_guard<std::mutex> lock(t.mutex);
  return detail::find_locked(t, op) != nullptr;
}

void set_policy(std::string_view op, CastPolicy policy) {
  TC_CHECK(!op.empty(), "set_policy", "the op name is empty");
  detail::op_entry(op)->policy.store(policy, std::memory_order_relaxed);
}

void reset_policy(std::string_view op) {
  detail::Table& t = detail::table();
  std::lock_guard<std::mutex> lock(t.mutex);
  detail::OpEntry* e = detail::find_locked(t, op);
  TC_CHECK(e != nullptr, "reset_policy", "no op named \"", op, "\" in the policy table");
  if (e->builtin) e->policy.store(e->shipped, std::memory_order_relaxed);
}

std::string policy_table_markdown() {
  std::ostringstream md;
  md << "# Autocast op policy\n\n"
        "<!-- Generated from tc::amp::policy_table() by tools/tc_amp_policy_doc; do not edit.\n"
        "     Regenerate: ./build/tools/tc_amp_policy_doc > docs/amp-policy.md -->\n\n"
        "Inside a `tc::amp::AutocastGuard` region every public op passes through the dispatcher,\n"
        "which applies the op's policy before autograd and the kernel:\n\n"
        "| policy | floating inputs are cast to |\n|---|---|\n"
        "| lower_precision | the region's dtype (CPU default bfloat16, CUDA float16) |\n"
        "| fp32 | float32 |\n"
        "| promote | the widest floating input type (torch.result_type's rule: 0-d tensors do not widen) |\n"
        "| passthrough | nothing: the op runs on its inputs as they are |\n\n"
        "Cast rules (PyTorch's): only floating tensors on the region's device are cast; float64 is\n"
        "never cast; integer, bool and undefined tensors are untouched. An fp32 leaf that requires\n"
        "grad (a parameter) cast to the region's dtype is cached for the region. Ops called inside\n"
        "an op (composites) are not cast again. In-place methods (`add_`, `mul_`, ...) and\n"
        "`Tensor::to` are not autocast; no op of ours takes an explicit output dtype yet (such\n"
        "calls are not autocast in PyTorch).\n\n"
        "PyTorch's CPU list is narrower than its CUDA list: under CPU autocast PyTorch runs\n"
        "softmax, log_softmax, layer_norm, exp/log/pow and sum in bfloat16. tensorcast uses the\n"
        "CUDA list on every device, as issue 3 asks: these ops are numerically sensitive, and\n"
        "fp16 autocast on CPU needs them in fp32. `tc::amp::set_policy` overrides any entry.\n\n"
        "| op | policy | PyTorch | note |\n|---|---|---|---|\n";
  for (const Builtin& b : kBuiltins)
    md << "| `" << b.op << "` | " << policy_name(b.policy) << " | " << b.pytorch << " | " << b.note << " |\n";
  return md.str();
}

}  // namespace tc::amp
