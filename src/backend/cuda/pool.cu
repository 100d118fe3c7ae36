// 2-d pooling on CUDA tensors (pool.h). The forwards run one thread per output element,
// the backwards one thread per input element: each gathers, in ascending output order,
// the gradients of the windows that hold it (max pooling: whose saved argmax it is), so
// there are no atomics and overlapping windows give the same bits on every run. Threads
// walk their tensor in its memory order (NCHW or NHWC), so neighbouring threads write
// neighbouring elements.
#include <limits>

#include "backend/cuda/convert.cuh"
#include "backend/cuda/launch.h"
#include "backend/cuda/pool.h"
#include "core/tensor_impl.h"

namespace tc::gpu {
namespace {

using cpu::PoolParams;

// Element strides of an (N, C, H, W) tensor.
struct Strides4 {
  int64_t n, c, h, w;
};
Strides4 strides_of(const Tensor& t) { return {t.stride(0), t.stride(1), t.stride(2), t.stride(3)}; }

// The sizes of one pooling: input (N, C, H, W), output (N, C, OH, OW), and whether the
// tensors this launch writes are NHWC in memory.
struct Sizes {
  int64_t N, C, H, W, OH, OW;
  bool channels_last;
};

struct Coord {
  int64_t n, c, h, w;
};
// The coordinates of element i of a dense (N, C, H, W) tensor in memory order.
__device__ __forceinline__ Coord coord_of(int64_t i, int64_t C, int64_t H, int64_t W, bool channels_last) {
  Coord k;
  if (channels_last) {
    k.c = i % C;
    i /= C;
    k.w = i % W;
    i /= W;
    k.h = i % H;
    k.n = i / H;
  } else {
    k.w = i % W;
    i /= W;
    k.h = i % H;
    i /= H;
    k.c = i % C;
    k.n = i / C;
  }
  return k;
}
__device__ __forceinline__ int64_t at(const Strides4& s, int64_t n, int64_t c, int64_t h, int64_t w) {
  return n * s.n + c * s.c + h * s.h + w * s.w;
}

// A new (N, C, H, W) tensor on `device`, NHWC in memory when channels_last.
Tensor make_layout(const Shape& s, DType dt, bool channels_last, Device device) {
  if (!channels_last) return make_tensor(s, dt, device);
  Tensor base = make_tensor({s[0], s[2], s[3], s[1]}, dt, device);
  return make_view(base, s, {s[2] * s[3] * s[1], 1, s[3] * s[1], s[1]}, 0);
}

template <class T>
struct Compute {  // the compute type of storage type T: double for double, else float
  using type = float;
};
template <>
struct Compute<double> {
  using type = double;
};

// ------------------------------------------------------------------ max

template <class T>
__global__ void max_pool_forward_kernel(T* out, int64_t* indices, const T* x, Strides4 xs, Sizes g, PoolParams p,
                                        int64_t total) {
  using C = typename Compute<T>::type;
  for (int64_t i = global_index(); i < total; i += grid_stride()) {
    const Coord o = coord_of(i, g.C, g.OH, g.OW, g.channels_last);
    const T* src = x + o.n * xs.n + o.c * xs.c;
    C best = -std::numeric_limits<C>::infinity();
    int64_t arg = -1;
    bool nan = false;
    for (int64_t kh = 0; kh < p.kernel[0] && !nan; ++kh) {
      const int64_t ih = o.h * p.stride[0] - p.padding[0] + kh * p.dilation[0];
      if (ih < 0 || ih >= g.H) continue;
      for (int64_t kw = 0; kw < p.kernel[1]; ++kw) {
        const int64_t iw = o.w * p.stride[1] - p.padding[1] + kw * p.dilation[1];
        if (iw < 0 || iw >= g.W) continue;
        const C v = convert_value<C>(src[ih * xs.h + iw * xs.w]);
        if (arg < 0 || v > best || v != v) {  // the first maximum; NaN propagates
          best = v;
          arg = ih * g.W + iw;
          if (v != v) {
            nan = true;
            break;
          }
        }
      }
    }
    out[i] = convert_value<T>(best);  // out and indices are dense in memory order
    indices[i] = arg;
  }
}

// One thread per input element: the windows holding (h, w) are those with
// o * stride - pad + k * dilation == h for some tap k; k descending gives o ascending.
template <class T>
__global__ void max_pool_backward_kernel(T* gx, const T* gy, Strides4 gs, const int64_t* indices, Strides4 is, Sizes g,
                                         PoolParams p, int64_t total) {
  using C = typename Compute<T>::type;
  for (int64_t i = global_index(); i < total; i += grid_stride()) {
    const Coord q = coord_of(i, g.C, g.H, g.W, g.channels_last);
    const int64_t me = q.h * g.W + q.w;
    C acc = 0;
    for (int64_t kh = p.kernel[0] - 1; kh >= 0; --kh) {
      const int64_t th = q.h + p.padding[0] - kh * p.dilation[0];
      if (th < 0 || th % p.stride[0] != 0) continue;
      const int64_t oh = th / p.stride[0];
      if (oh >= g.OH) continue;
      for (int64_t kw = p.kernel[1] - 1; kw >= 0; --kw) {
        const int64_t tw = q.w + p.padding[1] - kw * p.dilation[1];
        if (tw < 0 || tw % p.stride[1] != 0) continue;
        const int64_t ow = tw / p.stride[1];
        if (ow >= g.OW) continue;
        if (indices[at(is, q.n, q.c, oh, ow)] == me) acc += convert_value<C>(gy[at(gs, q.n, q.c, oh, ow)]);
      }
    }
    gx[i] = convert_value<T>(acc);
  }
}

// ------------------------------------------------------------------ average

// PyTorch's avg_pool2d window along one dim (conv_direct.cpp's avg_window).
struct Window {
  int64_t start, end, padded_len;
};
__device__ __forceinline__ Window avg_window(int64_t o, int64_t in, int64_t k, int64_t s, int64_t pad) {
  const int64_t start = o * s - pad;
  const int64_t end = start + k < in + pad ? start + k : in + pad;
  return {start > 0 ? start : 0, end < in ? end : in, end - start};
}
__device__ __forceinline__ int64_t avg_divisor(const Window& h, const Window& w, bool include_pad) {
  return include_pad ? h.padded_len * w.padded_len : (h.end - h.start) * (w.end - w.start);
}

// PyTorch's adaptive window along one dim: [floor(o * in / out), ceil((o + 1) * in / out)).
__device__ __forceinline__ Window adaptive_window(int64_t o, int64_t in, int64_t out) {
  const int64_t start = o * in / out, end = ((o + 1) * in + out - 1) / out;
  return {start, end, end - start};
}

// Adaptive (true) or avg_pool2d windows for output (oh, ow).
template <bool Adaptive>
__device__ __forceinline__ void windows(const Sizes& g, const PoolParams& p, bool include_pad, int64_t oh, int64_t ow,
                                        Window& wh, Window& ww, int64_t& div) {
  if constexpr (Adaptive) {
    wh = adaptive_window(oh, g.H, g.OH);
    ww = adaptive_window(ow, g.W, g.OW);
    div = wh.padded_len * ww.padded_len;
  } else {
    wh = avg_window(oh, g.H, p.kernel[0], p.stride[0], p.padding[0]);
    ww = avg_window(ow, g.W, p.kernel[1], p.stride[1], p.padding[1]);
    div = avg_divisor(wh, ww, include_pad);
  }
}

template <bool Adaptive, class T>
__global__ void avg_pool_forward_kernel(T* out, const T* x, Strides4 xs, Sizes g, PoolParams p, bool include_pad,
                                        int64_t total) {
  using C = typename Compute<T>::type;
  for (int64_t i = global_index(); i < total; i += grid_stride()) {
    const Coord o = coord_of(i, g.C, g.OH, g.OW, g.channels_last);
    const T* src = x + o.n * xs.n + o.c * xs.c;
    Window wh, ww;
    int64_t div;
    windows<Adaptive>(g, p, include_pad, o.h, o.w, wh, ww, div);
    C acc = 0;
    for (int64_t h = wh.start; h < wh.end; ++h)
      for (int64_t w = ww.start; w < ww.end; ++w) acc += convert_value<C>(src[h * xs.h + w * xs.w]);
    out[i] = convert_value<T>(div > 0 ? acc / static_cast<C>(div) : C(0));
  }
}

// The outputs along one dim whose windows hold input index h: [lo, hi].
__device__ __forceinline__ void avg_range(int64_t h, int64_t k, int64_t s, int64_t pad, int64_t out, int64_t& lo,
                                          int64_t& hi) {
  // o * s - pad <= h < o * s - pad + k (the clip at in + pad never excludes an input index)
  const int64_t first = h + pad - k + 1;
  lo = first <= 0 ? 0 : (first + s - 1) / s;
  hi = (h + pad) / s;
  if (hi > out - 1) hi = out - 1;
}
__device__ __forceinline__ void adaptive_range(int64_t h, int64_t in, int64_t out, int64_t& lo, int64_t& hi) {
  // the first window holding h is floor(h * out / in); later ones start at or before h
  lo = h * out / in;
  hi = lo;
  while (hi + 1 < out && (hi + 1) * in / out <= h) ++hi;
}

template <bool Adaptive, class T>
__global__ void avg_pool_backward_kernel(T* gx, const T* gy, Strides4 gs, Sizes g, PoolParams p, bool include_pad,
                                         int64_t total) {
  using C = typename Compute<T>::type;
  for (int64_t i = global_index(); i < total; i += grid_stride()) {
    const Coord q = coord_of(i, g.C, g.H, g.W, g.channels_last);
    int64_t oh0, oh1, ow0, ow1;
    if constexpr (Adaptive) {
      adaptive_range(q.h, g.H, g.OH, oh0, oh1);
      adaptive_range(q.w, g.W, g.OW, ow0, ow1);
    } else {
      avg_range(q.h, p.kernel[0], p.stride[0], p.padding[0], g.OH, oh0, oh1);
      avg_range(q.w, p.kernel[1], p.stride[1], p.padding[1], g.OW, ow0, ow1);
    }
    C acc = 0;
    for (int64_t oh = oh0; oh <= oh1; ++oh)
      for (int64_t ow = ow0; ow <= ow1; ++ow) {
        Window wh, ww;
        int64_t div;
        windows<Adaptive>(g, p, include_pad, oh, ow, wh, ww, div);
        if (div <= 0 || q.h < wh.start || q.h >= wh.end || q.w < ww.start || q.w >= ww.end) continue;
        acc += convert_value<C>(gy[at(gs, q.n, q.c, oh, ow)]) / static_cast<C>(div);
      }
    gx[i] = convert_value<T>(acc);
  }
}

void check_input(const char* op, const Tensor& t, const char* what) {
  TC_CHECK(t.defined(), op, "got an undefined ", what);
  TC_CHECK(t.dim() == 4 && is_floating(t.dtype()) && t.device().is_cuda(), op, "expected a 4-d ", what,
           " of a floating dtype on a CUDA device, got ", dtype_name(t.dtype()), shape_str(t.sizes()), " on ",
           t.device());
}

Sizes sizes_of(const Shape& xs, int64_t oh, int64_t ow, bool channels_last) {
  return {xs[0], xs[1], xs[2], xs[3], oh, ow, channels_last};
}

template <class Launch>
void launch(const char* op, Device device, DType dt, Launch&& fn) {
  DeviceGuard guard(device);
  const cudaStream_t stream = current_raw_stream(device);
  dispatch_floating(dt, op, [&]<class T>() { fn.template operator()<T>(stream); });
  TC_CUDA_CHECK(cudaGetLastError(), op);
}

template <class T>
T* data_of(const Tensor& t) {
  return static_cast<T*>(t.raw_data());
}

Tensor avg_forward(const char* op, const Tensor& x, const PoolParams& p, bool include_pad, bool adaptive,
                   bool channels_last) {
  check_input(op, x, "input");
  const Shape& xs = x.sizes();
  Tensor out = make_layout({xs[0], xs[1], p.out[0], p.out[1]}, x.dtype(), channels_last, x.device());
  const int64_t total = out.numel();
  if (total == 0) return out;
  const Sizes g = sizes_of(xs, p.out[0], p.out[1], channels_last);
  launch(op, x.device(), x.dtype(), [&]<class T>(cudaStream_t stream) {
    with_flag(adaptive, [&]<bool kAdaptive>() {
      avg_pool_forward_kernel<kAdaptive, T><<<blocks_for(total), kThreads, 0, stream>>>(
          data_of<T>(out), data_of<const T>(x), strides_of(x), g, p, include_pad, total);
    });
  });
  return out;
}

Tensor avg_backward(const char* op, const Tensor& gy, const Shape& xs, const PoolParams& p, bool include_pad,
                    bool adaptive, bool channels_last) {
  check_input(op, gy, "gradient");
  TC_CHECK(gy.size(0) == xs[0] && gy.size(1) == xs[1] && gy.size(2) == p.out[0] && gy.size(3) == p.out[1], op,
           "gradient of shape ", shape_str(gy.sizes()), " does not match the output of input ", shape_str(xs));
  Tensor gx = make_layout(xs, gy.dtype(), channels_last, gy.device());
  const int64_t total = gx.numel();
  if (total == 0) return gx;
  const Sizes g = sizes_of(xs, p.out[0], p.out[1], channels_last);
  launch(op, gy.device(), gy.dtype(), [&]<class T>(cudaStream_t stream) {
    with_flag(adaptive, [&]<bool kAdaptive>() {
      avg_pool_backward_kernel<kAdaptive, T><<<blocks_for(total), kThreads, 0, stream>>>(
          data_of<T>(gx), data_of<const T>(gy), strides_of(gy), g, p, include_pad, total);
    });
  });
  return gx;
}

}  // namespace

std::pair<Tensor, Tensor> max_pool2d_forward(const Tensor& x, const PoolParams& p, bool channels_last) {
  constexpr const char* op = "max_pool2d";
  check_input(op, x, "input");
  const Shape& xs = x.sizes();
  const Shape os = {xs[0], xs[1], p.out[0], p.out[1]};
  Tensor out = make_layout(os, x.dtype(), channels_last, x.device());
  Tensor indices = make_layout(os, kInt64, channels_last, x.device());
  const int64_t total = out.numel();
  if (total == 0) return {out, indices};
  const Sizes g = sizes_of(xs, p.out[0], p.out[1], channels_last);
  launch(op, x.device(), x.dtype(), [&]<class T>(cudaStream_t stream) {
    max_pool_forward_kernel<T><<<blocks_for(total), kThreads, 0, stream>>>(
        data_of<T>(out), data_of<int64_t>(indices), data_of<const T>(x), strides_of(x), g, p, total);
  });
  return {out, indices};
}

Tensor max_pool2d_backward(const Tensor& gy, const Tensor& indices, const Shape& xs, const PoolParams& p,
                           bool channels_last) {
  constexpr const char* op = "max_pool2d_backward";
  check_input(op, gy, "gradient");
  TC_CHECK(indices.defined() && indices.dtype() == kInt64 && indices.sizes() == gy.sizes() &&
               indices.device() == gy.device(),
           op, "indices must be int64 of the gradient's shape ", shape_str(gy.sizes()), " on its device");
  TC_CHECK(gy.size(0) == xs[0] && gy.size(1) == xs[1] && gy.size(2) == p.out[0] && gy.size(3) == p.out[1], op,
           "gradient of shape ", shape_str(gy.sizes()), " does not match the output of input ", shape_str(xs));
  Tensor gx = make_layout(xs, gy.dtype(), channels_last, gy.device());
  const int64_t total = gx.numel();
  if (total == 0) return gx;
  const Sizes g = sizes_of(xs, p.out[0], p.out[1], channels_last);
  launch(op, gy.device(), gy.dtype(), [&]<class T>(cudaStream_t stream) {
    max_pool_backward_kernel<T>
        <<<blocks_for(total), kThreads, 0, stream>>>(data_of<T>(gx), data_of<const T>(gy), strides_of(gy),
                                                     data_of<const int64_t>(indices), strides_of(indices), g, p, total);
  });
  return gx;
}

Tensor avg_pool2d_forward(const Tensor& x, const PoolParams& p, bool count_include_pad, bool channels_last) {
  return avg_forward("avg_pool2d", x, p, count_include_pad, false, channels_last);
}

Tensor avg_pool2d_backward(const Tensor& gy, const Shape& xs, const PoolParams& p, bool count_include_pad,
                           bool channels_last) {
  return avg_backward("avg_pool2d_backward", gy, xs, p, count_include_pad, false, channels_last);
}

Tensor adaptive_avg_pool2d_forward(const Tensor& x, int64_t out_h, int64_t out_w, bool channels_last) {
  TC_CHECK(out_h > 0 && out_w > 0, "adaptive_avg_pool2d", "output size (", out_h, ", ", out_w, ") must be positive");
  PoolParams p;
  p.out[0] = out_h;
  p.out[1] = out_w;
  return avg_forward("adaptive_avg_pool2d", x, p, false, true, channels_last);
}

Tensor adaptive_avg_pool2d_backward(const Tensor& gy, const Shape& xs, bool channels_last) {
  check_input("adaptive_avg_pool2d_backward", gy, "gradient");
  PoolParams p;
  p.out[0] = gy.size(2);
  p.out[1] = gy.size(3);
  return avg_backward("adaptive_avg_pool2d_backward", gy, xs, p, false, true, channels_last);
}

}  // namespace tc::gpu
