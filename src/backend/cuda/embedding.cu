// embedding on CUDA tensors (embedding.h): the index copy with its range check, the row
// gather, and a deterministic backward. The backward sorts (index, position) pairs with
// CUB's radix sort (stable: equal indices keep their positions in order), then one block
// per run of equal indices sums that run's gradient rows in position order, accumulating in
// float32 (float64 for float64) and rounding once: the CPU's order and arithmetic, so a
// float32 table matches the CPU bit for bit, and no float atomics.
//
// The range check does not synchronise (deferred_error.cuh): a kernel that meets a bad
// index records it and treats the row as absent (a zero row forward, skipped backward), and
// the next CUDA embedding call on that device (forward or backward, usually this call's own
// backward) raises the CPU's error from the record.
#include <climits>
#include <cub/device/device_radix_sort.cuh>

#include "backend/cuda/convert.cuh"
#include "backend/cuda/copy.h"
#include "backend/cuda/deferred_error.cuh"
#include "backend/cuda/embedding.h"
#include "backend/cuda/launch.h"
#include "backend/cuda/row_reduce.cuh"
#include "backend/cuda/rows.cuh"

namespace tc::gpu {
namespace {

// Raises the error an earlier embedding kernel on `device` recorded, if any.
void raise_recorded(Device device) {
  if (const auto e = take_deferred_error(device, DeferredSlot::kEmbedding)) [[unlikely]]
    TC_FAIL("embedding", "index ", e->value, " is out of range for ", e->bound, " rows (found on ", device,
            " by an earlier call's kernel)");
}

// ids[i] = indices[i] (row-major order through g: the indices' byte offsets), or -1 with
// the index recorded when it is out of [0, rows).
template <class I>
__global__ void indices_kernel(int64_t* ids, const char* indices, int64_t n, Geometry<1> g, int64_t rows,
                               DeferredError* bad) {
  for (int64_t i = global_index(); i < n; i += grid_stride()) {
    int64_t off[1];
    g.offsets(i, off);
    const int64_t v = static_cast<int64_t>(*reinterpret_cast<const I*>(indices + off[0]));
    if (v < 0 || v >= rows) [[unlikely]] {
      record_deferred_error(bad, v, rows, 0);
      ids[i] = -1;
    } else {
      ids[i] = v;
    }
  }
}

// out[k, d] = weight[ids[k], d] (zero for a marked index), both contiguous.
template <class T>
__global__ void gather_kernel(T* out, const T* weight, const int64_t* ids, int64_t n, int64_t D) {
  for (int64_t i = global_index(); i < n; i += grid_stride()) {
    const int64_t k = i / D, d = i - k * D;
    const int64_t id = ids[k];
    out[i] = id >= 0 ? weight[id * D + d] : T{};
  }
}

// The sort's input: keys (the index, or `rows` for a marked one, sorted last and skipped)
// and values (positions 0..K-1).
__global__ void sort_input_kernel(uint64_t* keys, int64_t* pos, const int64_t* ids, int64_t K, int64_t rows) {
  for (int64_t i = global_index(); i < K; i += grid_stride()) {
    const int64_t id = ids[i];
    keys[i] = static_cast<uint64_t>(id >= 0 ? id : rows);
    pos[i] = i;
  }
}

// One block per run of equal keys in the sorted order: the block at a run's first element
// sums the gradient rows of the run, in position order, into the run's row of grad_weight
// (which is zero elsewhere). Blocks at other elements do nothing.
template <class C>
__global__ void run_sum_kernel(char* gw, DType wdt, int64_t wes, const char* g, DType gdt, int64_t ges,
                               const uint64_t* keys, const int64_t* pos, int64_t K, int64_t D, uint64_t rows) {
  for (int64_t s = blockIdx.x; s < K; s += gridDim.x) {
    const uint64_t key = keys[s];
    if (key >= rows || (s > 0 && keys[s - 1] == key)) continue;  // uniform across the block
    int64_t end = s + 1;
    while (end < K && keys[end] == key) ++end;
    for (int64_t d = threadIdx.x; d < D; d += blockDim.x) {
      C acc = 0;
      for (int64_t j = s; j < end; ++j) acc += load_as<C>(g + (pos[j] * D + d) * ges, gdt);
      store_from<C>(gw + (static_cast<int64_t>(key) * D + d) * wes, wdt, acc);
    }
  }
}

int key_bits(int64_t rows) {  // bits that hold 0..rows (rows: the marker)
  int bits = 1;
  while (bits < 63 && (int64_t{1} << bits) <= rows) ++bits;
  return bits;
}

}  // namespace

void embedding_indices(const Tensor& ids, const Tensor& indices, int64_t rows) {
  constexpr const char* op = "embedding";
  TC_CHECK(ids.device() == indices.device() && ids.device().is_cuda() && ids.is_contiguous() && ids.dtype() == kInt64 &&
               ids.sizes() == indices.sizes(),
           op, "expected contiguous int64 ids of the indices' shape on their CUDA device");
  TC_CHECK(indices.dtype() == kInt64 || indices.dtype() == kInt32, op, "expected int64 or int32 indices, got ",
           dtype_name(indices.dtype()));
  raise_recorded(indices.device());
  const int64_t n = indices.numel();
  if (n == 0) return;
  Shape strides = indices.strides();
  for (int64_t& s : strides) s *= static_cast<int64_t>(element_size(indices.dtype()));
  const Geometry<1> g = make_geometry<1>(indices.sizes(), {strides}, op);
  DeferredError* bad = deferred_error_record(indices.device(), DeferredSlot::kEmbedding);
  DeviceGuard guard(indices.device());
  const cudaStream_t stream = current_raw_stream(indices.device());
  const char* src = static_cast<const char*>(indices.raw_data());
  int64_t* dst = static_cast<int64_t*>(ids.raw_data());
  if (indices.dtype() == kInt64)
    indices_kernel<int64_t><<<blocks_for(n), kThreads, 0, stream>>>(dst, src, n, g, rows, bad);
  else
    indices_kernel<int32_t><<<blocks_for(n), kThreads, 0, stream>>>(dst, src, n, g, rows, bad);
  TC_CUDA_CHECK(cudaGetLastError(), op);
}

void embedding_gather(const Tensor& out, const Tensor& weight, const Tensor& ids) {
  constexpr const char* op = "embedding";
  TC_CHECK(out.device() == weight.device() && ids.device() == weight.device() && weight.device().is_cuda(), op,
           "expected every tensor on one CUDA device");
  TC_CHECK(out.is_contiguous() && weight.is_contiguous() && ids.is_contiguous() && out.dtype() == weight.dtype(), op,
           "expected contiguous tensors and the weight's dtype");
  const int64_t K = ids.numel(), D = weight.size(1), n = K * D;
  if (n == 0) return;
  DeviceGuard guard(weight.device());
  const cudaStream_t stream = current_raw_stream(weight.device());
  const int64_t* idp = static_cast<const int64_t*>(ids.raw_data());
  dispatch_dtype(weight.dtype(), [&]<class T>() {
    gather_kernel<T><<<blocks_for(n), kThreads, 0, stream>>>(static_cast<T*>(out.raw_data()),
                                                             static_cast<const T*>(weight.raw_data()), idp, n, D);
  });
  TC_CUDA_CHECK(cudaGetLastError(), op);
}

void embedding_scatter_add(const Tensor& grad_weight, const Tensor& g, const Tensor& ids) {
  constexpr const char* op = "embedding_backward";
  const Device device = grad_weight.device();
  TC_CHECK(device.is_cuda() && g.device() == device && ids.device() == device, op,
           "expected every tensor on one CUDA device, got grad_weight on ", device, ", g on ", g.device(),
           " and ids on ", ids.device());
  TC_CHECK(grad_weight.is_contiguous() && g.is_contiguous() && ids.is_contiguous() && grad_weight.dim() == 2, op,
           "expected a contiguous (V, D) grad_weight and contiguous g and ids");
  raise_recorded(device);
  const int64_t V = grad_weight.size(0), D = grad_weight.size(1), K = ids.numel();
  TC_CHECK(g.numel() == K * D, op, "expected ", K, " gradient rows of ", D, ", got shape ", shape_str(g.sizes()));
  fill(grad_weight, 0.0);  // rows no index names stay zero
  if (K == 0 || D == 0) return;
  TC_CHECK(K <= INT_MAX, op, "at most ", INT_MAX, " indices, got ", K);
  const int n = static_cast<int>(K);
  DeviceGuard guard(device);
  const cudaStream_t stream = current_raw_stream(device);

  // Sort buffers and CUB's scratch space from the device allocator (stream-ordered: freed
  // after the kernels queued here).
  const Tensor keys = make_tensor({2, K}, kInt64, device), vals = make_tensor({2, K}, kInt64, device);
  uint64_t* keys_in = static_cast<uint64_t*>(keys.raw_data());
  uint64_t* keys_out = keys_in + K;
  int64_t* pos_in = static_cast<int64_t*>(vals.raw_data());
  int64_t* pos_out = pos_in + K;
  sort_input_kernel<<<blocks_for(K), kThreads, 0, stream>>>(keys_in, pos_in,
                                                            static_cast<const int64_t*>(ids.raw_data()), K, V);
  TC_CUDA_CHECK(cudaGetLastError(), op);
  const int bits = key_bits(V);
  size_t scratch_bytes = 0;
  TC_CUDA_CHECK(
      cub::DeviceRadixSort::SortPairs(nullptr, scratch_bytes, keys_in, keys_out, pos_in, pos_out, n, 0, bits, stream),
      op);
  const Tensor scratch = make_tensor({static_cast<int64_t>(std::max<size_t>(scratch_bytes, 1))}, kUInt8, device);
  TC_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(scratch.raw_data(), scratch_bytes, keys_in, keys_out, pos_in, pos_out,
                                                n, 0, bits, stream),
                op);

  with_compute_type(grad_weight.dtype(), [&]<class C>() {
    run_sum_kernel<C><<<row_blocks(K), row_threads(D), 0, stream>>>(
        static_cast<char*>(grad_weight.raw_data()), grad_weight.dtype(),
        static_cast<int64_t>(element_size(grad_weight.dtype())), static_cast<const char*>(g.raw_data()), g.dtype(),
        static_cast<int64_t>(element_size(g.dtype())), keys_out, pos_out, K, D, static_cast<uint64_t>(V));
  });
  TC_CUDA_CHECK(cudaGetLastError(), op);
}

}  // namespace tc::gpu
