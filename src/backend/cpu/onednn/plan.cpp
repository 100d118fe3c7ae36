// Plan cache and executor shared by the oneDNN convolution and pooling kernels.
#include "backend/cpu/onednn/plan.h"

#include <mutex>
#include <unordered_map>

#include "backend/cpu/loops/elementwise.h"
#include "core/tensor_impl.h"

namespace tc::cpu {

PlanArg plan_arg(int id, const dnnl::memory::desc& user, const dnnl::memory::desc& prim, bool output) {
  PlanArg a;
  a.id = id;
  a.user = user;
  a.prim = prim;
  a.output = output;
  if (user != prim) {
    auto& eng = dnnl_engine();
    a.reorder = output ? dnnl::reorder(dnnl::reorder::primitive_desc(eng, prim, eng, user))
                       : dnnl::reorder(dnnl::reorder::primitive_desc(eng, user, eng, prim));
  }
  return a;
}

std::shared_ptr<const Plan> cached_plan(const std::string& key, const std::function<std::shared_ptr<Plan>()>& build) {
  static std::mutex mu;
  static std::unordered_map<std::string, std::shared_ptr<const Plan>> cache;
  {
    std::lock_guard<std::mutex> lock(mu);
    if (auto it = cache.find(key); it != cache.end()) return it->second;
  }
  // Built outside the lock: creation can take milliseconds and other shapes should not
  // wait. Two threads racing on one key both build; the first insert wins.
  std::shared_ptr<const Plan> plan = build();
  std::lock_guard<std::mutex> lock(mu);
  return cache.try_emplace(key, std::move(plan)).first->second;
}

void run_plan(const Plan& plan, const std::vector<Tensor>& tensors) {
  auto& eng = dnnl_engine();
  auto& strm = dnnl_stream();
  std::unordered_map<int, dnnl::memory> exec_args;
  std::vector<Tensor> scratch;  // keeps reorder buffers alive until the stream is done
  std::vector<std::pair<dnnl::memory, dnnl::memory>> outputs_back;  // (prim, user)
  for (size_t i = 0; i < plan.args.size(); ++i) {
    const PlanArg& a = plan.args[i];
    dnnl::memory user(a.user, eng, tensors[i].raw_data());
    if (!a.needs_reorder()) {
      exec_args.emplace(a.id, user);
      continue;
    }
    Tensor buf = make_tensor({static_cast<int64_t>(a.prim.get_size())}, kUInt8);
    scratch.push_back(buf);
    dnnl::memory prim(a.prim, eng, buf.raw_data());
    if (a.output) {
      outputs_back.emplace_back(prim, user);
    } else {
      a.reorder.execute(strm, user, prim);
    }
    exec_args.emplace(a.id, prim);
  }
  plan.prim.execute(strm, exec_args);
  size_t k = 0;
  for (const PlanArg& a : plan.args) {
    if (!a.output || !a.needs_reorder()) continue;
    a.reorder.execute(strm, outputs_back[k].first, outputs_back[k].second);
    ++k;
  }
  strm.wait();
}

void key_append(std::string& key, const Shape& v) {
  key += '(';
  for (int64_t x : v) {
    key += std::to_string(x);
    key += ',';
  }
  key += ')';
}

void key_append(std::string& key, int64_t v) {
  key += std::to_string(v);
  key += ';';
}

bool is_channels_last(const Tensor& t) {
  if (t.dim() != 4) return false;
  const Shape& sz = t.sizes();
  const Shape nhwc = {sz[2] * sz[3] * sz[1], 1, sz[3] * sz[1], sz[1]};
  for (int d = 0; d < 4; ++d)
    if (sz[d] != 1 && t.stride(d) != nhwc[d]) return false;
  return !t.is_contiguous() || sz[1] == 1;
}

Tensor make_activation(const Shape& sizes, DType dt, bool channels_last) {
  if (!channels_last) return make_tensor(sizes, dt);
  const int64_t N = sizes[0], C = sizes[1], H = sizes[2], W = sizes[3];
  Tensor base = make_tensor({N, H, W, C}, dt);
  return make_view(base, sizes, {H * W * C, 1, W * C, C}, 0);
}

dnnl::memory::desc activation_desc(const Shape& sizes, DType dt, bool channels_last, const char* op) {
  return dnnl::memory::desc(dnnl::memory::dims(sizes.begin(), sizes.end()), dnnl_dtype(dt, op),
                            channels_last ? dnnl::memory::format_tag::nhwc : dnnl::memory::format_tag::nchw);
}

dnnl::memory::desc layout_desc(const Tensor& t, const char* op) {
  if (t.dim() == 4) {
    if (is_channels_last(t)) return activation_desc(t.sizes(), t.dtype(), true, op);
    if (t.is_contiguous()) return activation_desc(t.sizes(), t.dtype(), false, op);
  }
  return dnnl_desc(t, op);
}

Tensor to_activation_layout(const Tensor& t, bool channels_last) {
  if (channels_last ? is_channels_last(t) : t.is_contiguous()) return t;
  Tensor out = make_activation(t.sizes(), t.dtype(), channels_last);
  if (channels_last) {
    copy_into(memory_order_view(out, {0, 2, 3, 1}), memory_order_view(t, {0, 2, 3, 1}));
  } else {
    copy_into(out, t);
  }
  return out;
}

bool is_reference_impl(const std::string& impl) { return impl.rfind("ref", 0) == 0; }

}  // namespace tc::cpu
