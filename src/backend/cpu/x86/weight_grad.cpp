// weight_grad_into: the shapes it takes, the split of the work, and the per-thread scratch
// of the AMX kernel's packed tiles.
#include "backend/cpu/x86/weight_grad.h"

#include <algorithm>
#include <atomic>
#include <vector>

#include "backend/cpu/x86/weight_grad_kernels.h"
#include "core/tensor_impl.h"
#include "tensorcast/convert.h"
#include "tensorcast/parallel.h"

namespace tc::cpu {
namespace {

std::atomic<bool> amx_allowed{true};

constexpr int64_t kBlock = 32;    // rows and columns of c per block of four tiles
constexpr int64_t kMinSum = 512;  // shorter sums: oneDNN's rate is fine
// Outputs of c the kernel takes in one call: a larger part (1 MiB of float32) would leave
// L2 between the blocks of the sum. A larger c is taken in parts of at most this many.
constexpr int64_t kMaxOutputs = int64_t{1} << 18;

// Whether the kernel takes a (m, k) times b (k, n), m and n its sides, by their layouts and
// shapes (c's checked apart).
bool takes(const Tensor& a, const Tensor& b) {
  if (!amx_allowed.load(std::memory_order_relaxed) || !cpu_features().amx_bf16) return false;
  if (a.dim() != 2 || b.dim() != 2 || a.dtype() != kBFloat16 || b.dtype() != kBFloat16) return false;
  if (a.stride(0) != 1 || b.stride(1) != 1 || a.size(1) != b.size(0)) return false;
  const int64_t M = a.size(0), N = b.size(1), K = a.size(1);
  return M % kBlock == 0 && N % kBlock == 0 && K >= kMinSum;
}

uint16_t* scratch(int64_t elems) {  // this thread's packed tiles (no allocation once warm; the kernel aligns)
  thread_local std::vector<uint16_t> buf;
  if (buf.size() < static_cast<size_t>(elems)) buf.resize(static_cast<size_t>(elems));
  return buf.data();
}

}  // namespace

void set_weight_grad_amx(bool allowed) { amx_allowed.store(allowed, std::memory_order_relaxed); }

bool weight_grad_into(const Tensor& a, const Tensor& b, const Tensor& c, const Tensor& col_sums) {
  if (!takes(a, b)) return false;
  const int64_t M = a.size(0), N = b.size(1), K = a.size(1);
  if (c.dim() != 2 || c.dtype() != kFloat32 || c.size(0) != M || c.size(1) != N || c.stride(1) != 1) return false;
  if (col_sums.defined() && (col_sums.dtype() != kFloat32 || col_sums.numel() != M || !col_sums.is_contiguous()))
    return false;
  const auto* g = static_cast<const uint16_t*>(a.raw_data());
  const auto* x = static_cast<const uint16_t*>(b.raw_data());
  auto* cp = static_cast<float*>(c.raw_data());
  auto* sp = col_sums.defined() ? static_cast<float*>(col_sums.raw_data()) : nullptr;
  const auto part = [&](int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
    // the column sums: by the part with the first columns
    float* sums = sp != nullptr && n0 == 0 ? sp + m0 : nullptr;
    detail::weight_grad_amx({g, a.stride(1), x, b.stride(0), cp + m0 * c.stride(0) + n0, c.stride(0), 0, K, m0, m1, n0,
                             n1, sums, scratch(detail::weight_grad_scratch(m1 - m0, n1 - n0, K))});
  };
  const int64_t threads = std::max(1, get_num_threads());
  if (M * N > kMaxOutputs) {
    // Parts of c of at most kMaxOutputs (up to 512 columns, as many rows as fit), halved
    // down to 128 rows until each thread has three, handed out as tasks; each part packs
    // its rows' and columns' tiles of the whole sum. This beats oneDNN (which copies g^T
    // first) on these shapes but for 512 x 2048, which still loses a little in quiet
    // minutes and is kept here because it wins when a core is slowed (docs/performance.md).
    // 512 columns is the width that paid: narrower parts repack too much, wider ones no
    // better.
    const int64_t cols = std::min<int64_t>(N, 512);
    int64_t rows = std::min(M, kMaxOutputs / cols / kBlock * kBlock);
    const auto parts = [&] { return (M + rows - 1) / rows * ((N + cols - 1) / cols); };
    while (parts() < 3 * threads && rows > 128) rows = rows / 2 / kBlock * kBlock;
    const int64_t row_parts = (M + rows - 1) / rows;
    parallel_tasks(parts(), [&](int64_t t) {
      const int64_t m0 = t % row_parts * rows, n0 = t / row_parts * cols;
      part(m0, std::min(M, m0 + rows), n0, std::min(N, n0 + cols));
    });
    return true;
  }
  // The threads split c's longer side: each packs its part of that operand's tiles and all
  // of the other's, so the split costs the shorter side's packing once per thread.
  const bool by_rows = M >= N;
  const int64_t blocks = (by_rows ? M : N) / kBlock, parts = std::min(threads, blocks);
  parallel_for(0, parts, 1, [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      const int64_t first = blocks * p / parts * kBlock, end = blocks * (p + 1) / parts * kBlock;
      if (by_rows)
        part(first, end, 0, N);
      else
        part(0, M, first, end);
    }
  });
  return true;
}

std::pair<Tensor, Tensor> weight_and_bias_grads(const Tensor& a, const Tensor& b) {
  if (!takes(a, b)) return {};
  const Tensor c = make_tensor({a.size(0), b.size(1)}, kFloat32), sums = make_tensor({a.size(0)}, kFloat32);
  weight_grad_into(a, b, c, sums);
  return {c, sums};
}

}  // namespace tc::cpu
