// oneDNN 2.x pooling_v2 primitives, cached per configuration (see onednn/plan.h). The
// primitives run on plain nchw or, for channels-last inputs, nhwc memory (no reorders);
// the backward runs in the forward's layout (its workspace is laid out like the forward's
// dst), reordering a gradient that arrives in another layout.
#include "backend/cpu/onednn/pool.h"

#include <algorithm>

#include "backend/cpu/loops/cast_dense.h"
#include "backend/cpu/loops/elementwise.h"
#include "backend/cpu/onednn/plan.h"
#include "core/tensor_impl.h"

namespace tc::cpu {

namespace {

using dnnl::memory;
using tag = dnnl::memory::format_tag;

const char* op_name(PoolKind k) { return k == PoolKind::Max ? "max_pool2d" : "avg_pool2d"; }

dnnl::algorithm algorithm_of(PoolKind k) {
  switch (k) {
    case PoolKind::Max:
      return dnnl::algorithm::pooling_max;
    case PoolKind::AvgIncludePad:
      return dnnl::algorithm::pooling_avg_include_padding;
    default:
      return dnnl::algorithm::pooling_avg_exclude_padding;
  }
}

struct Geometry {
  memory::dims strides, kernel, dilation, pad_l, pad_r;
};

Geometry geometry(const Shape& xs, const PoolParams& p) {
  Geometry g;
  for (int d = 0; d < 2; ++d) {
    g.strides.push_back(p.stride[d]);
    g.kernel.push_back(p.kernel[d]);
    g.dilation.push_back(p.dilation[d] - 1);  // oneDNN counts the gaps
    g.pad_l.push_back(p.padding[d]);
    // Right padding that makes oneDNN's size equation exact; a negative value (floor mode
    // leaving input unused) is raised to 0, which the floor in the equation absorbs.
    const int64_t k_eff = (p.kernel[d] - 1) * p.dilation[d] + 1;
    g.pad_r.push_back(std::max<int64_t>(0, (p.out[d] - 1) * p.stride[d] + k_eff - xs[2 + d] - p.padding[d]));
  }
  return g;
}

std::string key_of(const char* what, const Shape& xs, DType dt, const PoolParams& p, PoolKind kind, bool cl) {
  std::string key = what;
  key += dtype_name(dt);
  key_append(key, static_cast<int64_t>(kind));
  key_append(key, cl ? 1 : 0);
  key_append(key, xs);
  key_append(key, Shape{p.kernel[0], p.kernel[1], p.stride[0], p.stride[1], p.padding[0], p.padding[1], p.dilation[0],
                        p.dilation[1], p.out[0], p.out[1]});
  return key;
}

dnnl::pooling_v2_forward::primitive_desc forward_pd(const Shape& xs, DType dt, const PoolParams& p, PoolKind kind,
                                                    bool cl) {
  const Geometry g = geometry(xs, p);
  const char* op = op_name(kind);
  dnnl::pooling_v2_forward::desc d(dnnl::prop_kind::forward_training, algorithm_of(kind),
                                   activation_desc(xs, dt, cl, op),
                                   activation_desc({xs[0], xs[1], p.out[0], p.out[1]}, dt, cl, op), g.strides, g.kernel,
                                   g.dilation, g.pad_l, g.pad_r);
  return {d, dnnl_engine()};
}

template <class Build>
std::shared_ptr<Plan> guarded_build(DType dt, PoolKind kind, bool allow_reference, Build build) {
  try {
    auto plan = build();
    // 16-bit without an optimized kernel computes through float32 (see onednn/conv.cpp).
    if (is_reduced_float(dt) && !allow_reference && is_reference_impl(plan->impl)) return nullptr;
    return plan;
  } catch (const dnnl::error& e) {
    if (is_reduced_float(dt)) return nullptr;
    TC_FAIL(op_name(kind), "oneDNN could not create a ", dtype_name(dt), " pooling: ", e.what());
  }
}

std::shared_ptr<const Plan> forward_plan(const Shape& xs, DType dt, const PoolParams& p, PoolKind kind, bool cl) {
  return cached_plan(key_of("pool_fwd", xs, dt, p, kind, cl), [&] {
    return guarded_build(dt, kind, false, [&] {
      auto pd = forward_pd(xs, dt, p, kind, cl);
      auto plan = std::make_shared<Plan>();
      plan->impl = pd.impl_info_str();
      plan->prim = dnnl::pooling_v2_forward(pd);
      plan->args.push_back(plan_arg(DNNL_ARG_SRC, pd.src_desc(), pd.src_desc(), false));
      plan->args.push_back(plan_arg(DNNL_ARG_DST, pd.dst_desc(), pd.dst_desc(), true));
      if (kind == PoolKind::Max)
        plan->args.push_back(plan_arg(DNNL_ARG_WORKSPACE, pd.workspace_desc(), pd.workspace_desc(), true));
      return plan;
    });
  });
}

}  // namespace

PoolPlanInfo dnnl_pool2d_plan_info(const Shape& xs, DType dt, const PoolParams& p, PoolKind kind, bool cl) {
  PoolPlanInfo info;
  auto plan = forward_plan(xs, dt, p, kind, cl);
  if (!plan) {
    info.through_float32 = true;
    plan = forward_plan(xs, kFloat32, p, kind, cl);
  }
  if (plan && kind == PoolKind::Max) info.workspace_bytes = static_cast<int64_t>(plan->args[2].user.get_size());
  return info;
}

PoolResult dnnl_pool2d_forward(const Tensor& xin, const PoolParams& p, PoolKind kind) {
  const DType dt = xin.dtype();
  const bool cl = is_channels_last(xin);
  const Tensor x = to_activation_layout(xin, cl);  // other strided inputs: contiguous
  const Shape& xs = x.sizes();
  auto plan = forward_plan(xs, dt, p, kind, cl);
  if (!plan) {
    PoolResult r = dnnl_pool2d_forward(cast_dense(x, kFloat32), p, kind);
    r.out = cast_dense(r.out, dt);
    return r;
  }
  PoolResult r;
  r.out = make_activation({xs[0], xs[1], p.out[0], p.out[1]}, dt, cl);
  if (kind == PoolKind::Max) {
    r.workspace = make_tensor({static_cast<int64_t>(plan->args[2].user.get_size())}, kUInt8);
    run_plan(*plan, {x, r.out, r.workspace});
  } else {
    run_plan(*plan, {x, r.out});
  }
  return r;
}

Tensor dnnl_pool2d_backward(const Tensor& gyin, const Tensor& workspace, const Shape& xs, DType dt, const PoolParams& p,
                            PoolKind kind, bool cl) {
  // The backward follows the forward's choice: the workspace of a float32 fallback
  // forward only fits a float32 backward, and vice versa.
  if (!forward_plan(xs, dt, p, kind, cl))
    return cast_dense(dnnl_pool2d_backward(cast_dense(gyin, kFloat32), workspace, xs, kFloat32, p, kind, cl), dt);
  // The primitive runs in the forward's layout; a gradient in another dense layout is
  // reordered into it by the plan, anything else (expanded, overlapping) is copied first.
  const Tensor gy = dense_stride_order(gyin.sizes(), gyin.strides()).empty() ? as_contiguous(gyin) : gyin;
  std::string key = key_of("pool_bwd", xs, dt, p, kind, cl);
  key_append(key, gy.strides());
  auto plan = cached_plan(key, [&] {
    return guarded_build(dt, kind, true, [&] {
      const Geometry g = geometry(xs, p);
      auto fwd = forward_pd(xs, dt, p, kind, cl);
      const char* op = op_name(kind);
      dnnl::pooling_v2_backward::desc d(algorithm_of(kind), activation_desc(xs, dt, cl, op),
                                        activation_desc({xs[0], xs[1], p.out[0], p.out[1]}, dt, cl, op), g.strides,
                                        g.kernel, g.dilation, g.pad_l, g.pad_r);
      dnnl::pooling_v2_backward::primitive_desc pd(d, dnnl_engine(), fwd);
      auto plan = std::make_shared<Plan>();
      plan->impl = pd.impl_info_str();
      plan->prim = dnnl::pooling_v2_backward(pd);
      plan->args.push_back(plan_arg(DNNL_ARG_DIFF_DST, layout_desc(gy, op), pd.diff_dst_desc(), false));
      if (kind == PoolKind::Max)
        plan->args.push_back(plan_arg(DNNL_ARG_WORKSPACE, pd.workspace_desc(), pd.workspace_desc(), false));
      plan->args.push_back(plan_arg(DNNL_ARG_DIFF_SRC, pd.diff_src_desc(), pd.diff_src_desc(), true));
      return plan;
    });
  });
  TC_CHECK(plan, op_name(kind), "oneDNN has a ", dtype_name(dt), " forward but no backward pooling");
  Tensor gx = make_activation(xs, dt, cl);
  if (kind == PoolKind::Max)
    run_plan(*plan, {gy, workspace, gx});
  else
    run_plan(*plan, {gy, gx});
  return gx;
}

}  // namespace tc::cpu
