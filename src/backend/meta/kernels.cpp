// The meta device's kernel table: tensors with shapes, dtypes and strides and no storage
// (PyTorch's meta device). Every kernel that writes into outputs the front end allocated
// does nothing; those that make their result allocate it as the CPU's kernel does (same
// shape, dtype, layout and saved tensors), and the temporaries a CPU kernel holds while it
// runs (float32 copies where this CPU has no optimized 16-bit kernel, oneDNN's workspace
// of the size its plan asks for) are allocated and dropped here too. So a step on meta
// tensors asks for the bytes it would on this CPU, and the allocator's counts
// (memory_stats(Device(kMeta))) plan its memory. Its optional kernels are the CPU's, so
// the front ends take the CPU's paths.
#include <initializer_list>
#include <type_traits>
#include <vector>

#include "backend/cpu/loops/gemv.h"     // kGemvMaxRows
#include "backend/cpu/onednn/conv.h"    // dnnl_conv2d_impl
#include "backend/cpu/onednn/matmul.h"  // matmul_widens, native_matmul
#include "backend/cpu/onednn/plan.h"    // is_channels_last
#include "backend/cpu/onednn/pool.h"    // dnnl_pool2d_plan_info
#include "backend/registry.h"
#include "tensorcast/error.h"
#include "tensorcast/factories.h"
#include "tensorcast/gemm16.h"

namespace tc::backend {

namespace {

const Device kMetaDevice(kMeta);

Tensor meta_empty(const Shape& sizes, DType dtype) { return empty(sizes, TensorOptions(dtype).device(kMetaDevice)); }

// A new (N, C, H, W) tensor, NHWC in memory when channels_last (the CPU's make_activation).
Tensor activation(const Shape& sizes, DType dtype, bool channels_last) {
  if (!channels_last) return meta_empty(sizes, dtype);
  return meta_empty({sizes[0], sizes[2], sizes[3], sizes[1]}, dtype).permute({0, 3, 1, 2});
}

Shape pooled(const Shape& xs, int64_t h, int64_t w) { return {xs[0], xs[1], h, w}; }

template <class R, class... A>
struct Noop;
template <class... A>
struct Noop<void, A...> {
  static void run(A...) {}
};

// Every kernel without a result: nothing to compute.
template <class R, class... A>
void set_noop(Kernel<R(A...)>& kernel) {
  if constexpr (std::is_void_v<R>) kernel = &Noop<void, A...>::run;
}

// A meta tensor of these sizes and dtype that counts no bytes: what a query about the CPU's
// kernels is asked with.
Tensor uncounted(const Shape& sizes, DType dtype, bool channels_last) {
  const TensorOptions o = TensorOptions(dtype).device(kMetaDevice);
  if (!channels_last) return from_blob(nullptr, sizes, o);
  return from_blob(nullptr, {sizes[0], sizes[2], sizes[3], sizes[1]}, o).permute({0, 3, 1, 2});
}

// The float32 copies a kernel computing a 16-bit op through float32 holds while it runs.
void through_float32(std::initializer_list<const Tensor*> operands, std::vector<Tensor>& held) {
  for (const Tensor* t : operands)
    if (t->defined()) held.push_back(meta_empty(t->sizes(), kFloat32));
}

// Where this CPU has no optimized 16-bit convolution (onednn/conv.cpp), the 16-bit one runs
// on float32 copies of its operands and result.
bool conv_through_float32(const Tensor& x, const Tensor& w, const cpu::ConvParams& p) {
  return is_reduced_float(x.dtype()) && cpu::dnnl_conv2d_impl(x, w, p).empty();
}

Tensor conv2d_forward(const Tensor& x, const Tensor& w, const Tensor& bias, const cpu::ConvParams& p) {
  Shape out = {x.size(0), w.size(0), 0, 0};
  for (int d = 0; d < 2; ++d)
    out[2 + d] = cpu::conv_out_size(x.size(2 + d), w.size(2 + d), p.stride[d], p.padding[d], p.dilation[d]);
  const bool cl = cpu::is_channels_last(x);
  std::vector<Tensor> held;
  if (conv_through_float32(x, w, p)) {
    through_float32({&x, &w, &bias}, held);
    held.push_back(activation(out, kFloat32, cl));
  }
  return activation(out, x.dtype(), cl);
}

Tensor conv2d_backward_data(const Tensor& g, const Tensor& w, const Shape& input_sizes, const cpu::ConvParams& p,
                            bool input_channels_last) {
  std::vector<Tensor> held;
  if (conv_through_float32(uncounted(input_sizes, g.dtype(), input_channels_last), w, p)) {
    through_float32({&g, &w}, held);
    held.push_back(activation(input_sizes, kFloat32, input_channels_last));
  }
  return activation(input_sizes, g.dtype(), input_channels_last);
}

PairOfTensors conv2d_backward_weights(const Tensor& x, const Tensor& g, const Shape& weight_sizes, bool with_bias,
                                      const cpu::ConvParams& p, DType grad_dtype) {
  std::vector<Tensor> held;
  if (conv_through_float32(x, uncounted(weight_sizes, x.dtype(), false), p)) {
    through_float32({&x, &g}, held);
    if (grad_dtype != kFloat32) {  // the float32 gradients, then their casts
      held.push_back(meta_empty(weight_sizes, kFloat32));
      if (with_bias) held.push_back(meta_empty({weight_sizes[0]}, kFloat32));
    }
  }
  return {meta_empty(weight_sizes, grad_dtype), with_bias ? meta_empty({weight_sizes[0]}, grad_dtype) : Tensor()};
}

// The CPU saves argmax indices for float64 (the direct loops), else oneDNN's workspace, of
// the size its plan asks for; a 16-bit input without an optimized kernel runs on float32
// copies (onednn/pool.cpp).
PairOfTensors max_pool2d_forward(const Tensor& x, const cpu::PoolParams& p, bool channels_last) {
  const Shape out = pooled(x.sizes(), p.out[0], p.out[1]);
  if (x.dtype() == kFloat64) return {activation(out, x.dtype(), channels_last), meta_empty(out, kInt64)};
  const cpu::PoolPlanInfo info = cpu::dnnl_pool2d_plan_info(x.sizes(), x.dtype(), p, cpu::PoolKind::Max, channels_last);
  if (!info.through_float32)
    return {activation(out, x.dtype(), channels_last), meta_empty({info.workspace_bytes}, kUInt8)};
  // The float32 pooling of a float32 copy of x (dropped as it returns), then the cast of its output.
  Tensor out32, workspace;
  {
    const Tensor x32 = meta_empty(x.sizes(), kFloat32);
    out32 = activation(out, kFloat32, channels_last);
    workspace = meta_empty({info.workspace_bytes}, kUInt8);
  }
  return {activation(out, x.dtype(), channels_last), workspace};
}

Tensor max_pool2d_backward(const Tensor& g, const Tensor& saved, const Shape& input_sizes, const cpu::PoolParams& p,
                           bool channels_last) {
  std::vector<Tensor> held;
  const DType dt = g.dtype();
  if (saved.dtype() == kInt64) {  // the direct loops: NCHW in float32 (float64), then the layout and dtype
    if (dt != kFloat64 && dt != kFloat32) through_float32({&g}, held);
    held.push_back(meta_empty(input_sizes, dt == kFloat64 ? kFloat64 : kFloat32));
    if (channels_last) held.push_back(activation(input_sizes, dt == kFloat64 ? kFloat64 : kFloat32, true));
  } else if (cpu::dnnl_pool2d_plan_info(input_sizes, dt, p, cpu::PoolKind::Max, channels_last).through_float32) {
    through_float32({&g}, held);
    held.push_back(activation(input_sizes, kFloat32, channels_last));
  }
  return activation(input_sizes, dt, channels_last);
}

Tensor max_pool2d_indices(const Tensor& x, const Tensor& saved, const cpu::PoolParams& p) {
  if (saved.dtype() == kInt64) return saved;
  std::vector<Tensor> held;  // the direct loops find the argmax on a float32 copy
  if (x.dtype() != kFloat64 && x.dtype() != kFloat32) through_float32({&x}, held);
  held.push_back(meta_empty(pooled(x.sizes(), p.out[0], p.out[1]), x.dtype() == kFloat64 ? kFloat64 : kFloat32));
  return meta_empty(pooled(x.sizes(), p.out[0], p.out[1]), kInt64);
}

Tensor avg_pool2d_forward(const Tensor& x, const cpu::PoolParams& p, bool, bool channels_last) {
  return activation(pooled(x.sizes(), p.out[0], p.out[1]), x.dtype(), channels_last);
}

Tensor avg_pool2d_backward(const Tensor& g, const Shape& input_sizes, const cpu::PoolParams&, bool,
                           bool channels_last) {
  return activation(input_sizes, g.dtype(), channels_last);
}

Tensor adaptive_avg_pool2d_forward(const Tensor& x, int64_t out_h, int64_t out_w, bool channels_last) {
  return activation(pooled(x.sizes(), out_h, out_w), x.dtype(), channels_last);
}

Tensor adaptive_avg_pool2d_backward(const Tensor& g, const Shape& input_sizes, bool channels_last) {
  return activation(input_sizes, g.dtype(), channels_last);
}

// The targets are not read: there is nothing to check them against.
ClassTargets class_targets(const Tensor& target, const Tensor& weight, int64_t cdim, int64_t classes,
                           int64_t ignore_index, const char*) {
  ClassTargets t;
  t.cdim = cdim;
  t.classes = classes;
  t.ignore_index = ignore_index;
  t.target = target;
  t.weight = weight;
  return t;
}

// The temporaries of the CPU's product (onednn/matmul.cpp): the multiplier in c's dtype,
// a row-major copy of a transposed a where the native kernel reads one, and where a 16-bit
// product runs on the float32 kernel (by choice, or on a CPU without a native 16-bit
// kernel, where oneDNN's reference loops are passed over) float32 copies of the operands,
// of c and of the multiplier. A product of a few rows (the matrix-vector
// kernel, own buffers) or in float64 has none. The epilogue "runs" (oneDNN's post-ops).
bool matmul_into(const Tensor& a, const Tensor& b, const Tensor& bias, const Tensor& c, const char*, cpu::Activation,
                 const Tensor& mul, cpu::Activation) {
  if (c.numel() == 0 || a.size(-1) == 0 || c.size(-2) <= cpu::kGemvMaxRows || c.dtype() == kFloat64) return true;
  std::vector<Tensor> held;
  if (mul.defined() && mul.dtype() != c.dtype()) held.push_back(meta_empty(mul.sizes(), c.dtype()));
  const DType d16 = is_reduced_float(a.dtype()) ? a.dtype() : is_reduced_float(b.dtype()) ? b.dtype() : c.dtype();
  if (!is_reduced_float(d16)) return true;
  if (!cpu::matmul_widens(a, b, c) && cpu::native_matmul(d16)) {
    if (cpu::matmul_copies_a(a, c)) held.push_back(meta_empty(a.sizes(), a.dtype()));
    return true;
  }
  for (const Tensor* t : {&a, &b, &bias, &c})
    if (t->defined() && t->dtype() != kFloat32) held.push_back(meta_empty(t->sizes(), kFloat32));
  if (mul.defined() && c.dtype() != kFloat32) held.push_back(meta_empty(mul.sizes(), kFloat32));
  return true;
}

// The CPU's choice: 16-bit operands widened to float32 where 16-bit products run on the
// float32 kernel.
Tensor widen_for_gemm(const Tensor& t) {
  if (!t.defined() || !is_reduced_float(t.dtype()) || cpu_gemm16_path(t.dtype()) != Gemm16::kFloat32) return t;
  return meta_empty(t.sizes(), kFloat32);
}

bool sdpa_bf16_declined(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, double, bool) {
  return false;
}

// Host data becomes meta tensors (nothing to copy); a meta tensor has no values to read back.
void transfer(const Tensor& dst, const Tensor& src, bool) {
  TC_CHECK(dst.device().is_meta(), "to", "a meta tensor of shape ", shape_str(src.sizes()),
           " has no values to copy to ", dst.device());
}

}  // namespace

void register_meta(Registry& registry) {
  Kernels k;
#define TC_KERNEL(name, ret, params) set_noop(k.name);
#include "backend/kernels.def"
#undef TC_KERNEL
#define TC_MAP(F) set_noop(k.map<fn::F>());
  TC_UNARY_FNS(TC_MAP)
  TC_BINARY_FNS(TC_MAP)
  TC_TERNARY_FNS(TC_MAP)
#undef TC_MAP
  k.transfer = &transfer;
  k.conv2d_forward = &conv2d_forward;
  k.conv2d_backward_data = &conv2d_backward_data;
  k.conv2d_backward_weights = &conv2d_backward_weights;
  k.max_pool2d_forward = &max_pool2d_forward;
  k.max_pool2d_backward = &max_pool2d_backward;
  k.max_pool2d_indices = &max_pool2d_indices;
  k.avg_pool2d_forward = &avg_pool2d_forward;
  k.avg_pool2d_backward = &avg_pool2d_backward;
  k.adaptive_avg_pool2d_forward = &adaptive_avg_pool2d_forward;
  k.adaptive_avg_pool2d_backward = &adaptive_avg_pool2d_backward;
  k.class_targets = &class_targets;
  k.matmul_into = &matmul_into;
  k.widen_for_gemm = &widen_for_gemm;
  k.sdpa_forward_bf16 = &sdpa_bf16_declined;
  registry.add(DeviceType::Meta, "meta", k);
}

}  // namespace tc::backend
