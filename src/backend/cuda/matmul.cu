// The CUDA matrix product on cuBLASLt (matmul.h).
//
// cuBLASLt is column-major. A row-major (n x m) result is the column-major (m x n) matrix
// c^T = b^T a^T, so b is cuBLASLt's A and a its B; a row-major operand is a column-major
// view of its transpose (op N), a transposed view one of itself (op T), and neither needs a
// copy. Batch dims become one strided batch when every operand steps through them with a
// single stride (broadcast dims: stride 0); otherwise the operand is copied to a contiguous
// expanded tensor first. The bias is cuBLASLt's BIAS epilogue, added in the float32
// accumulators before the one rounding. An algorithm is chosen once per geometry (the
// heuristic query costs more than a small product) and cached.
#include <cublasLt.h>

#include <cstring>
#include <map>
#include <mutex>
#include <tuple>
#include <unordered_map>

#include "backend/cuda/copy.h"
#include "backend/cuda/launch.h"
#include "backend/cuda/matmul.h"

namespace tc::gpu {
namespace {

constexpr size_t kWorkspaceBytes = size_t{32} << 20;  // what cuBLAS asks for on Hopper

[[noreturn]] void throw_cublas(cublasStatus_t st, const char* op, const char* call) {
  TC_FAIL(op, call, " failed: ", cublasLtGetStatusString(st), " (status ", static_cast<int>(st), ")");
}
#define TC_CUBLAS_CHECK(call, op)                                         \
  do {                                                                    \
    const cublasStatus_t tc_st_ = (call);                                 \
    if (tc_st_ != CUBLAS_STATUS_SUCCESS) throw_cublas(tc_st_, op, #call); \
  } while (0)

cudaDataType_t cuda_type(DType t, const char* op) {
  switch (t) {
    case kFloat32:
      return CUDA_R_32F;
    case kFloat16:
      return CUDA_R_16F;
    case kBFloat16:
      return CUDA_R_16BF;
    case kFloat64:
      return CUDA_R_64F;
    default:
      TC_FAIL(op, "no CUDA matrix product for dtype ", dtype_name(t));
  }
}

cublasLtHandle_t handle(Device device) {
  thread_local cublasLtHandle_t handles[64] = {};
  cublasLtHandle_t& h = handles[device.index];
  if (h == nullptr) TC_CUBLAS_CHECK(cublasLtCreate(&h), "matmul");
  return h;
}

// One workspace per (device, stream): two streams running products at once must not share one.
void* workspace(Device device, cudaStream_t stream) {
  static std::mutex mutex;
  static std::map<std::pair<int, cudaStream_t>, void*> spaces;
  std::lock_guard<std::mutex> lock(mutex);
  void*& w = spaces[{device.index, stream}];
  if (w == nullptr) TC_CUDA_CHECK(cudaMalloc(&w, kWorkspaceBytes), "matmul");
  return w;
}

// One operand as cuBLASLt reads it: a column-major rows x cols layout with leading dim ld,
// op T when that layout is the transpose of what the product needs.
struct LtMatrix {
  const void* ptr = nullptr;
  cublasOperation_t op = CUBLAS_OP_N;
  uint64_t rows = 0, cols = 0;
  int64_t ld = 0;
  int64_t batch_stride = 0;
  Tensor keep;  // a copy made for the product, alive until the call is queued
};

// The element strides of t's batch dims broadcast to `batch` as one stride, if they merge.
bool single_batch_stride(const Tensor& t, const Shape& batch, int64_t& stride) {
  const int64_t nb = static_cast<int64_t>(batch.size());
  stride = 0;
  int64_t expected = -1;  // the stride the next (outer) dim must have
  for (int64_t d = nb - 1; d >= 0; --d) {
    if (batch[d] == 1) continue;
    const int64_t s = t.size(d) == 1 ? 0 : t.stride(d);
    if (expected == -1) {
      stride = s;
    } else if (s != expected) {
      return false;
    }
    expected = s * batch[d];
  }
  return true;
}

// x is a row-major logical (r x c) matrix per batch; the product needs x^T column-major.
LtMatrix as_lt(Tensor x, const Shape& batch, const char* op) {
  LtMatrix m;
  const int64_t r = x.size(-2), c = x.size(-1);
  auto layout_ok = [&](const Tensor& t) {
    const int64_t sr = t.stride(-2), sc = t.stride(-1);
    if ((sc == 1 || c == 1) && (r == 1 || sr >= std::max<int64_t>(c, 1))) {
      m.op = CUBLAS_OP_N;
      m.rows = static_cast<uint64_t>(c);
      m.cols = static_cast<uint64_t>(r);
      m.ld = r == 1 ? std::max<int64_t>(c, 1) : sr;
      return true;
    }
    if ((sr == 1 || r == 1) && (c == 1 || sc >= std::max<int64_t>(r, 1))) {
      m.op = CUBLAS_OP_T;
      m.rows = static_cast<uint64_t>(r);
      m.cols = static_cast<uint64_t>(c);
      m.ld = c == 1 ? std::max<int64_t>(r, 1) : sc;
      return true;
    }
    return false;
  };
  if (!layout_ok(x) || !single_batch_stride(x, batch, m.batch_stride)) {
    Shape full = batch;
    full.push_back(r);
    full.push_back(c);
    m.keep = make_tensor(full, x.dtype(), x.device());
    copy_into(m.keep, x);
    x = m.keep;
    layout_ok(x);
    single_batch_stride(x, batch, m.batch_stride);
  }
  m.ptr = x.raw_data();
  return m;
}

struct AlgoKey {
  int device;
  cudaDataType_t in, out;
  cublasOperation_t op_a, op_b;
  uint64_t m, n, k;
  int64_t lda, ldb, ldc, batch, stride_a, stride_b, stride_c;
  bool bias;
  uint32_t align;
  auto tie() const {
    return std::tie(device, in, out, op_a, op_b, m, n, k, lda, ldb, ldc, batch, stride_a, stride_b, stride_c, bias,
                    align);
  }
  bool operator<(const AlgoKey& o) const { return tie() < o.tie(); }
};

std::mutex g_algo_mutex;
std::map<AlgoKey, cublasLtMatmulAlgo_t>& algo_cache() {
  static auto* cache = new std::map<AlgoKey, cublasLtMatmulAlgo_t>;
  return *cache;
}

uint32_t alignment(const void* p) {
  uint32_t a = 16;
  while (a > 1 && reinterpret_cast<uintptr_t>(p) % a != 0) a /= 2;
  return a;
}

// RAII for the cuBLASLt descriptors of one call.
struct Descriptors {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  ~Descriptors() {
    if (pref) cublasLtMatmulPreferenceDestroy(pref);
    if (d) cublasLtMatrixLayoutDestroy(d);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (op) cublasLtMatmulDescDestroy(op);
  }
};

void make_layout(cublasLtMatrixLayout_t& layout, cudaDataType_t type, uint64_t rows, uint64_t cols, int64_t ld,
                 int64_t batch, int64_t batch_stride, const char* op) {
  TC_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&layout, type, rows, cols, ld), op);
  if (batch > 1) {
    const int32_t count = static_cast<int32_t>(batch);
    TC_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof count),
                    op);
    TC_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &batch_stride,
                                                     sizeof batch_stride),
                    op);
  }
}

// c[.., j] += bias[j] where cuBLASLt's bias epilogue does not apply: a float32 c with a
// 16-bit bias (the epilogue wants the output's dtype; c holds the unrounded float32
// product, so this rounds once), and float64 (no epilogues for it in cuBLASLt).
template <class C, class B>
__global__ void add_bias_kernel(C* c, const B* bias, int64_t bias_stride, int64_t rows, int64_t cols, int64_t ld) {
  for (int64_t i = global_index(); i < rows * cols; i += grid_stride()) {
    const int64_t r = i / cols, j = i % cols;
    c[r * ld + j] += static_cast<C>(bias[j * bias_stride]);
  }
}

}  // namespace

void matmul_into(const Tensor& a, const Tensor& b, const Tensor& bias, const Tensor& c, const char* op) {
  const Device device = c.device();
  TC_CHECK(a.device() == device && b.device() == device && (!bias.defined() || bias.device() == device), op,
           "expected every operand on ", device);
  const int64_t nd = c.dim();
  TC_CHECK(nd >= 2 && a.dim() == nd && b.dim() == nd, op, "expected operands of ", nd, " dims");
  const int64_t n = c.size(-2), m = c.size(-1), k = a.size(-1);
  if (c.numel() == 0) return;
  Shape batch(c.sizes().begin(), c.sizes().end() - 2);
  int64_t batch_count = 1;
  for (int64_t s : batch) batch_count *= s;
  DeviceGuard guard(device);
  const cudaStream_t stream = current_raw_stream(device);
  if (k == 0) {  // an empty sum: zeros (plus the bias)
    fill(c, 0.0);
    if (bias.defined()) copy_into(c, bias);
    return;
  }
  int64_t stride_c = 0;
  TC_CHECK(c.stride(-1) == 1 && (n == 1 || c.stride(-2) >= m) && single_batch_stride(c, batch, stride_c), op,
           "the output must be row-major with one batch stride");
  const LtMatrix lt_a = as_lt(b, batch, op);  // cuBLASLt's A: b^T (m x k)
  const LtMatrix lt_b = as_lt(a, batch, op);  // cuBLASLt's B: a^T (k x n)
  const int64_t ldc = n == 1 ? std::max<int64_t>(m, 1) : c.stride(-2);

  const cudaDataType_t in_type = cuda_type(a.dtype(), op), out_type = cuda_type(c.dtype(), op);
  const bool dbl = a.dtype() == kFloat64;
  const cublasComputeType_t compute = dbl ? CUBLAS_COMPUTE_64F : CUBLAS_COMPUTE_32F;
  const cudaDataType_t scale_type = dbl ? CUDA_R_64F : CUDA_R_32F;
  const bool fused_bias = bias.defined() && bias.dtype() == c.dtype() && !dbl;
  const void* bias_ptr = fused_bias ? bias.raw_data() : nullptr;
  TC_CHECK(!bias.defined() || (bias.dim() == 1 && bias.size(0) == m), op, "bias must be 1-d of size ", m);
  Tensor bias_contig = bias;
  if (fused_bias && bias.stride(0) != 1) {
    bias_contig = make_tensor(bias.sizes(), bias.dtype(), device);
    copy_into(bias_contig, bias);
    bias_ptr = bias_contig.raw_data();
  }

  Descriptors desc;
  TC_CUBLAS_CHECK(cublasLtMatmulDescCreate(&desc.op, compute, scale_type), op);
  TC_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc.op, CUBLASLT_MATMUL_DESC_TRANSA, &lt_a.op, sizeof lt_a.op), op);
  TC_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc.op, CUBLASLT_MATMUL_DESC_TRANSB, &lt_b.op, sizeof lt_b.op), op);
  if (fused_bias) {
    const cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_BIAS;
    TC_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof epilogue),
                    op);
    TC_CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(desc.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias_ptr, sizeof bias_ptr), op);
  }
  make_layout(desc.a, in_type, lt_a.rows, lt_a.cols, lt_a.ld, batch_count, lt_a.batch_stride, op);
  make_layout(desc.b, in_type, lt_b.rows, lt_b.cols, lt_b.ld, batch_count, lt_b.batch_stride, op);
  make_layout(desc.d, out_type, static_cast<uint64_t>(m), static_cast<uint64_t>(n), ldc, batch_count, stride_c, op);

  const uint32_t align = std::min(
      {alignment(lt_a.ptr), alignment(lt_b.ptr), alignment(c.raw_data()), fused_bias ? alignment(bias_ptr) : 16u});
  const AlgoKey key{device.index,
                    in_type,
                    out_type,
                    lt_a.op,
                    lt_b.op,
                    static_cast<uint64_t>(m),
                    static_cast<uint64_t>(n),
                    static_cast<uint64_t>(k),
                    lt_a.ld,
                    lt_b.ld,
                    ldc,
                    batch_count,
                    lt_a.batch_stride,
                    lt_b.batch_stride,
                    stride_c,
                    fused_bias,
                    align};
  cublasLtMatmulAlgo_t algo;
  bool cached = false;
  {
    std::lock_guard<std::mutex> lock(g_algo_mutex);
    auto it = algo_cache().find(key);
    if (it != algo_cache().end()) {
      algo = it->second;
      cached = true;
    }
  }
  if (!cached) {
    TC_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&desc.pref), op);
    const uint64_t ws = kWorkspaceBytes;
    TC_CUBLAS_CHECK(
        cublasLtMatmulPreferenceSetAttribute(desc.pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws), op);
    for (auto attr : {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES})
      TC_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(desc.pref, attr, &align, sizeof align), op);
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    TC_CUBLAS_CHECK(cublasLtMatmulAlgoGetHeuristic(handle(device), desc.op, desc.a, desc.b, desc.d, desc.d, desc.pref,
                                                   1, &result, &found),
                    op);
    TC_CHECK(found > 0, op, "cuBLASLt has no algorithm for ", dtype_name(a.dtype()), " ", shape_str(a.sizes()), " @ ",
             shape_str(b.sizes()), " -> ", dtype_name(c.dtype()));
    algo = result.algo;
    std::lock_guard<std::mutex> lock(g_algo_mutex);
    algo_cache().emplace(key, algo);
  }

  const float alpha_f = 1.0f, beta_f = 0.0f;
  const double alpha_d = 1.0, beta_d = 0.0;
  const void* alpha = dbl ? static_cast<const void*>(&alpha_d) : &alpha_f;
  const void* beta = dbl ? static_cast<const void*>(&beta_d) : &beta_f;
  TC_CUBLAS_CHECK(
      cublasLtMatmul(handle(device), desc.op, alpha, lt_a.ptr, desc.a, lt_b.ptr, desc.b, beta, c.raw_data(), desc.d,
                     c.raw_data(), desc.d, &algo, workspace(device, stream), kWorkspaceBytes, stream),
      op);
  if (bias.defined() && !fused_bias) {
    const int64_t rows = batch_count * n;  // c is one (rows x m) matrix with row stride ldc when batches are packed
    TC_CHECK(batch_count == 1 || stride_c == n * ldc, op, "a bias of another dtype needs a packed output");
    TC_CHECK(c.dtype() == kFloat32 || (dbl && bias.dtype() == kFloat64), op, "a bias must have the output's dtype");
    if (dbl) {
      add_bias_kernel<double, double><<<blocks_for(rows * m), kThreads, 0, stream>>>(
          static_cast<double*>(c.raw_data()), static_cast<const double*>(bias.raw_data()), bias.stride(0), rows, m,
          ldc);
    } else {
      dispatch_dtype(bias.dtype(), [&]<class B>() {
        add_bias_kernel<float, B><<<blocks_for(rows * m), kThreads, 0, stream>>>(
            static_cast<float*>(c.raw_data()), static_cast<const B*>(bias.raw_data()), bias.stride(0), rows, m, ldc);
      });
    }
    TC_CUDA_CHECK(cudaGetLastError(), op);
  }
}

size_t matmul_cache_size() {
  std::lock_guard<std::mutex> lock(g_algo_mutex);
  return algo_cache().size();
}

}  // namespace tc::gpu
