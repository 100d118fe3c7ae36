// softmax / log_softmax on CUDA tensors (softmax.h). A row is the elements along `dim`;
// the other dims index the rows (a coalesced Geometry over each tensor's byte strides), so
// any layout runs without a copy. One block per row: the max, the sum of exp(x - max), and
// the write, each a strided pass over the row with a block-wide reduction between.
#include <cmath>

#include "backend/cuda/convert.cuh"
#include "backend/cuda/launch.h"
#include "backend/cuda/row_reduce.cuh"
#include "backend/cuda/rows.cuh"
#include "backend/cuda/softmax.h"

namespace tc::gpu {
namespace {

// Rows<2>: y, x.
template <class C>
__global__ void softmax_forward_kernel(Rows<2> r, bool log) {
  __shared__ C scratch[32];
  for (int64_t row = blockIdx.x; row < r.count; row += gridDim.x) {
    int64_t base[2];
    r.rows.offsets(row, base);
    const char* x = r.ptr[1] + base[1];
    char* y = r.ptr[0] + base[0];
    C m = -INFINITY;
    for (int64_t i = threadIdx.x; i < r.length; i += blockDim.x)
      m = MaxOp{}(m, load_as<C>(x + i * r.step[1], r.dtype[1]));
    m = block_reduce(m, MaxOp{}, scratch);
    C s = 0;
    for (int64_t i = threadIdx.x; i < r.length; i += blockDim.x)
      s += exp(load_as<C>(x + i * r.step[1], r.dtype[1]) - m);
    s = block_reduce(s, SumOp{}, scratch);
    const C log_s = ::log(s);
    for (int64_t i = threadIdx.x; i < r.length; i += blockDim.x) {
      const C shifted = load_as<C>(x + i * r.step[1], r.dtype[1]) - m;
      store_from<C>(y + i * r.step[0], r.dtype[0], log ? shifted - log_s : exp(shifted) / s);
    }
  }
}

// Rows<3>: gx, g, y.
template <class C>
__global__ void softmax_backward_kernel(Rows<3> r, bool log) {
  __shared__ C scratch[32];
  for (int64_t row = blockIdx.x; row < r.count; row += gridDim.x) {
    int64_t base[3];
    r.rows.offsets(row, base);
    char* gx = r.ptr[0] + base[0];
    const char* g = r.ptr[1] + base[1];
    const char* y = r.ptr[2] + base[2];
    C s = 0;  // log_softmax: sum(g); softmax: sum(g * y)
    for (int64_t i = threadIdx.x; i < r.length; i += blockDim.x) {
      const C gi = load_as<C>(g + i * r.step[1], r.dtype[1]);
      s += log ? gi : gi * load_as<C>(y + i * r.step[2], r.dtype[2]);
    }
    s = block_reduce(s, SumOp{}, scratch);
    for (int64_t i = threadIdx.x; i < r.length; i += blockDim.x) {
      const C gi = load_as<C>(g + i * r.step[1], r.dtype[1]), yi = load_as<C>(y + i * r.step[2], r.dtype[2]);
      store_from<C>(gx + i * r.step[0], r.dtype[0], log ? gi - exp(yi) * s : yi * (gi - s));
    }
  }
}

// One block per row of the contiguous scores: query i = row % L sees keys [0, m).
__global__ void sdpa_probs_kernel(char* p, DType p_dtype, int64_t p_es, const float* s, int64_t rows, int64_t L,
                                  int64_t S, float scale, bool causal) {
  __shared__ float scratch[32];
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const int64_t i = row % L, m = causal && i + 1 < S ? i + 1 : S;
    const float* x = s + row * S;
    char* y = p + row * S * p_es;
    float mx = -INFINITY;
    for (int64_t j = threadIdx.x; j < m; j += blockDim.x) mx = MaxOp{}(mx, x[j] * scale);
    mx = block_reduce(mx, MaxOp{}, scratch);
    float sum = 0;
    for (int64_t j = threadIdx.x; j < m; j += blockDim.x) sum += exp(x[j] * scale - mx);
    sum = block_reduce(sum, SumOp{}, scratch);
    for (int64_t j = threadIdx.x; j < S; j += blockDim.x)
      store_from<float>(y + j * p_es, p_dtype, j < m ? exp(x[j] * scale - mx) / sum : 0.0f);
  }
}

__global__ void sdpa_probs_backward_kernel(char* ds, DType ds_dtype, int64_t ds_es, const float* dp, const float* p,
                                           int64_t rows, int64_t S, float scale) {
  __shared__ float scratch[32];
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const float* g = dp + row * S;
    const float* y = p + row * S;
    float sum = 0;
    for (int64_t j = threadIdx.x; j < S; j += blockDim.x) sum += g[j] * y[j];
    sum = block_reduce(sum, SumOp{}, scratch);
    for (int64_t j = threadIdx.x; j < S; j += blockDim.x)
      store_from<float>(ds + (row * S + j) * ds_es, ds_dtype, scale * (y[j] * (g[j] - sum)));
  }
}

}  // namespace

void sdpa_probs(const Tensor& p, const Tensor& s, double scale, bool causal) {
  constexpr const char* kOp = "scaled_dot_product_attention";
  TC_CHECK(s.dtype() == kFloat32 && s.is_contiguous() && p.is_contiguous() && p.sizes() == s.sizes() &&
               p.device() == s.device() && s.dim() >= 2,
           kOp, "sdpa_probs expects contiguous float32 scores and probabilities of their shape on one device");
  const int64_t S = s.size(-1), L = s.size(-2);
  if (s.numel() == 0) return;
  const int64_t rows = s.numel() / S;
  DeviceGuard guard(s.device());
  sdpa_probs_kernel<<<row_blocks(rows), row_threads(S), 0, current_raw_stream(s.device())>>>(
      static_cast<char*>(p.raw_data()), p.dtype(), static_cast<int64_t>(element_size(p.dtype())),
      static_cast<const float*>(s.raw_data()), rows, L, S, static_cast<float>(scale), causal);
  TC_CUDA_CHECK(cudaGetLastError(), kOp);
}

void sdpa_probs_backward(const Tensor& ds, const Tensor& dp, const Tensor& p, double scale) {
  constexpr const char* kOp = "scaled_dot_product_attention_backward";
  TC_CHECK(p.dtype() == kFloat32 && dp.dtype() == kFloat32 && p.is_contiguous() && dp.is_contiguous() &&
               ds.is_contiguous() && dp.sizes() == p.sizes() && ds.sizes() == p.sizes() && p.dim() >= 1,
           kOp,
           "sdpa_probs_backward expects contiguous float32 probabilities and their gradient, and ds of their shape");
  if (p.numel() == 0) return;
  const int64_t S = p.size(-1), rows = p.numel() / S;
  DeviceGuard guard(p.device());
  sdpa_probs_backward_kernel<<<row_blocks(rows), row_threads(S), 0, current_raw_stream(p.device())>>>(
      static_cast<char*>(ds.raw_data()), ds.dtype(), static_cast<int64_t>(element_size(ds.dtype())),
      static_cast<const float*>(dp.raw_data()), static_cast<const float*>(p.raw_data()), rows, S,
      static_cast<float>(scale));
  TC_CUDA_CHECK(cudaGetLastError(), kOp);
}

void softmax_forward(const Tensor& y, const Tensor& x, int64_t dim, bool log) {
  const char* op = log ? "log_softmax" : "softmax";
  if (x.numel() == 0) return;
  const Rows<2> r = make_rows<2>({&y, &x}, dim, op);
  DeviceGuard guard(x.device());
  const cudaStream_t stream = current_raw_stream(x.device());
  const int threads = row_threads(r.length);
  with_compute_type(x.dtype(),
                    [&]<class C>() { softmax_forward_kernel<C><<<row_blocks(r.count), threads, 0, stream>>>(r, log); });
  TC_CUDA_CHECK(cudaGetLastError(), op);
}

void softmax_backward(const Tensor& gx, const Tensor& g, const Tensor& y, int64_t dim, bool log) {
  const char* op = log ? "log_softmax_backward" : "softmax_backward";
  if (y.numel() == 0) return;
  const Rows<3> r = make_rows<3>({&gx, &g, &y}, dim, op);
  DeviceGuard guard(y.device());
  const cudaStream_t stream = current_raw_stream(y.device());
  const int threads = row_threads(r.length);
  with_compute_type(
      y.dtype(), [&]<class C>() { softmax_backward_kernel<C><<<row_blocks(r.count), threads, 0, stream>>>(r, log); });
  TC_CUDA_CHECK(cudaGetLastError(), op);
}

}  // namespace tc::gpu
