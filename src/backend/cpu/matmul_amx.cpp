// matmul_amx_into: the shapes it takes, b's tiles packed by all threads, then c's rows
// split between them.
#include "backend/cpu/matmul_amx.h"

#include <algorithm>
#include <atomic>
#include <vector>

#include "backend/cpu/matmul_amx_kernels.h"
#include "core/tensor_impl.h"
#include "tensorcast/convert.h"
#include "tensorcast/half.h"
#include "tensorcast/parallel.h"

namespace tc::cpu {
namespace {

std::atomic<bool> amx_allowed{true};

constexpr int64_t kBlock = 32;     // rows and columns of c per block of four tiles
constexpr int64_t kMinRows = 256;  // fewer: packing b costs what the kernel saves

bool unit_cols(const Tensor& t, DType dt, int64_t rows, int64_t cols) {
  return t.dim() == 2 && t.dtype() == dt && t.size(0) == rows && t.size(1) == cols && t.stride(1) == 1;
}

template <class T>
T* buffer(std::vector<T>& v, int64_t elems, int64_t align_elems) {  // aligned to align_elems
  if (v.size() < static_cast<size_t>(elems + align_elems)) v.resize(static_cast<size_t>(elems + align_elems));
  const uintptr_t at = reinterpret_cast<uintptr_t>(v.data()), a = align_elems * sizeof(T);
  return reinterpret_cast<T*>((at + a - 1) / a * a);
}

}  // namespace

void set_matmul_amx(bool allowed) { amx_allowed.store(allowed, std::memory_order_relaxed); }

bool matmul_amx_into(const Tensor& a, const Tensor& b, const Tensor& bias, const Tensor& c, const Tensor& mul) {
  if (!amx_allowed.load(std::memory_order_relaxed) || !cpu_features().amx_bf16) return false;
  if (a.dim() != 2 || b.dim() != 2 || c.dim() != 2) return false;
  const int64_t M = a.size(0), K = a.size(1), N = b.size(1);
  if (M < kMinRows || M % kBlock != 0 || K % kBlock != 0 || N % kBlock != 0 || b.size(0) != K) return false;
  const bool transposed = b.stride(0) == 1 && b.stride(1) != 1;
  if (!unit_cols(a, kBFloat16, M, K) || b.dtype() != kBFloat16 || !(transposed || b.stride(1) == 1)) return false;
  const DType dt = c.dtype();
  if ((dt != kBFloat16 && dt != kFloat32) || !unit_cols(c, dt, M, N)) return false;
  if (mul.defined() && !unit_cols(mul, dt, M, N)) return false;
  if (bias.defined() && (bias.dim() != 1 || bias.dtype() != kBFloat16 || bias.numel() != N)) return false;

  thread_local std::vector<uint32_t> tiles_buf;  // the caller's: every thread reads them
  thread_local std::vector<float> bias_buf;
  uint32_t* tiles = buffer(tiles_buf, N * K / 2, 16);
  const float* bias_f = nullptr;
  if (bias.defined()) {
    float* f = buffer(bias_buf, N, 1);
    const auto* bits = static_cast<const uint16_t*>(bias.raw_data());
    for (int64_t j = 0; j < N; ++j) f[j] = tc::detail::bf16_bits_to_float(bits[j * bias.stride(0)]);  // exact
    bias_f = f;
  }
  const auto* bp = static_cast<const uint16_t*>(b.raw_data());
  const int64_t ldb = transposed ? b.stride(1) : b.stride(0);
  parallel_for(0, N / 16, 4, [&](int64_t j0, int64_t j1) {
    detail::pack_b_tiles(bp, ldb, transposed, K, j0 * 16, j1 * 16, tiles);
  });
  const int64_t blocks = M / kBlock, parts = std::min<int64_t>(std::max(1, get_num_threads()), blocks);
  const auto* ap = static_cast<const uint16_t*>(a.raw_data());
  parallel_for(0, parts, 1, [&](int64_t p0, int64_t p1) {
    thread_local std::vector<float> acc_buf;
    float* acc = buffer(acc_buf, 2 * kBlock * kBlock, 16);
    for (int64_t p = p0; p < p1; ++p)
      detail::matmul_amx_rows({ap, a.stride(0), tiles, K, N, blocks * p / parts * kBlock,
                               blocks * (p + 1) / parts * kBlock, bias_f, mul.defined() ? mul.raw_data() : nullptr,
                               mul.defined() ? mul.stride(0) : 0, c.raw_data(), c.stride(0), dt == kBFloat16, acc});
  });
  return true;
}

}  // namespace tc::cpu
