// Direct-loop convolution (float64) and pooling (float / double), see conv_direct.h.
#include "backend/cpu/loops/conv_direct.h"

#include <cmath>
#include <cstring>
#include <limits>

#include "backend/cpu/loops/elementwise.h"
#include "core/tensor_impl.h"
#include "tensorcast/parallel.h"

namespace tc::cpu {

namespace {

// Zero-filled contiguous tensor without going through the op layer.
Tensor zeroed(const Shape& sizes, DType dt) {
  Tensor t = make_tensor(sizes, dt);
  fill_zero(t);
  return t;
}

template <class F>
void for_planes(int64_t n, F f) {
  parallel_for(0, n, 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) f(i);
  });
}

template <class F>
decltype(auto) dispatch_fd(DType dt, const char* op, F f) {
  if (dt == kFloat64) return f(double{});
  TC_CHECK(dt == kFloat32, op, "direct kernel expects float32 or float64, got ", dtype_name(dt));
  return f(float{});
}

}  // namespace

// ------------------------------------------------------------------ convolution (float64)

Tensor direct_conv2d_forward(const Tensor& xin, const Tensor& win, const Tensor& bin, const ConvParams& p) {
  const Tensor x = as_contiguous(xin), w = as_contiguous(win), b = bin.defined() ? as_contiguous(bin) : bin;
  const int64_t N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3);
  const int64_t O = w.size(0), CG = w.size(1), KH = w.size(2), KW = w.size(3);
  const int64_t OG = O / p.groups;
  const int64_t OH = conv_out_size(H, KH, p.stride[0], p.padding[0], p.dilation[0]);
  const int64_t OW = conv_out_size(W, KW, p.stride[1], p.padding[1], p.dilation[1]);
  Tensor y = make_tensor({N, O, OH, OW}, kFloat64);
  const double *xp = x.data_ptr<double>(), *wp = w.data_ptr<double>();
  const double* bp = b.defined() ? b.data_ptr<double>() : nullptr;
  double* yp = y.data_ptr<double>();
  for_planes(N * O, [&](int64_t no) {
    const int64_t n = no / O, o = no % O, g = o / OG;
    for (int64_t oh = 0; oh < OH; ++oh)
      for (int64_t ow = 0; ow < OW; ++ow) {
        double acc = bp ? bp[o] : 0.0;
        for (int64_t ci = 0; ci < CG; ++ci) {
          const int64_t c = g * CG + ci;
          for (int64_t kh = 0; kh < KH; ++kh) {
            const int64_t ih = oh * p.stride[0] - p.padding[0] + kh * p.dilation[0];
            if (ih < 0 || ih >= H) continue;
            for (int64_t kw = 0; kw < KW; ++kw) {
              const int64_t iw = ow * p.stride[1] - p.padding[1] + kw * p.dilation[1];
              if (iw < 0 || iw >= W) continue;
              acc += xp[((n * C + c) * H + ih) * W + iw] * wp[((o * CG + ci) * KH + kh) * KW + kw];
            }
          }
        }
        yp[(no * OH + oh) * OW + ow] = acc;
      }
  });
  return y;
}

Tensor direct_conv2d_backward_data(const Tensor& gyin, const Tensor& win, const Shape& xs, const ConvParams& p) {
  const Tensor gy = as_contiguous(gyin), w = as_contiguous(win);
  const int64_t N = xs[0], C = xs[1], H = xs[2], W = xs[3];
  const int64_t O = w.size(0), CG = w.size(1), KH = w.size(2), KW = w.size(3);
  const int64_t OG = O / p.groups, OH = gy.size(2), OW = gy.size(3);
  Tensor gx = zeroed(xs, kFloat64);
  const double *gp = gy.data_ptr<double>(), *wp = w.data_ptr<double>();
  double* xp = gx.data_ptr<double>();
  for_planes(N, [&](int64_t n) {  // each image's gradient is written by one thread
    for (int64_t o = 0; o < O; ++o) {
      const int64_t g = o / OG;
      for (int64_t oh = 0; oh < OH; ++oh)
        for (int64_t ow = 0; ow < OW; ++ow) {
          const double go = gp[((n * O + o) * OH + oh) * OW + ow];
          for (int64_t ci = 0; ci < CG; ++ci)
            for (int64_t kh = 0; kh < KH; ++kh) {
              const int64_t ih = oh * p.stride[0] - p.padding[0] + kh * p.dilation[0];
              if (ih < 0 || ih >= H) continue;
              for (int64_t kw = 0; kw < KW; ++kw) {
                const int64_t iw = ow * p.stride[1] - p.padding[1] + kw * p.dilation[1];
                if (iw < 0 || iw >= W) continue;
                xp[((n * C + g * CG + ci) * H + ih) * W + iw] += go * wp[((o * CG + ci) * KH + kh) * KW + kw];
              }
            }
        }
    }
  });
  return gx;
}

std::pair<Tensor, Tensor> direct_conv2d_backward_weights(const Tensor& xin, const Tensor& gyin, const Shape& ws,
                                                         bool with_bias, const ConvParams& p) {
  const Tensor x = as_contiguous(xin), gy = as_contiguous(gyin);
  const int64_t N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3);
  const int64_t O = ws[0], CG = ws[1], KH = ws[2], KW = ws[3];
  const int64_t OG = O / p.groups, OH = gy.size(2), OW = gy.size(3);
  Tensor gw = zeroed(ws, kFloat64);
  Tensor gb = with_bias ? zeroed({O}, kFloat64) : Tensor();
  const double *xp = x.data_ptr<double>(), *gp = gy.data_ptr<double>();
  double* wp = gw.data_ptr<double>();
  double* bp = with_bias ? gb.data_ptr<double>() : nullptr;
  for_planes(O, [&](int64_t o) {  // each output channel's filter is written by one thread
    const int64_t g = o / OG;
    for (int64_t n = 0; n < N; ++n)
      for (int64_t oh = 0; oh < OH; ++oh)
        for (int64_t ow = 0; ow < OW; ++ow) {
          const double go = gp[((n * O + o) * OH + oh) * OW + ow];
          if (bp) bp[o] += go;
          for (int64_t ci = 0; ci < CG; ++ci)
            for (int64_t kh = 0; kh < KH; ++kh) {
              const int64_t ih = oh * p.stride[0] - p.padding[0] + kh * p.dilation[0];
              if (ih < 0 || ih >= H) continue;
              for (int64_t kw = 0; kw < KW; ++kw) {
                const int64_t iw = ow * p.stride[1] - p.padding[1] + kw * p.dilation[1];
                if (iw < 0 || iw >= W) continue;
                wp[((o * CG + ci) * KH + kh) * KW + kw] += go * xp[((n * C + g * CG + ci) * H + ih) * W + iw];
              }
            }
        }
  });
  return {gw, gb};
}

// ------------------------------------------------------------------ pooling (float / double)

std::pair<Tensor, Tensor> direct_max_pool2d(const Tensor& xin, const PoolParams& p) {
  const Tensor x = as_contiguous(xin);
  const int64_t N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3), OH = p.out[0], OW = p.out[1];
  Tensor y = make_tensor({N, C, OH, OW}, x.dtype());
  Tensor idx = make_tensor({N, C, OH, OW}, kInt64);
  dispatch_fd(x.dtype(), "max_pool2d", [&](auto zero) {
    using T = decltype(zero);
    const T* xp = x.data_ptr<T>();
    T* yp = y.data_ptr<T>();
    int64_t* ip = idx.data_ptr<int64_t>();
    for_planes(N * C, [&](int64_t pl) {
      const T* src = xp + pl * H * W;
      for (int64_t oh = 0; oh < OH; ++oh)
        for (int64_t ow = 0; ow < OW; ++ow) {
          T best = -std::numeric_limits<T>::infinity();
          int64_t arg = -1;
          for (int64_t kh = 0; kh < p.kernel[0]; ++kh) {
            const int64_t ih = oh * p.stride[0] - p.padding[0] + kh * p.dilation[0];
            if (ih < 0 || ih >= H) continue;
            for (int64_t kw = 0; kw < p.kernel[1]; ++kw) {
              const int64_t iw = ow * p.stride[1] - p.padding[1] + kw * p.dilation[1];
              if (iw < 0 || iw >= W) continue;
              const T v = src[ih * W + iw];
              if (arg < 0 || v > best || std::isnan(v)) {  // NaN propagates, as in PyTorch
                best = v;
                arg = ih * W + iw;
                if (std::isnan(v)) kh = p.kernel[0], kw = p.kernel[1];
              }
            }
          }
          yp[(pl * OH + oh) * OW + ow] = best;
          ip[(pl * OH + oh) * OW + ow] = arg;
        }
    });
    return 0;
  });
  return {y, idx};
}

Tensor direct_max_pool2d_backward(const Tensor& gyin, const Tensor& indices, const Shape& xs) {
  const Tensor gy = as_contiguous(gyin);
  const int64_t planes = xs[0] * xs[1], HW = xs[2] * xs[3], OHW = gy.size(2) * gy.size(3);
  Tensor gx = zeroed(xs, gy.dtype());
  dispatch_fd(gy.dtype(), "max_pool2d_backward", [&](auto zero) {
    using T = decltype(zero);
    const T* gp = gy.data_ptr<T>();
    const int64_t* ip = indices.data_ptr<int64_t>();
    T* xp = gx.data_ptr<T>();
    for_planes(planes, [&](int64_t pl) {
      for (int64_t j = 0; j < OHW; ++j) {
        const int64_t a = ip[pl * OHW + j];
        if (a >= 0) xp[pl * HW + a] += gp[pl * OHW + j];
      }
    });
    return 0;
  });
  return gx;
}

namespace {

// PyTorch's avg_pool2d window for output index o along one dim: [start, end) inside the
// input, and the length the divisor counts when padding is included.
struct Window {
  int64_t start, end, padded_len;
};
Window avg_window(int64_t o, int64_t in, int64_t k, int64_t s, int64_t pad) {
  int64_t start = o * s - pad;
  int64_t end = std::min(start + k, in + pad);
  const int64_t padded_len = end - start;
  return {std::max<int64_t>(start, 0), std::min(end, in), padded_len};
}

// Visits every (output, window) pair of a plane: f(out_index, h0, h1, w0, w1, divisor).
template <class F>
void avg_windows(int64_t H, int64_t W, const PoolParams& p, bool include_pad, F f) {
  for (int64_t oh = 0; oh < p.out[0]; ++oh) {
    const Window wh = avg_window(oh, H, p.kernel[0], p.stride[0], p.padding[0]);
    for (int64_t ow = 0; ow < p.out[1]; ++ow) {
      const Window ww = avg_window(ow, W, p.kernel[1], p.stride[1], p.padding[1]);
      const int64_t div = include_pad ? wh.padded_len * ww.padded_len : (wh.end - wh.start) * (ww.end - ww.start);
      f(oh * p.out[1] + ow, wh.start, wh.end, ww.start, ww.end, div);
    }
  }
}

template <class F>
void adaptive_windows(int64_t H, int64_t W, int64_t OH, int64_t OW, F f) {
  for (int64_t oh = 0; oh < OH; ++oh) {
    const int64_t h0 = oh * H / OH, h1 = ((oh + 1) * H + OH - 1) / OH;
    for (int64_t ow = 0; ow < OW; ++ow) {
      const int64_t w0 = ow * W / OW, w1 = ((ow + 1) * W + OW - 1) / OW;
      f(oh * OW + ow, h0, h1, w0, w1, (h1 - h0) * (w1 - w0));
    }
  }
}

// Forward and backward of any "average over a window" pooling given its window visitor.
template <class Visit>
Tensor window_mean(const Tensor& xin, int64_t OH, int64_t OW, const char* op, Visit visit) {
  const Tensor x = as_contiguous(xin);
  const int64_t N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3);
  Tensor y = make_tensor({N, C, OH, OW}, x.dtype());
  dispatch_fd(x.dtype(), op, [&](auto zero) {
    using T = decltype(zero);
    const T* xp = x.data_ptr<T>();
    T* yp = y.data_ptr<T>();
    for_planes(N * C, [&](int64_t pl) {
      const T* src = xp + pl * H * W;
      visit(H, W, [&](int64_t j, int64_t h0, int64_t h1, int64_t w0, int64_t w1, int64_t div) {
        T acc = 0;
        for (int64_t h = h0; h < h1; ++h)
          for (int64_t w = w0; w < w1; ++w) acc += src[h * W + w];
        yp[pl * OH * OW + j] = div > 0 ? acc / T(div) : T(0);
      });
    });
    return 0;
  });
  return y;
}

template <class Visit>
Tensor window_mean_backward(const Tensor& gyin, const Shape& xs, const char* op, Visit visit) {
  const Tensor gy = as_contiguous(gyin);
  const int64_t H = xs[2], W = xs[3], OHW = gy.size(2) * gy.size(3);
  Tensor gx = zeroed(xs, gy.dtype());
  dispatch_fd(gy.dtype(), op, [&](auto zero) {
    using T = decltype(zero);
    const T* gp = gy.data_ptr<T>();
    T* xp = gx.data_ptr<T>();
    for_planes(xs[0] * xs[1], [&](int64_t pl) {
      T* dst = xp + pl * H * W;
      visit(H, W, [&](int64_t j, int64_t h0, int64_t h1, int64_t w0, int64_t w1, int64_t div) {
        if (div <= 0) return;
        const T g = gp[pl * OHW + j] / T(div);
        for (int64_t h = h0; h < h1; ++h)
          for (int64_t w = w0; w < w1; ++w) dst[h * W + w] += g;
      });
    });
    return 0;
  });
  return gx;
}

}  // namespace

Tensor direct_avg_pool2d(const Tensor& x, const PoolParams& p, bool include_pad) {
  return window_mean(x, p.out[0], p.out[1], "avg_pool2d",
                     [&](int64_t H, int64_t W, auto f) { avg_windows(H, W, p, include_pad, f); });
}

Tensor direct_avg_pool2d_backward(const Tensor& gy, const Shape& xs, const PoolParams& p, bool include_pad) {
  return window_mean_backward(gy, xs, "avg_pool2d_backward",
                              [&](int64_t H, int64_t W, auto f) { avg_windows(H, W, p, include_pad, f); });
}

Tensor direct_adaptive_avg_pool2d(const Tensor& x, int64_t OH, int64_t OW) {
  return window_mean(x, OH, OW, "adaptive_avg_pool2d",
                     [&](int64_t H, int64_t W, auto f) { adaptive_windows(H, W, OH, OW, f); });
}

Tensor direct_adaptive_avg_pool2d_backward(const Tensor& gy, const Shape& xs) {
  const int64_t OH = gy.size(2), OW = gy.size(3);
  return window_mean_backward(gy, xs, "adaptive_avg_pool2d_backward",
                              [&](int64_t H, int64_t W, auto f) { adaptive_windows(H, W, OH, OW, f); });
}

}  // namespace tc::cpu
