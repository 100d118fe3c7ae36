// The CPU batched matrix product: oneDNN matmul primitives behind a thread-safe LRU cache
// and the float64 loop.
#include "backend/cpu/onednn/matmul.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <vector>

#include "backend/cpu/loops/cast_dense.h"
#include "backend/cpu/loops/elementwise.h"
#include "backend/cpu/loops/gemv.h"
#include "backend/cpu/onednn/context.h"
#include "backend/cpu/onednn/plan.h"
#include "backend/cpu/x86/matmul_amx.h"
#include "backend/cpu/x86/weight_grad.h"
#include "core/tensor_impl.h"
#include "tensorcast/cpu_features.h"
#include "tensorcast/factories.h"
#include "tensorcast/gemm16.h"
#include "tensorcast/parallel.h"

namespace tc::cpu {
namespace {

// ------------------------------------------------------------------ geometry

// A view of t that oneDNN reads well: a broadcast (stride-0) batch dim becomes size 1,
// and every size-1 dim gets a row-major-consistent stride (its value is never used, but
// oneDNN's layout checks look at it). A matrix without a unit stride (an expanded vector,
// a column slice with step) is materialized, since no fast GEMM kernel reads it.
Tensor canonical(const Tensor& t) {
  const int64_t nd = t.dim();
  Shape sz = t.sizes(), st = t.strides();
  // No unit stride in the matrix (e.g. every other column): oneDNN would pick its slow
  // reference kernel, so one dense copy is cheaper.
  const bool unit = sz[nd - 1] == 1 || sz[nd - 2] == 1 || st[nd - 1] == 1 || st[nd - 2] == 1;
  if (t.numel() > 0 && (!unit || (sz[nd - 1] > 1 && st[nd - 1] == 0) || (sz[nd - 2] > 1 && st[nd - 2] == 0)))
    return canonical(as_contiguous(t));
  for (int64_t d = 0; d < nd - 2; ++d)
    if (st[d] == 0) sz[d] = 1;
  int64_t extent = 1;  // max over inner dims of stride * size
  for (int64_t d = nd - 1; d >= 0; --d) {
    if (sz[d] == 1) st[d] = extent;
    extent = std::max(extent, st[d] * sz[d]);
  }
  return make_view(t, sz, st, t.storage_offset());
}

// ------------------------------------------------------------------ primitive cache

using Key = std::vector<int64_t>;
struct KeyHash {
  size_t operator()(const Key& k) const noexcept {
    size_t h = 0xcbf29ce484222325ull;
    for (int64_t v : k) h = (h ^ static_cast<size_t>(v)) * 0x100000001b3ull;
    return h;
  }
};

struct Entry {
  std::optional<dnnl::matmul> prim;  // empty: oneDNN has no implementation (cached refusal)
  size_t scratchpad_bytes = 0;
};

// Thread-safe LRU. Primitives are created outside the lock (creation is slow); two threads
// racing on one new key both create, and the second insert keeps the first entry.
class PrimitiveCache {
 public:
  static constexpr size_t kCapacity = 1024;

  std::optional<Entry> find(const Key& k) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = map_.find(k);
    if (it == map_.end()) return std::nullopt;
    lru_.splice(lru_.begin(), lru_, it->second);
    return it->second->second;
  }
  Entry insert(const Key& k, Entry e) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = map_.find(k);
    if (it != map_.end()) return it->second->second;
    lru_.emplace_front(k, std::move(e));
    map_.emplace(k, lru_.begin());
    if (lru_.size() > kCapacity) {
      map_.erase(lru_.back().first);
      lru_.pop_back();
    }
    return lru_.front().second;
  }
  size_t size() {
    std::lock_guard<std::mutex> lock(mu_);
    return lru_.size();
  }
  void clear() {
    std::lock_guard<std::mutex> lock(mu_);
    map_.clear();
    lru_.clear();
  }

 private:
  std::mutex mu_;
  std::list<std::pair<Key, Entry>> lru_;
  std::unordered_map<Key, std::list<std::pair<Key, Entry>>::iterator, KeyHash> map_;
};

PrimitiveCache& cache() {
  static PrimitiveCache c;
  return c;
}

void append_geometry(Key& k, const Tensor& t) {
  k.push_back(static_cast<int64_t>(t.dtype()));
  k.push_back(t.dim());
  k.insert(k.end(), t.sizes().begin(), t.sizes().end());
  k.insert(k.end(), t.strides().begin(), t.strides().end());
}

// bias as oneDNN wants it: c's number of dims, all 1 but the last.
dnnl::memory::desc bias_desc(const Tensor& bias, int64_t nd, const char* op) {
  dnnl::memory::dims dims(static_cast<size_t>(nd), 1), strides(static_cast<size_t>(nd), 1);
  dims.back() = bias.size(0);
  const int64_t s = bias.size(0) == 1 ? 1 : bias.stride(0);
  strides.back() = s;
  for (int64_t d = nd - 2; d >= 0; --d) strides[d] = s * bias.size(0);
  return dnnl::memory::desc(dims, dnnl_dtype(bias.dtype(), op), strides);
}

// The primitive cache's key: every operand's dtype and geometry, the epilogue and the thread
// count (some oneDNN kernels fix their work split at creation).
void make_key(Key& k, const Tensor& a, const Tensor& b, const Tensor& bias, const Tensor& c, Activation act,
              const Tensor& mul) {
  k.clear();
  append_geometry(k, a);
  append_geometry(k, b);
  append_geometry(k, c);
  k.push_back(bias.defined() ? bias.stride(0) : -1);
  k.push_back(bias.defined() ? static_cast<int64_t>(bias.dtype()) : -1);
  k.push_back(static_cast<int64_t>(act));
  if (mul.defined()) append_geometry(k, mul);
  k.push_back(get_num_threads());
}

// The cached primitive for key k (creating it on a miss); an entry without a primitive when
// oneDNN refuses the problem (e.g. float16 without CPU support).
Entry lookup(const Key& k, const Tensor& a, const Tensor& b, const Tensor& bias, const Tensor& c, const char* op,
             Activation act, const Tensor& mul) {
  if (auto e = cache().find(k)) return *e;
  Entry e;
  try {
    const auto md_c = dnnl_desc(c, op);
    auto d = bias.defined() ? dnnl::matmul::desc(dnnl_desc(a, op), dnnl_desc(b, op), bias_desc(bias, c.dim(), op), md_c)
                            : dnnl::matmul::desc(dnnl_desc(a, op), dnnl_desc(b, op), md_c);
    dnnl::primitive_attr attr;
    // A caller-owned scratchpad lets several threads run one cached primitive at once.
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    dnnl::post_ops po;
    if (act != Activation::kNone)
      po.append_eltwise(1.f,
                        act == Activation::kRelu   ? dnnl::algorithm::eltwise_relu
                        : act == Activation::kGelu ? dnnl::algorithm::eltwise_gelu_erf
                                                   : dnnl::algorithm::eltwise_gelu_tanh,
                        0.f, 0.f);
    if (mul.defined()) po.append_binary(dnnl::algorithm::binary_mul, dnnl_desc(mul, op));
    if (po.len() > 0) attr.set_post_ops(po);
    dnnl::matmul::primitive_desc pd(d, attr, dnnl_engine());
    // A reference (scalar) 16-bit kernel is far slower than the float32 detour.
    if (is_reduced_float(c.dtype()) && is_reference_impl(pd.impl_info_str())) return cache().insert(k, std::move(e));
    e.scratchpad_bytes = pd.scratchpad_desc().get_size();
    e.prim = dnnl::matmul(pd);
  } catch (const dnnl::error&) {
    e.prim.reset();  // remembered, so a refused problem is not re-tried on every call
  }
  return cache().insert(k, std::move(e));
}

Entry lookup(const Tensor& a, const Tensor& b, const Tensor& bias, const Tensor& c, const char* op, Activation act,
             const Tensor& mul) {
  Key k;
  make_key(k, a, b, bias, c, act, mul);
  return lookup(k, a, b, bias, c, op, act, mul);
}

// Per-thread scratchpad storage, grown on demand.
void* scratchpad(size_t bytes) {
  struct Buf {
    void* p = nullptr;
    size_t n = 0;
    ~Buf() { std::free(p); }
  };
  thread_local Buf buf;
  if (bytes > buf.n) {
    std::free(buf.p);
    buf.n = (bytes + 63) / 64 * 64;
    buf.p = std::aligned_alloc(64, buf.n);
    TC_CHECK(buf.p != nullptr, "matmul", "could not allocate a scratchpad of ", bytes, " bytes");
  }
  return buf.p;
}

// A cached primitive with memory objects for its arguments, one set per thread: their
// descriptors follow from the key, so a call only points them at its tensors. Making them
// anew on every call (descriptors, memory objects, the argument map, the key) took about
// half of a small product's host time, which is most of a batch-1 forward's overhead.
struct Bound {
  Entry entry;  // holds the primitive while the shared cache may drop it
  dnnl::memory src, weights, dst, bias, mul, scratch;
  std::unordered_map<int, dnnl::memory> args;  // the same memory objects, as execute takes them
};

std::atomic<uint64_t> bindings_generation{0};  // clear_matmul_cache() drops every thread's bindings

Bound bind(Entry e, const Tensor& a, const Tensor& b, const Tensor& bias, const Tensor& c, const char* op,
           Activation act, const Tensor& mul) {
  Bound bd{std::move(e), {}, {}, {}, {}, {}, {}, {}};
  if (!bd.entry.prim) return bd;
  auto unbound = [](const dnnl::memory::desc& md) { return dnnl::memory(md, dnnl_engine(), DNNL_MEMORY_NONE); };
  bd.src = unbound(dnnl_desc(a, op));
  bd.weights = unbound(dnnl_desc(b, op));
  bd.dst = unbound(dnnl_desc(c, op));
  bd.args = {{DNNL_ARG_SRC, bd.src}, {DNNL_ARG_WEIGHTS, bd.weights}, {DNNL_ARG_DST, bd.dst}};
  if (bias.defined()) bd.args.emplace(DNNL_ARG_BIAS, bd.bias = unbound(bias_desc(bias, c.dim(), op)));
  if (mul.defined())  // the binary post-op's index in the chain: after the activation, if any
    bd.args.emplace(DNNL_ARG_ATTR_MULTIPLE_POST_OP(act == Activation::kNone ? 0 : 1) | DNNL_ARG_SRC_1,
                    bd.mul = unbound(dnnl_desc(mul, op)));
  if (bd.entry.scratchpad_bytes > 0) {
    const dnnl::memory::desc sd({static_cast<dnnl::memory::dim>(bd.entry.scratchpad_bytes)},
                                dnnl::memory::data_type::u8, {1});
    bd.args.emplace(DNNL_ARG_SCRATCHPAD, bd.scratch = unbound(sd));
  }
  return bd;
}

// This thread's bindings for the product's geometry, made on first use.
Bound& bound(const Tensor& a, const Tensor& b, const Tensor& bias, const Tensor& c, const char* op, Activation act,
             const Tensor& mul) {
  thread_local Key key;
  thread_local std::unordered_map<Key, Bound, KeyHash> bindings;
  thread_local uint64_t generation = 0;
  const uint64_t g = bindings_generation.load(std::memory_order_acquire);
  if (generation != g || bindings.size() >= PrimitiveCache::kCapacity) {
    bindings.clear();
    generation = g;
  }
  make_key(key, a, b, bias, c, act, mul);
  auto it = bindings.find(key);
  if (it == bindings.end())
    it = bindings.emplace(key, bind(lookup(key, a, b, bias, c, op, act, mul), a, b, bias, c, op, act, mul)).first;
  return it->second;
}

bool run_dnnl(const Tensor& a, const Tensor& b, const Tensor& bias, const Tensor& c, const char* op,
              Activation act = Activation::kNone, const Tensor& mul = Tensor()) {
  Bound& bd = bound(a, b, bias, c, op, act, mul);
  if (!bd.entry.prim) return false;
  bd.src.set_data_handle(a.raw_data());
  bd.weights.set_data_handle(b.raw_data());
  bd.dst.set_data_handle(c.raw_data());
  if (bias.defined()) bd.bias.set_data_handle(bias.raw_data());
  if (mul.defined()) bd.mul.set_data_handle(mul.raw_data());
  if (bd.entry.scratchpad_bytes > 0) bd.scratch.set_data_handle(scratchpad(bd.entry.scratchpad_bytes));
  bd.entry.prim->execute(dnnl_stream(), bd.args);
  dnnl_stream().wait();
  return true;
}

// ------------------------------------------------------------------ float64 loop

// Rows of c in parallel; within a row, i-p-j order so b is read along its rows. Blocking
// over p keeps a strip of b in cache while a block of j is accumulated.
void matmul_f64(const Tensor& a, const Tensor& b, const Tensor& bias, const Tensor& c) {
  const int64_t nd = c.dim();
  const int64_t n = c.size(-2), m = c.size(-1), k = a.size(-1);
  const int64_t batch = c.numel() / (n * m);
  const double* pa = a.data_ptr<double>();
  const double* pb = b.data_ptr<double>();
  const double* pbias = bias.defined() ? bias.data_ptr<double>() : nullptr;
  double* pc = c.data_ptr<double>();
  const int64_t as0 = a.stride(-2), as1 = a.stride(-1), bs0 = b.stride(-2), bs1 = b.stride(-1);
  const int64_t cs0 = c.stride(-2), cs1 = c.stride(-1);
  const int64_t bias_s = bias.defined() ? bias.stride(0) : 0;
  auto offsets = [&](int64_t bi, int64_t& oa, int64_t& ob, int64_t& oc) {
    oa = ob = oc = 0;
    for (int64_t d = nd - 3; d >= 0; --d) {
      const int64_t i = bi % c.size(d);
      bi /= c.size(d);
      if (a.size(d) != 1) oa += i * a.stride(d);
      if (b.size(d) != 1) ob += i * b.stride(d);
      oc += i * c.stride(d);
    }
  };
  constexpr int64_t kBlockP = 128, kBlockJ = 256;
  parallel_for(0, batch * n, std::max<int64_t>(1, 4096 / std::max<int64_t>(1, k * m)), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      int64_t oa, ob, oc;
      offsets(r / n, oa, ob, oc);
      const int64_t i = r % n;
      const double* arow = pa + oa + i * as0;
      double* crow = pc + oc + i * cs0;
      for (int64_t j = 0; j < m; ++j) crow[j * cs1] = pbias ? pbias[j * bias_s] : 0.0;
      for (int64_t j0 = 0; j0 < m; j0 += kBlockJ) {
        const int64_t j1 = std::min(m, j0 + kBlockJ);
        for (int64_t p0 = 0; p0 < k; p0 += kBlockP) {
          const int64_t p1 = std::min(k, p0 + kBlockP);
          for (int64_t p = p0; p < p1; ++p) {
            const double av = arow[p * as1];
            const double* brow = pb + ob + p * bs0;
            for (int64_t j = j0; j < j1; ++j) crow[j * cs1] += av * brow[j * bs1];
          }
        }
      }
    }
  });
}

bool probe_native(DType dt) {
  if (dt == kFloat64) return false;
  float buf[4] = {};  // never read: only the primitive is created (from_blob: no memory statistics)
  const Tensor t = from_blob(buf, {2, 2}, TensorOptions(dt));
  return lookup(t, t, Tensor(), t, "matmul", Activation::kNone, Tensor()).prim.has_value();
}

// The product with the epilogue (act, mul) as oneDNN's post-ops where oneDNN fuses them,
// else without: whether it was applied, or nullopt when oneDNN has no primitive for the
// problem at all.
std::optional<bool> run_dnnl_fused(const Tensor& a, const Tensor& b, const Tensor& bias, const Tensor& c,
                                   const char* op, Activation act, const Tensor& mul) {
  if (run_dnnl(a, b, bias, c, op, act, mul)) return true;
  if ((act != Activation::kNone || mul.defined()) && run_dnnl(a, b, bias, c, op)) return false;
  return std::nullopt;
}

// A 16-bit product on the float32 kernel: float32 copies of the operands in their own
// layouts (widening is exact), float32 accumulation, and c rounded once (written directly
// when c is float32). The copies come from the caching allocator. Returns whether the
// epilogue was applied.
bool run_widened(const Tensor& a, const Tensor& b, const Tensor& bias, const Tensor& c, const char* op, Activation act,
                 const Tensor& mul) {
  const Tensor a32 = cast_dense(a, kFloat32), b32 = cast_dense(b, kFloat32), bias32 = cast_dense(bias, kFloat32);
  const Tensor c32 = c.dtype() == kFloat32 ? c : make_tensor(c.sizes(), kFloat32);
  const std::optional<bool> applied = run_dnnl_fused(a32, b32, bias32, c32, op, act, cast_dense(mul, kFloat32));
  TC_CHECK(applied.has_value(), op, "oneDNN has no float32 matmul for ", shape_str(a.sizes()), " x ",
           shape_str(b.sizes()));
  if (!c32.is_same(c)) copy_into(c, c32);
  return *applied;
}

// Whether the float32 kernel pays for its conversions: widening costs a pass over every
// element of a, b and c, and saves part of the slower 16-bit kernel's time per
// multiply-add. The measured break-even is ~30 multiply-adds per converted element, so
// matrix-vector-like products (a batch-1 forward: the weight read once, widened for
// nothing) stay on the native kernel, which reads half the bytes. Shapes decide, not
// timing, so a given product always rounds the same way.
bool worth_widening(const Tensor& a, const Tensor& b, const Tensor& c) {
  const double macs = static_cast<double>(c.numel()) * static_cast<double>(a.size(-1));
  const double converted = static_cast<double>(a.numel() + b.numel() + c.numel());
  return macs >= 32.0 * converted;
}

// Whether oneDNN runs on AMX tiles here (the CPU has them and the OS grants them).
bool onednn_uses_amx() {
  // cpu_isa values are bit sets (avx2_vnni is numerically above AMX): test the bits.
  const auto isa = static_cast<unsigned>(dnnl::get_effective_cpu_isa()),
             amx = static_cast<unsigned>(dnnl::cpu_isa::avx512_core_amx);
  return (isa & amx) == amx;
}

// kAuto's choice, fixed per CPU so that every process on a machine rounds alike (a resumed
// run must repeat the uninterrupted one bit for bit; a timed choice could flip between
// processes on a loaded machine). The 16-bit kernel when it has a higher peak than float32
// FMA: AMX tiles (Intel Sapphire Rapids and later, when the OS grants them), or AMD's
// AVX512-BF16 (Zen 4 and later: the dot product at twice the fp32 FMA rate). Elsewhere
// (Intel AVX512-BF16 without AMX: the dot product at the fp32 FMA rate, and oneDNN 2.6's
// fp32 GEMM faster than its bf16 one) float32.
// float16: the native kernel wherever oneDNN has one (AVX512-FP16, AMX-FP16).
Gemm16 auto_choice(DType dt) {
  if (dt == kFloat16) return Gemm16::kNative;
  if (onednn_uses_amx()) return Gemm16::kNative;
  return cpu_features().vendor == CpuVendor::kAmd ? Gemm16::kNative : Gemm16::kFloat32;
}

// Whether a 16-bit product should read a row-major copy of a rather than a itself, a
// matrix read transposed (the weight gradient g^T x: g is (tokens, out)). oneDNN 2.6's AMX
// kernel runs such products slower than on a row-major a, and from about 2^19 elements
// of c (the break-even was the same at every sum length measured) that costs more than
// the copy (one pass over a); smaller products lose to the copy. Measured on AMX only, so
// other CPUs keep the view. Shapes decide, so a product always rounds alike.
bool copy_transposed_a(const Tensor& a, const Tensor& c) {
  static const bool amx = onednn_uses_amx();
  return amx && a.dim() == 2 && a.stride(1) != 1 && a.size(1) > 1 && c.numel() >= (int64_t{1} << 19);
}

}  // namespace

bool native_matmul(DType dt) {
  static const bool f32 = probe_native(kFloat32), bf16 = probe_native(kBFloat16), f16 = probe_native(kFloat16);
  switch (dt) {
    case DType::Float32:
      return f32;
    case DType::BFloat16:
      return bf16;
    case DType::Float16:
      return f16;
    default:
      return false;
  }
}

Tensor widen_for_gemm(const Tensor& t) {
  if (!t.defined() || !t.device().is_cpu() || !is_reduced_float(t.dtype()) ||
      cpu_gemm16_path(t.dtype()) != Gemm16::kFloat32)
    return t;
  return cast_dense(t, kFloat32);
}

bool matmul_copies_a(const Tensor& a, const Tensor& c) { return copy_transposed_a(a, c); }

bool matmul_widens(const Tensor& a, const Tensor& b, const Tensor& c) {
  const DType dt = c.dtype();
  if (!is_reduced_float(a.dtype()) && !is_reduced_float(b.dtype()) && !is_reduced_float(dt)) return false;
  // Float32 operands of a 16-bit product hold widened 16-bit values (widen_for_gemm).
  const DType d16 = is_reduced_float(a.dtype()) ? a.dtype() : is_reduced_float(b.dtype()) ? b.dtype() : dt;
  // kAuto keeps matrix-vector-like products native; an explicit kFloat32 widens them all.
  return a.dtype() != b.dtype() || (cpu_gemm16_path(d16) == Gemm16::kFloat32 &&
                                    (get_cpu_gemm16() == Gemm16::kFloat32 || worth_widening(a, b, c)));
}

size_t matmul_cache_size() { return cache().size(); }
void clear_matmul_cache() {
  cache().clear();
  bindings_generation.fetch_add(1, std::memory_order_release);
}

bool matmul_into(const Tensor& a_in, const Tensor& b_in, const Tensor& bias, const Tensor& c, const char* op,
                 Activation act, const Tensor& mul_in, Activation rounded_act) {
  if (c.numel() == 0) return true;
  const DType dt = c.dtype();
  if (a_in.size(-1) == 0) {  // an empty sum: the bias, or zeros
    if (bias.defined())
      copy_into(c, bias);
    else
      fill_zero(c);
    return act == Activation::kNone && !mul_in.defined() && rounded_act == Activation::kNone;
  }
  TC_CHECK(rounded_act == Activation::kNone || (act == Activation::kNone && !mul_in.defined()), op,
           "an activation after rounding goes with no other epilogue");
  const bool fuse = act != Activation::kNone || mul_in.defined() || rounded_act != Activation::kNone;
  const bool plain = rounded_act == Activation::kNone;  // what oneDNN's epilogues can apply
  const Tensor a = canonical(a_in), b = canonical(b_in);
  if (gemv_into(a, b, bias, c)) return !fuse;  // a few rows: the weight streamed once
  if (dt == kFloat64) {
    matmul_f64(a, b, bias, c);
    return !fuse;
  }
  // The multiplier is read in the destination's dtype: oneDNN 2.x accepts a float16 one
  // on CPUs without float16 math and reads it wrong (MatmulEpilogue test).
  if (is_float8(dt)) fail_float8_op(op, dt);
  const Tensor mul = cast_dense(mul_in, dt);
  TC_CHECK(dt == kFloat32 || dt == kBFloat16 || dt == kFloat16, op, "expected a floating dtype, got ", dtype_name(dt));
  if (is_reduced_float(a.dtype()) || is_reduced_float(b.dtype()) || is_reduced_float(dt)) {
    const bool wide = matmul_widens(a, b, c);
    if (!wide && !fuse && !bias.defined() && weight_grad_into(a, b, c)) return true;
    if (!wide && act == Activation::kNone && (plain || dt == kBFloat16) &&
        matmul_amx_into(a, b, bias, c, mul, plain ? nullptr : activation_table(rounded_act, dt)))
      return true;
    if (!wide)
      if (const std::optional<bool> applied =
              run_dnnl_fused(copy_transposed_a(a, c) ? as_contiguous(a) : a, b, bias, c, op, act, mul))
        return *applied && plain;
    return run_widened(a, b, bias, c, op, act, mul) && plain;
  }
  if (const std::optional<bool> applied = run_dnnl_fused(a, b, bias, c, op, act, mul)) return *applied && plain;
  // oneDNN refused these strides: retry once on dense copies.
  const Tensor cc = c.is_contiguous() ? c : make_tensor(c.sizes(), dt);
  const Tensor bc = bias.defined() ? as_contiguous(bias) : Tensor();
  TC_CHECK(run_dnnl(as_contiguous(a), as_contiguous(b), bc, cc, op), op, "oneDNN has no matmul for ",
           shape_str(a.sizes()), " x ", shape_str(b.sizes()), " in ", dtype_name(dt));
  if (!cc.is_same(c)) copy_into(c, cc);
  return !fuse;
}

}  // namespace tc::cpu

namespace tc {

Gemm16 cpu_gemm16_path(DType dtype) {
  TC_CHECK(is_reduced_float(dtype), "cpu_gemm16_path", "expected bfloat16 or float16, got ", dtype_name(dtype));
  const Gemm16 mode = get_cpu_gemm16();
  if (!cpu::native_matmul(dtype)) return Gemm16::kFloat32;
  if (mode != Gemm16::kAuto) return mode;
  static const Gemm16 bf16 = cpu::auto_choice(kBFloat16), f16 = cpu::auto_choice(kFloat16);
  return dtype == kBFloat16 ? bf16 : f16;
}

}  // namespace tc
