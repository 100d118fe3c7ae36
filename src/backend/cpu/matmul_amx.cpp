// matmul_amx_into: the shapes it takes, b's tiles packed by all threads, then c's blocks
// handed out to them.
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

constexpr int64_t kBlock = 32;  // rows and columns of c per block of four tiles
// Packing b costs its n k elements per product, so the kernel takes products with enough
// rows to pay for it: gpt's 2048 tokens, whose short sums (256 terms) run ~1.05-1.1x
// oneDNN's rate on 2 threads, and 1024 where the sums are long (oneDNN 2.6 slows from
// 1024 terms: d=512's 2048-term products 1.1-1.3x); 1024 rows of 512-term sums lose
// (0.87-0.96x), 512 and fewer lose to the packing.
constexpr int64_t kMinRows = 1024, kShortSumRows = 2048, kLongSum = 1024;
// Rows per task: small enough that threads running at uneven rates (the AMX unit may be
// shared with another tenant) finish together, large enough that each task's last
// epilogue, not overlapped with products, stays a few percent.
constexpr int64_t kRowGroup = 128;

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
  if (M < kMinRows || (M < kShortSumRows && K < kLongSum) || M % kBlock != 0 || K % kBlock != 0 || N % kBlock != 0 ||
      b.size(0) != K)
    return false;
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
  parallel_for(0, N / 16, 4,
               [&](int64_t j0, int64_t j1) { detail::pack_b_tiles(bp, ldb, transposed, K, j0 * 16, j1 * 16, tiles); });
  // Tasks: passes over the columns (b's tiles for each stay in L2), each split in groups of
  // rows, handed out in that order so that the threads share a pass's tiles.
  const int64_t width = detail::matmul_amx_pass(N, K), passes = (N + width - 1) / width;
  const int64_t groups = (M + kRowGroup - 1) / kRowGroup;
  const auto* ap = static_cast<const uint16_t*>(a.raw_data());
  parallel_tasks(passes * groups, [&](int64_t task) {
    thread_local std::vector<float> acc_buf;
    float* acc = buffer(acc_buf, 2 * kBlock * kBlock, 16);
    const int64_t n0 = task / groups * width, m0 = task % groups * kRowGroup;
    detail::matmul_amx_rows({ap, a.stride(0), tiles, K, m0, std::min(M, m0 + kRowGroup), n0, std::min(N, n0 + width),
                             bias_f, mul.defined() ? mul.raw_data() : nullptr, mul.defined() ? mul.stride(0) : 0,
                             c.raw_data(), c.stride(0), dt == kBFloat16, acc});
  });
  return true;
}

}  // namespace tc::cpu
