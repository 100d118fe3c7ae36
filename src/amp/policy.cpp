// The autocast policy table: the shipped entries (following PyTorch's lists in
// aten/src/ATen/autocast_mode.cpp for the ops we have), user overrides and registrations,
// and the markdown of docs/amp-policy.md.
#include <atomic>
#include <deque>
#include <iterator>
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
constexpr const char* kWhyFp32 =
    "fp32 on every device: numerically sensitive (PyTorch's CUDA list; needed for fp16 on CPU)";
constexpr const char* kResultType = "not listed: the op's own promotion (torch.result_type)";
constexpr const char* kWhyNative =
    "mixed dtypes handled by the kernel itself: it reads each input in its own dtype and writes result_type's, "
    "so a cast copy would only cost time and memory";
constexpr const char* kNotDispatched = "not dispatched: bool output, no gradient";

constexpr const char* kOnly3dPools = "the CPU list has only the 3-d pools (fp32)";

// The op list's TC_POLICY rows, in its order (so a row's index is its OpId). Ops of
// PyTorch's lists that tensorcast does not have yet (addmm, baddbmm, conv1d, prelu,
// group_norm, expm1, log2, log10, prod, cumsum, norm, l1/smooth_l1/kl_div losses, addcmul,
// addcdiv, dot, index_put, scatter_add, scaled_dot_product_attention) get their rows when
// they land.
#define TC_DEFAULT(...)
#define TC_OP(...)
#define TC_POLICY(op, policy, pytorch, note) {#op, P::policy, pytorch, note},
const Builtin kBuiltins[] = {
#include "tensorcast/ops.def"
};
#undef TC_POLICY
#undef TC_OP
#undef TC_DEFAULT
static_assert(std::size(kBuiltins) == kOpCount);

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

OpEntry* builtin_entry(OpId op) {
  Table& t = table();
  std::lock_guard<std::mutex> lock(t.mutex);
  return &t.entries[static_cast<size_t>(op)];  // the builtins come first, in OpId order
}

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
    case P::LowerPrecision:
      return "lower_precision";
    case P::Fp32:
      return "fp32";
    case P::Promote:
      return "promote";
    case P::Passthrough:
      return "passthrough";
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
        "CUDA list on every device: these ops are numerically sensitive, and\n"
        "fp16 autocast on CPU needs them in fp32. `tc::amp::set_policy` overrides any entry.\n\n"
        "| op | policy | PyTorch | note |\n|---|---|---|---|\n";
  for (const Builtin& b : kBuiltins)
    md << "| `" << b.op << "` | " << policy_name(b.policy) << " | " << b.pytorch << " | " << b.note << " |\n";
  return md.str();
}

}  // namespace tc::amp
