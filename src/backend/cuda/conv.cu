// conv2d on cuDNN's legacy convolution API (conv.h).
//
// Each call describes its tensors as packed NCHW or NHWC (operands in another layout are
// copied first), asks cuDNN's heuristics (the *_v7 queries) for the algorithms of the pass
// once per geometry and caches the first that is deterministic, allowed for the dtype (no
// Tensor Core math for float32 / float64) and whose workspace cuDNN can size; the
// workspace is a tensor from the caching allocator on the current stream, freed in stream
// order after the call. The legacy API counts in int: a batch whose activations exceed
// 2^31 - 1 elements runs in chunks along N (the filter gradient accumulates over chunks).
#include <algorithm>
#include <climits>
#include <map>
#include <mutex>
#include <string_view>
#include <type_traits>
#include <vector>

#include "backend/cuda/conv.h"
#include "backend/cuda/convert.cuh"
#include "backend/cuda/copy.h"
#include "backend/cuda/launch.h"
#include "backend/cuda/reduce.h"

#if defined(TC_WITH_CUDNN)
#include <cudnn.h>
#endif

namespace tc::gpu {
namespace {

constexpr const char* kOp = "conv2d";

Shape out_sizes(const Shape& x, const Shape& w, const cpu::ConvParams& p) {
  return {x[0], w[0], cpu::conv_out_size(x[2], w[2], p.stride[0], p.padding[0], p.dilation[0]),
          cpu::conv_out_size(x[3], w[3], p.stride[1], p.padding[1], p.dilation[1])};
}

void check_floating(DType dt) {
  TC_CHECK(dt == kFloat32 || dt == kFloat16 || dt == kBFloat16 || dt == kFloat64, kOp, "no CUDA convolution for dtype ",
           dtype_name(dt));
}

#if defined(TC_WITH_CUDNN)

// True when 4-d t's non-size-1 dims have the strides of packed NHWC memory.
bool nhwc_dense(const Tensor& t) {
  const Shape& sz = t.sizes();
  const Shape nhwc = {sz[2] * sz[3] * sz[1], 1, sz[3] * sz[1], sz[1]};
  for (int d = 0; d < 4; ++d)
    if (sz[d] != 1 && t.stride(d) != nhwc[d]) return false;
  return true;
}

// cpu::is_channels_last (backend/cpu/onednn/plan.h): NHWC memory that is not plainly
// contiguous, or a contiguous one-channel tensor (both layouts are the same memory).
bool is_channels_last(const Tensor& t) {
  return t.dim() == 4 && nhwc_dense(t) && (!t.is_contiguous() || t.size(1) == 1);
}

// A new uninitialized (N, C, H, W) tensor on `device`, NHWC in memory when channels_last.
Tensor make_activation(const Shape& sizes, DType dt, bool channels_last, Device device) {
  if (!channels_last) return make_tensor(sizes, dt, device);
  const int64_t N = sizes[0], C = sizes[1], H = sizes[2], W = sizes[3];
  Tensor base = make_tensor({N, H, W, C}, dt, device);
  return make_view(base, sizes, {H * W * C, 1, W * C, C}, 0);
}

// 4-d t packed in the requested layout: t itself when it already is, else a copy.
Tensor in_layout(const Tensor& t, bool channels_last) {
  if (channels_last ? nhwc_dense(t) : t.is_contiguous()) return t;
  Tensor packed = make_activation(t.sizes(), t.dtype(), channels_last, t.device());
  copy_into(packed, t);
  return packed;
}

// y[n, c, h, w] += bias[c], computed in C (float; double for float64) and rounded once;
// inner is the distance between channels in elements (H * W for NCHW, 1 for NHWC).
template <class T>
__global__ void add_bias_kernel(T* y, const T* bias, int64_t bias_stride, int64_t n, int64_t channels, int64_t inner) {
  using C = std::conditional_t<std::is_same_v<T, double>, double, float>;
  for (int64_t i = global_index(); i < n; i += grid_stride()) {
    const int64_t c = (i / inner) % channels;
    y[i] = store_as<T>(convert_value<C>(y[i]) + convert_value<C>(bias[c * bias_stride]));
  }
}

// y (packed in its layout) += bias broadcast over (N, H, W).
void add_bias(const Tensor& y, const Tensor& bias, bool channels_last) {
  const int64_t n = y.numel(), channels = y.size(1);
  const int64_t inner = channels_last ? 1 : y.size(2) * y.size(3);
  const cudaStream_t stream = current_raw_stream(y.device());
  dispatch_dtype(y.dtype(), [&]<class T>() {
    if constexpr (std::is_same_v<T, double> || std::is_same_v<T, float> || std::is_same_v<T, Half> ||
                  std::is_same_v<T, BFloat16>) {
      add_bias_kernel<T><<<blocks_for(n), kThreads, 0, stream>>>(
          static_cast<T*>(y.raw_data()), static_cast<const T*>(bias.raw_data()), bias.stride(0), n, channels, inner);
    } else {
      TC_FAIL(kOp, "no CUDA bias for dtype ", dtype_name(y.dtype()));
    }
  });
  TC_CUDA_CHECK(cudaGetLastError(), kOp);
}

// "[conv2d] cudnnConvolutionForward failed: CUDNN_STATUS_... (cuDNN status n)".
[[noreturn]] void throw_cudnn(cudnnStatus_t st, const char* call) {
  const std::string_view text(call);
  TC_FAIL(kOp, text.substr(0, text.find('(')), " failed: ", cudnnGetErrorString(st), " (cuDNN status ",
          static_cast<int>(st), ")");
}
#define TC_CUDNN_CHECK(call)                                        \
  do {                                                              \
    const cudnnStatus_t tc_st_ = (call);                            \
    if (tc_st_ != CUDNN_STATUS_SUCCESS) throw_cudnn(tc_st_, #call); \
  } while (0)

// One handle per device and thread (cuDNN handles are not thread safe), bound to the
// current stream by each call.
cudnnHandle_t handle(Device device, cudaStream_t stream) {
  thread_local cudnnHandle_t handles[64] = {};
  TC_CHECK(device.index >= 0 && device.index < 64, kOp, "device index ", device.index, " out of range");
  cudnnHandle_t& h = handles[device.index];
  if (h == nullptr) {
    // cuDNN loads its sub-libraries (libcudnn_cnn.so.9, ...) by name when the handle is made.
    cudnnHandle_t created = nullptr;
    const cudnnStatus_t st = cudnnCreate(&created);
    TC_CHECK(st == CUDNN_STATUS_SUCCESS, kOp, "cudnnCreate failed: ", cudnnGetErrorString(st), " (cuDNN status ",
             static_cast<int>(st), "; is the folder of libcudnn.so.9 and its sub-libraries on LD_LIBRARY_PATH?)");
    h = created;
  }
  TC_CUDNN_CHECK(cudnnSetStream(h, stream));
  return h;
}

cudnnDataType_t cudnn_type(DType t) {
  switch (t) {
    case kFloat32:
      return CUDNN_DATA_FLOAT;
    case kFloat16:
      return CUDNN_DATA_HALF;
    case kBFloat16:
      return CUDNN_DATA_BFLOAT16;
    case kFloat64:
      return CUDNN_DATA_DOUBLE;
    default:
      TC_FAIL(kOp, "no CUDA convolution for dtype ", dtype_name(t));
  }
}

int as_int(int64_t v, const char* what) {
  TC_CHECK(v >= 0 && v <= INT_MAX, kOp, what, " ", v, " does not fit cuDNN's int");
  return static_cast<int>(v);
}

// The descriptor handles, destroyed also when Descriptors' constructor throws half way.
struct DescriptorHandles {
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  DescriptorHandles() = default;
  DescriptorHandles(const DescriptorHandles&) = delete;
  DescriptorHandles& operator=(const DescriptorHandles&) = delete;
  ~DescriptorHandles() {
    if (conv) cudnnDestroyConvolutionDescriptor(conv);
    if (w) cudnnDestroyFilterDescriptor(w);
    if (y) cudnnDestroyTensorDescriptor(y);
    if (x) cudnnDestroyTensorDescriptor(x);
  }
};

// The descriptors of one call: x (N, C, H, W), w (O, C / groups, kH, kW), y (N, O, Ho, Wo).
struct Descriptors : DescriptorHandles {
  Descriptors(const Shape& xs, const Shape& ws, const Shape& ys, DType dt, bool channels_last,
              const cpu::ConvParams& p) {
    const cudnnDataType_t type = cudnn_type(dt);
    const cudnnTensorFormat_t format = channels_last ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW;
    TC_CUDNN_CHECK(cudnnCreateTensorDescriptor(&x));
    TC_CUDNN_CHECK(cudnnCreateTensorDescriptor(&y));
    TC_CUDNN_CHECK(cudnnCreateFilterDescriptor(&w));
    TC_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&conv));
    TC_CUDNN_CHECK(cudnnSetTensor4dDescriptor(x, format, type, as_int(xs[0], "batch"), as_int(xs[1], "channels"),
                                              as_int(xs[2], "height"), as_int(xs[3], "width")));
    TC_CUDNN_CHECK(cudnnSetTensor4dDescriptor(y, format, type, as_int(ys[0], "batch"), as_int(ys[1], "channels"),
                                              as_int(ys[2], "height"), as_int(ys[3], "width")));
    TC_CUDNN_CHECK(cudnnSetFilter4dDescriptor(w, type, format, as_int(ws[0], "out_channels"),
                                              as_int(ws[1], "in_channels"), as_int(ws[2], "kernel height"),
                                              as_int(ws[3], "kernel width")));
    const cudnnDataType_t compute = dt == kFloat64 ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT;
    TC_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(
        conv, as_int(p.padding[0], "padding"), as_int(p.padding[1], "padding"), as_int(p.stride[0], "stride"),
        as_int(p.stride[1], "stride"), as_int(p.dilation[0], "dilation"), as_int(p.dilation[1], "dilation"),
        CUDNN_CROSS_CORRELATION, compute));
    TC_CUDNN_CHECK(cudnnSetConvolutionGroupCount(conv, as_int(p.groups, "groups")));
    TC_CUDNN_CHECK(cudnnSetConvolutionMathType(conv, base_math(dt)));
  }

  // Tensor Core math for 16-bit data; FMA math for float32 (no TF32: float32 stays float32,
  // as on the CPU and in the CUDA matmul); the default for float64 (no conversions).
  static cudnnMathType_t base_math(DType dt) {
    return dt == kFloat32 ? CUDNN_FMA_MATH : dt == kFloat64 ? CUDNN_DEFAULT_MATH : CUDNN_TENSOR_OP_MATH;
  }
};

enum class Pass { kForward, kData, kFilter };
const char* pass_name(Pass pass) {
  return pass == Pass::kForward ? "forward" : pass == Pass::kData ? "backward-data" : "backward-filter";
}

struct Choice {
  int algo = 0;
  cudnnMathType_t math = CUDNN_DEFAULT_MATH;
  size_t workspace = 0;
};

// Workspace sizes above this skip the algorithm (some FFT ones ask for gigabytes).
constexpr size_t kMaxWorkspaceBytes = size_t{1} << 30;

// The workspace `algo` needs with the descriptors' current math type; false when cuDNN
// does not support the combination.
bool workspace_size(Pass pass, cudnnHandle_t h, const Descriptors& d, int algo, size_t& bytes) {
  cudnnStatus_t st = CUDNN_STATUS_NOT_SUPPORTED;
  switch (pass) {
    case Pass::kForward:
      st = cudnnGetConvolutionForwardWorkspaceSize(h, d.x, d.w, d.conv, d.y,
                                                   static_cast<cudnnConvolutionFwdAlgo_t>(algo), &bytes);
      break;
    case Pass::kData:
      st = cudnnGetConvolutionBackwardDataWorkspaceSize(h, d.w, d.y, d.conv, d.x,
                                                        static_cast<cudnnConvolutionBwdDataAlgo_t>(algo), &bytes);
      break;
    case Pass::kFilter:
      st = cudnnGetConvolutionBackwardFilterWorkspaceSize(h, d.x, d.y, d.conv, d.w,
                                                          static_cast<cudnnConvolutionBwdFilterAlgo_t>(algo), &bytes);
      break;
  }
  return st == CUDNN_STATUS_SUCCESS;
}

struct Candidate {
  int algo;
  cudnnMathType_t math;
};

template <class Perf>
void collect(const std::vector<Perf>& perf, int count, std::vector<Candidate>& out) {
  for (int i = 0; i < count; ++i)
    if (perf[i].status == CUDNN_STATUS_SUCCESS && perf[i].determinism == CUDNN_DETERMINISTIC)
      out.push_back({static_cast<int>(perf[i].algo), perf[i].mathType});
}

// The heuristics' deterministic candidates, best first, then the implicit-GEMM algorithms
// (deterministic, supported for every configuration) in case the list had none usable.
std::vector<Candidate> candidates(Pass pass, cudnnHandle_t h, const Descriptors& d, cudnnMathType_t math) {
  std::vector<Candidate> out;
  int max_count = 0, count = 0;
  switch (pass) {
    case Pass::kForward: {
      TC_CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithmMaxCount(h, &max_count));
      std::vector<cudnnConvolutionFwdAlgoPerf_t> perf(static_cast<size_t>(std::max(max_count, 1)));
      TC_CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(h, d.x, d.w, d.conv, d.y, max_count, &count, perf.data()));
      collect(perf, count, out);
      out.push_back({CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM, math});
      out.push_back({CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, math});
      break;
    }
    case Pass::kData: {
      TC_CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithmMaxCount(h, &max_count));
      std::vector<cudnnConvolutionBwdDataAlgoPerf_t> perf(static_cast<size_t>(std::max(max_count, 1)));
      TC_CUDNN_CHECK(
          cudnnGetConvolutionBackwardDataAlgorithm_v7(h, d.w, d.y, d.conv, d.x, max_count, &count, perf.data()));
      collect(perf, count, out);
      out.push_back({CUDNN_CONVOLUTION_BWD_DATA_ALGO_1, math});
      break;
    }
    case Pass::kFilter: {
      TC_CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(h, &max_count));
      std::vector<cudnnConvolutionBwdFilterAlgoPerf_t> perf(static_cast<size_t>(std::max(max_count, 1)));
      TC_CUDNN_CHECK(
          cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, d.x, d.y, d.conv, d.w, max_count, &count, perf.data()));
      collect(perf, count, out);
      out.push_back({CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1, math});
      break;
    }
  }
  return out;
}

std::mutex g_cache_mutex;
std::map<std::vector<int64_t>, Choice>& choice_cache() {
  static auto* cache = new std::map<std::vector<int64_t>, Choice>;
  return *cache;
}

// The algorithm of `pass` for these descriptors (cached per key); leaves d.conv's math
// type set to the choice's.
Choice choose(Pass pass, cudnnHandle_t h, const Descriptors& d, DType dt, const std::vector<int64_t>& key,
              const Shape& xs, const Shape& ws) {
  {
    std::lock_guard<std::mutex> lock(g_cache_mutex);
    auto it = choice_cache().find(key);
    if (it != choice_cache().end()) {
      TC_CUDNN_CHECK(cudnnSetConvolutionMathType(d.conv, it->second.math));
      return it->second;
    }
  }
  const cudnnMathType_t base = Descriptors::base_math(dt);
  for (const Candidate& c : candidates(pass, h, d, base)) {
    // float32 runs with FMA math whatever the heuristics' entry says (the default math
    // would allow TF32) and skips Tensor Core entries; float64 skips down-conversions.
    if (dt == kFloat32 && (c.math == CUDNN_TENSOR_OP_MATH || c.math == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION)) continue;
    if (dt == kFloat64 && c.math == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION) continue;
    const cudnnMathType_t math = dt == kFloat32 ? CUDNN_FMA_MATH : c.math;
    if (cudnnSetConvolutionMathType(d.conv, math) != CUDNN_STATUS_SUCCESS) continue;
    size_t bytes = 0;
    if (!workspace_size(pass, h, d, c.algo, bytes) || bytes > kMaxWorkspaceBytes) continue;
    const Choice choice{c.algo, math, bytes};
    std::lock_guard<std::mutex> lock(g_cache_mutex);
    choice_cache().emplace(key, choice);
    return choice;
  }
  TC_FAIL(kOp, "cuDNN has no deterministic ", pass_name(pass), " algorithm for ", dtype_name(dt), " input ",
          shape_str(xs), " and weight ", shape_str(ws));
}

std::vector<int64_t> cache_key(Pass pass, Device device, DType dt, bool channels_last, const Shape& xs, const Shape& ws,
                               const cpu::ConvParams& p) {
  std::vector<int64_t> key{static_cast<int64_t>(pass), device.index, static_cast<int64_t>(dt), channels_last};
  key.insert(key.end(), xs.begin(), xs.end());
  key.insert(key.end(), ws.begin(), ws.end());
  for (int64_t v : {p.stride[0], p.stride[1], p.padding[0], p.padding[1], p.dilation[0], p.dilation[1], p.groups})
    key.push_back(v);
  return key;
}

// Batch chunks that keep every activation of a call within cuDNN's int element counts.
int64_t chunk_size(const Shape& xs, const Shape& ys) {
  const int64_t per_sample = std::max(xs[1] * xs[2] * xs[3], ys[1] * ys[2] * ys[3]);
  TC_CHECK(per_sample <= INT_MAX, kOp, "one sample of input ", shape_str(xs), " / output ", shape_str(ys),
           " exceeds cuDNN's 2^31 - 1 elements");
  return std::max<int64_t>(1, std::min<int64_t>(xs[0], INT_MAX / per_sample));
}

// A workspace of `bytes` from the caching allocator on the current stream (freed in stream
// order when the returned tensor goes, after the call that uses it is queued).
Tensor workspace(size_t bytes, Device device) {
  return bytes == 0 ? Tensor() : make_tensor({static_cast<int64_t>(bytes)}, kUInt8, device);
}

struct Scalars {
  float f1 = 1.0f, f0 = 0.0f;
  double d1 = 1.0, d0 = 0.0;
  bool dbl;
  explicit Scalars(DType dt) : dbl(dt == kFloat64) {}
  const void* one() const { return dbl ? static_cast<const void*>(&d1) : &f1; }
  const void* zero() const { return dbl ? static_cast<const void*>(&d0) : &f0; }
};

// The pass over batch chunks [n0, n0 + nc): fn(descriptors, choice, handle, n0, nc).
template <class F>
void over_chunks(Pass pass, Device device, DType dt, bool cl, const Shape& xs, const Shape& ws, const Shape& ys,
                 const cpu::ConvParams& p, F&& fn) {
  const cudaStream_t stream = current_raw_stream(device);
  const cudnnHandle_t h = handle(device, stream);
  const int64_t chunk = chunk_size(xs, ys);
  for (int64_t n0 = 0; n0 < xs[0]; n0 += chunk) {
    const int64_t nc = std::min(chunk, xs[0] - n0);
    Shape xc = xs, yc = ys;
    xc[0] = yc[0] = nc;
    const Descriptors d(xc, ws, yc, dt, cl, p);
    const Choice c = choose(pass, h, d, dt, cache_key(pass, device, dt, cl, xc, ws, p), xc, ws);
    fn(d, c, h, n0, nc);
  }
}

char* at_sample(const Tensor& t, int64_t n0) {
  return static_cast<char*>(t.raw_data()) + n0 * t.size(1) * t.size(2) * t.size(3) * element_size(t.dtype());
}

#endif  // TC_WITH_CUDNN

void check_operands(const Tensor& a, const Tensor& b, const char* what) {
  TC_CHECK(a.device().is_cuda() && a.device() == b.device(), kOp, "expected ", what, " on one CUDA device, got ",
           a.device(), " and ", b.device());
  TC_CHECK(a.dim() == 4 && b.dim() == 4 && a.numel() > 0 && b.numel() > 0, kOp, "expected non-empty 4-d ", what,
           ", got ", shape_str(a.sizes()), " and ", shape_str(b.sizes()));
  check_floating(a.dtype());
  TC_CHECK(a.dtype() == b.dtype(), kOp, what, " dtypes ", dtype_name(a.dtype()), " and ", dtype_name(b.dtype()),
           " differ");
}

[[maybe_unused]] [[noreturn]] void without_cudnn() {
  TC_FAIL(kOp,
          "CUDA tensors: tensorcast was built without cuDNN; reconfigure with -DTC_CUDNN_ROOT=<prefix holding "
          "include/cudnn.h and lib/libcudnn.so*> (e.g. the pip package nvidia-cudnn-cu13's folder)");
}

}  // namespace

size_t conv2d_cache_size() {
#if defined(TC_WITH_CUDNN)
  std::lock_guard<std::mutex> lock(g_cache_mutex);
  return choice_cache().size();
#else
  return 0;
#endif
}

Tensor conv2d_forward(const Tensor& x, const Tensor& w, const Tensor& bias, const cpu::ConvParams& p) {
  check_operands(x, w, "input and weight");
  const Device device = x.device();
  const Shape ys = out_sizes(x.sizes(), w.sizes(), p);
  if (bias.defined())
    TC_CHECK(bias.device() == device && bias.dtype() == x.dtype() && bias.dim() == 1 && bias.size(0) == ys[1], kOp,
             "expected a ", dtype_name(x.dtype()), " bias of shape (", ys[1], ") on ", device, ", got ",
             dtype_name(bias.dtype()), " ", shape_str(bias.sizes()), " on ", bias.device());
#if defined(TC_WITH_CUDNN)
  const bool cl = is_channels_last(x);
  DeviceGuard guard(device);
  const Tensor xp = in_layout(x, cl), wp = in_layout(w, cl);
  Tensor y = make_activation(ys, x.dtype(), cl, device);
  const Scalars s(x.dtype());
  over_chunks(Pass::kForward, device, x.dtype(), cl, x.sizes(), w.sizes(), ys, p,
              [&](const Descriptors& d, const Choice& c, cudnnHandle_t h, int64_t n0, int64_t) {
                const Tensor space = workspace(c.workspace, device);
                TC_CUDNN_CHECK(cudnnConvolutionForward(h, s.one(), d.x, at_sample(xp, n0), d.w, wp.raw_data(), d.conv,
                                                       static_cast<cudnnConvolutionFwdAlgo_t>(c.algo),
                                                       space.defined() ? space.raw_data() : nullptr, c.workspace,
                                                       s.zero(), d.y, at_sample(y, n0)));
              });
  if (bias.defined()) add_bias(y, bias, cl);
  return y;
#else
  without_cudnn();
#endif
}

Tensor conv2d_backward_data(const Tensor& grad_out, const Tensor& w, const Shape& input_sizes, const cpu::ConvParams& p,
                            bool input_channels_last) {
  check_operands(grad_out, w, "gradient and weight");
  const Device device = grad_out.device();
  TC_CHECK(input_sizes.size() == 4, kOp, "expected a 4-d input shape, got ", shape_str(input_sizes));
  const Shape ys = out_sizes(input_sizes, w.sizes(), p);
  TC_CHECK(grad_out.sizes() == ys, kOp, "gradient of shape ", shape_str(grad_out.sizes()), " for output shape ",
           shape_str(ys));
#if defined(TC_WITH_CUDNN)
  const bool cl = input_channels_last;
  DeviceGuard guard(device);
  const Tensor gp = in_layout(grad_out, cl), wp = in_layout(w, cl);
  Tensor gx = make_activation(input_sizes, grad_out.dtype(), cl, device);
  const Scalars s(grad_out.dtype());
  over_chunks(Pass::kData, device, grad_out.dtype(), cl, input_sizes, w.sizes(), ys, p,
              [&](const Descriptors& d, const Choice& c, cudnnHandle_t h, int64_t n0, int64_t) {
                const Tensor space = workspace(c.workspace, device);
                TC_CUDNN_CHECK(cudnnConvolutionBackwardData(h, s.one(), d.w, wp.raw_data(), d.y, at_sample(gp, n0),
                                                            d.conv, static_cast<cudnnConvolutionBwdDataAlgo_t>(c.algo),
                                                            space.defined() ? space.raw_data() : nullptr, c.workspace,
                                                            s.zero(), d.x, at_sample(gx, n0)));
              });
  return gx;
#else
  (void)input_channels_last;
  (void)device;
  without_cudnn();
#endif
}

std::pair<Tensor, Tensor> conv2d_backward_weights(const Tensor& x, const Tensor& grad_out, const Shape& weight_sizes,
                                                  bool with_bias, const cpu::ConvParams& p, DType grad_dtype) {
  check_operands(x, grad_out, "input and gradient");
  const Device device = x.device();
  TC_CHECK(weight_sizes.size() == 4, kOp, "expected a 4-d weight shape, got ", shape_str(weight_sizes));
  const Shape ys = out_sizes(x.sizes(), weight_sizes, p);
  TC_CHECK(grad_out.sizes() == ys, kOp, "gradient of shape ", shape_str(grad_out.sizes()), " for output shape ",
           shape_str(ys));
  check_floating(grad_dtype);
#if defined(TC_WITH_CUDNN)
  const DType dt = x.dtype();
  const bool cl = is_channels_last(x);
  DeviceGuard guard(device);
  const Tensor xp = in_layout(x, cl), gp = in_layout(grad_out, cl);
  Tensor gw = make_activation(weight_sizes, dt, cl, device);  // the filter in the call's layout
  const Scalars s(dt);
  over_chunks(Pass::kFilter, device, dt, cl, x.sizes(), weight_sizes, ys, p,
              [&](const Descriptors& d, const Choice& c, cudnnHandle_t h, int64_t n0, int64_t) {
                const Tensor space = workspace(c.workspace, device);
                TC_CUDNN_CHECK(cudnnConvolutionBackwardFilter(
                    h, s.one(), d.x, at_sample(xp, n0), d.y, at_sample(gp, n0), d.conv,
                    static_cast<cudnnConvolutionBwdFilterAlgo_t>(c.algo), space.defined() ? space.raw_data() : nullptr,
                    c.workspace, n0 == 0 ? s.zero() : s.one(), d.w, gw.raw_data()));
              });
  if (cl || grad_dtype != dt) {  // contiguous OIHW in grad_dtype
    Tensor out = make_tensor(weight_sizes, grad_dtype, device);
    copy_into(out, gw);
    gw = out;
  }
  Tensor gb;
  if (with_bias) {
    gb = make_tensor({ys[1]}, grad_dtype, device);
    sum_kernel(gb, grad_out, {true, false, true, true});
  }
  return {gw, gb};
#else
  (void)with_bias;
  (void)device;
  without_cudnn();
#endif
}

}  // namespace tc::gpu
