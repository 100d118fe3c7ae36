// Plan cache and executor shared by the oneDNN convolution and pooling kernels.
#include "backend/cpu/dnnl_plan.h"

#include <mutex>
#include <unordered_map>

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

std::shared_ptr<const Plan> cached_plan(const std::string& key,
                                        const std::function<std::shared_ptr<Plan>()>& build) {
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

bool is_reference_impl(const std::string& impl) { return impl.rfind("ref", 0) == 0; }

}  // namespace tc::cpu
