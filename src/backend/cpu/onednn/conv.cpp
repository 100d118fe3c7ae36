// oneDNN 2.x convolution primitives (op descriptors -> primitive_desc), cached per
// configuration. Channels-last activations (NHWC memory, see onednn/plan.h) run on the nhwc
// kernels directly, with no reorders around the primitive; other layouts keep the blocked
// layouts oneDNN picks (format_tag::any) with reorders from / to the caller's strided
// tensors (outputs contiguous NCHW). Weights are reordered from OIHW in both cases.
#include "backend/cpu/onednn/conv.h"

#include <algorithm>

#include "backend/cpu/loops/cast_dense.h"
#include "backend/cpu/onednn/plan.h"
#include "core/tensor_impl.h"
#include "tensorcast/gemm16.h"

namespace tc::cpu {

namespace {

using dnnl::memory;
using tag = dnnl::memory::format_tag;
constexpr const char* kOp = "conv2d";

memory::dims to_dims(const Shape& s) { return memory::dims(s.begin(), s.end()); }

// (O, I/g, kh, kw) with strides, seen by oneDNN as (g, O/g, I/g, kh, kw) when grouped.
memory::desc weight_desc(const Shape& sizes, const Shape& strides, DType dt, int64_t groups) {
  if (groups == 1) return memory::desc(to_dims(sizes), dnnl_dtype(dt, kOp), to_dims(strides));
  const int64_t og = sizes[0] / groups;
  return memory::desc({groups, og, sizes[1], sizes[2], sizes[3]}, dnnl_dtype(dt, kOp),
                      {strides[0] * og, strides[0], strides[1], strides[2], strides[3]});
}

memory::desc any_desc(const memory::dims& dims, DType dt) { return memory::desc(dims, dnnl_dtype(dt, kOp), tag::any); }

// The activation desc of a primitive: nhwc for the channels-last path, else any.
memory::desc act_desc(const Shape& sizes, DType dt, bool cl) {
  return cl ? activation_desc(sizes, dt, true, kOp) : any_desc(to_dims(sizes), dt);
}

memory::dims any_weight_dims(const Shape& sizes, int64_t groups) {
  if (groups == 1) return to_dims(sizes);
  return {groups, sizes[0] / groups, sizes[1], sizes[2], sizes[3]};
}

struct Geometry {
  memory::dims strides, dilates, pad_l, pad_r;
};

Geometry geometry(const Shape& x, const Shape& w, const Shape& y, const ConvParams& p) {
  Geometry g;
  g.strides = {p.stride[0], p.stride[1]};
  g.dilates = {p.dilation[0] - 1, p.dilation[1] - 1};  // oneDNN counts the gaps
  g.pad_l = {p.padding[0], p.padding[1]};
  // Right padding that makes oneDNN's size equation exact. When PyTorch's floor leaves
  // input columns unused the exact value can be negative; 0 satisfies the equation too
  // (oneDNN floors as well) without relying on negative padding.
  for (int d = 0; d < 2; ++d) {
    const int64_t k_eff = (w[2 + d] - 1) * p.dilation[d] + 1;
    g.pad_r.push_back(std::max<int64_t>(0, (y[2 + d] - 1) * p.stride[d] + k_eff - x[2 + d] - p.padding[d]));
  }
  return g;
}

std::string base_key(const char* what, DType dt, const ConvParams& p) {
  std::string key = what;
  key += dtype_name(dt);
  key += ':';
  key_append(key, Shape{p.stride[0], p.stride[1], p.padding[0], p.padding[1], p.dilation[0], p.dilation[1], p.groups});
  return key;
}

dnnl::convolution_forward::primitive_desc forward_pd(const Shape& x, const Shape& w, const Shape& y, bool bias,
                                                     DType dt, const ConvParams& p, bool cl) {
  const Geometry g = geometry(x, w, y, p);
  auto src = act_desc(x, dt, cl), wei = any_desc(any_weight_dims(w, p.groups), dt), dst = act_desc(y, dt, cl);
  auto alg = dnnl::algorithm::convolution_direct;
  auto prop = dnnl::prop_kind::forward_training;
  if (bias) {
    dnnl::convolution_forward::desc d(prop, alg, src, wei, any_desc({w[0]}, dt), dst, g.strides, g.dilates, g.pad_l,
                                      g.pad_r);
    return {d, dnnl_engine()};
  }
  dnnl::convolution_forward::desc d(prop, alg, src, wei, dst, g.strides, g.dilates, g.pad_l, g.pad_r);
  return {d, dnnl_engine()};
}

// A 16-bit dtype without an optimized kernel (float16 without AVX512-FP16, bfloat16 on an
// AVX2-only CPU) is refused so the caller computes through float32.
std::shared_ptr<Plan> accept(std::shared_ptr<Plan> plan, DType dt) {
  if (is_reduced_float(dt) && is_reference_impl(plan->impl)) return nullptr;
  return plan;
}

template <class Build>
std::shared_ptr<Plan> guarded_build(DType dt, Build build) {
  try {
    return accept(build(), dt);
  } catch (const dnnl::error& e) {
    if (is_reduced_float(dt)) return nullptr;
    TC_FAIL(kOp, "oneDNN could not create a ", dtype_name(dt), " convolution: ", e.what());
  }
}

Shape out_sizes(const Shape& x, const Shape& w, const ConvParams& p) {
  return {x[0], w[0], conv_out_size(x[2], w[2], p.stride[0], p.padding[0], p.dilation[0]),
          conv_out_size(x[3], w[3], p.stride[1], p.padding[1], p.dilation[1])};
}

std::shared_ptr<const Plan> forward_plan(const Tensor& x, const Tensor& w, const Tensor& bias, const ConvParams& p) {
  const DType dt = x.dtype();
  const bool cl = is_channels_last(x);
  std::string key = base_key("fwd", dt, p);
  key_append(key, cl ? 1 : 0);
  key_append(key, x.sizes());
  key_append(key, x.strides());
  key_append(key, w.sizes());
  key_append(key, w.strides());
  key_append(key, bias.defined() ? bias.stride(0) : -1);
  return cached_plan(key, [&] {
    return guarded_build(dt, [&] {
      const Shape y = out_sizes(x.sizes(), w.sizes(), p);
      auto pd = forward_pd(x.sizes(), w.sizes(), y, bias.defined(), dt, p, cl);
      auto plan = std::make_shared<Plan>();
      plan->impl = pd.impl_info_str();
      plan->prim = dnnl::convolution_forward(pd);
      plan->args.push_back(plan_arg(DNNL_ARG_SRC, layout_desc(x, kOp), pd.src_desc(), false));
      plan->args.push_back(
          plan_arg(DNNL_ARG_WEIGHTS, weight_desc(w.sizes(), w.strides(), dt, p.groups), pd.weights_desc(), false));
      if (bias.defined()) plan->args.push_back(plan_arg(DNNL_ARG_BIAS, dnnl_desc(bias, kOp), pd.bias_desc(), false));
      plan->args.push_back(plan_arg(DNNL_ARG_DST, activation_desc(y, dt, cl, kOp), pd.dst_desc(), true));
      return plan;
    });
  });
}

// float32 copy keeping the layout (so a 16-bit fallback picks the same kernels' layout).
Tensor as_f32(const Tensor& t) { return cast_dense(t, kFloat32); }

// 16-bit convolutions run on the float32 kernels where tensorcast/gemm16.h says so.
bool widened(DType dt) { return is_reduced_float(dt) && cpu_gemm16_path(dt) == Gemm16::kFloat32; }

}  // namespace

Tensor dnnl_conv2d_forward(const Tensor& x, const Tensor& w, const Tensor& bias, const ConvParams& p) {
  auto plan = widened(x.dtype()) ? nullptr : forward_plan(x, w, bias, p);
  if (!plan) return cast_dense(dnnl_conv2d_forward(as_f32(x), as_f32(w), as_f32(bias), p), x.dtype());
  Tensor y = make_activation(out_sizes(x.sizes(), w.sizes(), p), x.dtype(), is_channels_last(x));
  if (bias.defined())
    run_plan(*plan, {x, w, bias, y});
  else
    run_plan(*plan, {x, w, y});
  return y;
}

std::string dnnl_conv2d_impl(const Tensor& x, const Tensor& w, const ConvParams& p) {
  auto plan = widened(x.dtype()) ? nullptr : forward_plan(x, w, Tensor(), p);
  return plan ? plan->impl : std::string();
}

Tensor dnnl_conv2d_backward_data(const Tensor& gy, const Tensor& w, const Shape& xs, const ConvParams& p, bool cl) {
  const DType dt = w.dtype();
  std::string key = base_key("bwd_data", dt, p);
  key_append(key, cl ? 1 : 0);
  key_append(key, xs);
  key_append(key, gy.strides());
  key_append(key, w.sizes());
  key_append(key, w.strides());
  auto plan = widened(dt) ? nullptr : cached_plan(key, [&] {
    return guarded_build(dt, [&] {
      const Geometry g = geometry(xs, w.sizes(), gy.sizes(), p);
      auto fwd = forward_pd(xs, w.sizes(), gy.sizes(), false, dt, p, cl);
      dnnl::convolution_backward_data::desc d(dnnl::algorithm::convolution_direct, act_desc(xs, dt, cl),
                                              any_desc(any_weight_dims(w.sizes(), p.groups), dt),
                                              act_desc(gy.sizes(), dt, cl), g.strides, g.dilates, g.pad_l, g.pad_r);
      dnnl::convolution_backward_data::primitive_desc pd(d, dnnl_engine(), fwd);
      auto plan = std::make_shared<Plan>();
      plan->impl = pd.impl_info_str();
      plan->prim = dnnl::convolution_backward_data(pd);
      plan->args.push_back(plan_arg(DNNL_ARG_DIFF_DST, layout_desc(gy, kOp), pd.diff_dst_desc(), false));
      plan->args.push_back(
          plan_arg(DNNL_ARG_WEIGHTS, weight_desc(w.sizes(), w.strides(), dt, p.groups), pd.weights_desc(), false));
      plan->args.push_back(plan_arg(DNNL_ARG_DIFF_SRC, activation_desc(xs, dt, cl, kOp), pd.diff_src_desc(), true));
      return plan;
    });
  });
  if (!plan) return cast_dense(dnnl_conv2d_backward_data(as_f32(gy), as_f32(w), xs, p, cl), dt);
  Tensor gx = make_activation(xs, dt, cl);
  run_plan(*plan, {gy, w, gx});
  return gx;
}

std::pair<Tensor, Tensor> dnnl_conv2d_backward_weights(const Tensor& x, const Tensor& gy, const Shape& ws,
                                                       bool with_bias, const ConvParams& p, DType grad_dtype) {
  const DType dt = x.dtype(), gdt = grad_dtype;
  const bool cl = is_channels_last(x);
  std::string key = base_key("bwd_weights", dt, p);
  key_append(key, cl ? 1 : 0);
  key_append(key, static_cast<int64_t>(gdt));
  key_append(key, x.sizes());
  key_append(key, x.strides());
  key_append(key, gy.strides());
  key_append(key, ws);
  key_append(key, with_bias ? 1 : 0);
  auto plan = widened(dt) ? nullptr : cached_plan(key, [&] {
    return guarded_build(dt, [&] {
      const Geometry g = geometry(x.sizes(), ws, gy.sizes(), p);
      auto fwd = forward_pd(x.sizes(), ws, gy.sizes(), with_bias, dt, p, cl);
      auto src = act_desc(x.sizes(), dt, cl), dwei = any_desc(any_weight_dims(ws, p.groups), gdt),
           ddst = act_desc(gy.sizes(), dt, cl);
      auto alg = dnnl::algorithm::convolution_direct;
      auto make_pd = [&]() -> dnnl::convolution_backward_weights::primitive_desc {
        if (with_bias) {
          dnnl::convolution_backward_weights::desc d(alg, src, dwei, any_desc({ws[0]}, gdt), ddst, g.strides, g.dilates,
                                                     g.pad_l, g.pad_r);
          return {d, dnnl_engine(), fwd};
        }
        dnnl::convolution_backward_weights::desc d(alg, src, dwei, ddst, g.strides, g.dilates, g.pad_l, g.pad_r);
        return {d, dnnl_engine(), fwd};
      };
      auto pd = make_pd();
      auto plan = std::make_shared<Plan>();
      plan->impl = pd.impl_info_str();
      plan->prim = dnnl::convolution_backward_weights(pd);
      plan->args.push_back(plan_arg(DNNL_ARG_SRC, layout_desc(x, kOp), pd.src_desc(), false));
      plan->args.push_back(plan_arg(DNNL_ARG_DIFF_DST, layout_desc(gy, kOp), pd.diff_dst_desc(), false));
      plan->args.push_back(plan_arg(DNNL_ARG_DIFF_WEIGHTS, weight_desc(ws, contiguous_strides(ws), gdt, p.groups),
                                    pd.diff_weights_desc(), true));
      if (with_bias)
        plan->args.push_back(plan_arg(DNNL_ARG_DIFF_BIAS, memory::desc({ws[0]}, dnnl_dtype(gdt, kOp), tag::x),
                                      pd.diff_bias_desc(), true));
      return plan;
    });
  });
  if (!plan) {
    auto [gw, gb] = dnnl_conv2d_backward_weights(as_f32(x), as_f32(gy), ws, with_bias, p, kFloat32);
    return {cast_dense(gw, gdt), cast_dense(gb, gdt)};
  }
  Tensor gw = make_tensor(ws, gdt);
  Tensor gb = with_bias ? make_tensor({ws[0]}, gdt) : Tensor();
  if (with_bias)
    run_plan(*plan, {x, gy, gw, gb});
  else
    run_plan(*plan, {x, gy, gw});
  return {gw, gb};
}

}  // namespace tc::cpu
