// matmul_amx_into: the shapes it takes, b's tiles (packed by all threads, or kept from an
// earlier product by the same unchanged weight), then c's blocks handed out to them.
#include "backend/cpu/x86/matmul_amx.h"

#include <algorithm>
#include <atomic>
#include <memory>
#include <unordered_map>
#include <vector>

#include "backend/cpu/x86/matmul_amx_kernels.h"
#include "core/tensor_impl.h"
#include "tensorcast/convert.h"
#include "tensorcast/half.h"
#include "tensorcast/parallel.h"

namespace tc::cpu {
namespace {

std::atomic<bool> amx_allowed{true};

constexpr int64_t kBlock = 32;  // rows and columns of c per block of four tiles
// Packing b costs its n k elements per product, so without kept tiles the kernel takes only
// products with rows enough to pay for it: 2048 where the sums are short, 1024 where they
// are long (from 1024 terms, where oneDNN 2.6's kernel slows down); with fewer rows, or
// 1024 rows of medium sums, oneDNN is as fast once the packing is counted. With b's tiles
// kept from an earlier product there is no packing to pay: 512 rows suffice, and any
// number of rows where the sums are long; a few hundred rows of short sums stay on oneDNN,
// which is as fast there. The thresholds come from bench/bench_amx_ab (docs/performance.md).
constexpr int64_t kMinRows = 1024, kShortSumRows = 2048, kLongSum = 1024, kKeptMinRows = 512;
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

// b's tiles for all its n columns (matmul_amx_kernels.h's layout), packed by all threads.
void pack_tiles(const Tensor& b, int64_t ld, bool transposed, int64_t k, int64_t n, uint32_t* tiles) {
  const auto* bp = static_cast<const uint16_t*>(b.raw_data());
  parallel_for(0, n / 16, 4,
               [&](int64_t j0, int64_t j1) { detail::pack_b_tiles(bp, ld, transposed, k, j0 * 16, j1 * 16, tiles); });
}

// Weights' packed tiles, kept for products that take the same weight unchanged again
// (every forward pass of inference, the micro-batches of gradient accumulation): a weight
// is packed the second time the kernel sees it at one version (its memory's, bumped by
// every write: in-place ops, optimizer steps, the autocast copy's update), so a training
// step, which changes each weight between its forward and the next, packs per product as
// before and keeps nothing. This thread's (as autocast's weight-cast cache), keyed by the
// memory and the layout; memory the caller owns (from_blob) is never kept: it may change
// without a version bump.
class KeptTiles {
 public:
  // b's tiles if kept (packing them on the second sight at this version), else null.
  const uint32_t* find(const Tensor& b, bool transposed, int64_t ld, int64_t k, int64_t n) {
    const std::shared_ptr<Storage>& mem = b.impl()->storage;
    if (!mem || !mem->owned) return nullptr;
    const uint64_t version = mem->version.load(std::memory_order_relaxed);
    const Key key{mem.get(), b.storage_offset(), ld, k, n, transposed};
    auto it = entries_.find(key);
    if (it == entries_.end()) {
      if (entries_.size() >= kSweepAt) {
        drop_dead();
        if (entries_.size() >= kSweepAt) clear();  // all alive: start over rather than grow without bound
      }
      Entry& e = entries_[key];
      e.memory = mem;
      e.version = version;
      return nullptr;
    }
    Entry& e = it->second;
    if (e.memory.lock() != mem || e.version != version) {  // written since
      release(e);
      e.memory = mem;
      e.version = version;
      return nullptr;
    }
    if (e.tiles == nullptr) {
      const int64_t bytes = n * k * 2;
      drop_dead();  // what freed weights held
      if (bytes_ + bytes > kMaxBytes) return nullptr;
      bytes_ += bytes;
      e.bytes = bytes;
      e.tiles = buffer(e.words, n * k / 2, 16);
      pack_tiles(b, ld, transposed, k, n, e.tiles);
    }
    return e.tiles;
  }

 private:
  struct Key {
    const Storage* memory;
    int64_t offset, ld, k, n;
    bool transposed;
    bool operator==(const Key&) const = default;
  };
  struct Hash {
    size_t operator()(const Key& k) const {
      return std::hash<const void*>()(k.memory) ^ static_cast<size_t>(k.offset * 31 + k.ld * 7 + k.k * 131 + k.n);
    }
  };
  struct Entry {
    // Weak: keeps no weight's memory alive (only the Storage's own block, so while the entry
    // lives no other Storage takes its address).
    std::weak_ptr<Storage> memory;
    uint64_t version = 0;
    std::vector<uint32_t> words;
    uint32_t* tiles = nullptr;  // in words, 64-byte aligned; null: seen once at this version
    int64_t bytes = 0;
  };
  // Kept tiles take the bf16 weights' own size again, up to this much in all (a model's
  // weights beyond it are packed per product, as in training).
  static constexpr int64_t kMaxBytes = int64_t{512} << 20;
  static constexpr size_t kSweepAt = 256;  // entries before those of freed memory are dropped

  void release(Entry& e) {
    bytes_ -= e.bytes;
    e = Entry{};
  }
  void drop_dead() {
    for (auto it = entries_.begin(); it != entries_.end();) {
      if (it->second.memory.expired()) {
        release(it->second);
        it = entries_.erase(it);
      } else {
        ++it;
      }
    }
  }
  void clear() {
    entries_.clear();
    bytes_ = 0;
  }

  std::unordered_map<Key, Entry, Hash> entries_;
  int64_t bytes_ = 0;
};

}  // namespace

void set_matmul_amx(bool allowed) { amx_allowed.store(allowed, std::memory_order_relaxed); }

bool matmul_amx_into(const Tensor& a, const Tensor& b, const Tensor& bias, const Tensor& c, const Tensor& mul,
                     const uint32_t* act_table) {
  if (!amx_allowed.load(std::memory_order_relaxed) || !cpu_features().amx_bf16) return false;
  if (a.dim() != 2 || b.dim() != 2 || c.dim() != 2) return false;
  const int64_t M = a.size(0), K = a.size(1), N = b.size(1);
  if (M == 0 || M % kBlock != 0 || K % kBlock != 0 || N % kBlock != 0 || b.size(0) != K) return false;
  const bool transposed = b.stride(0) == 1 && b.stride(1) != 1;
  if (!unit_cols(a, kBFloat16, M, K) || b.dtype() != kBFloat16 || !(transposed || b.stride(1) == 1)) return false;
  const DType dt = c.dtype();
  if ((dt != kBFloat16 && dt != kFloat32) || !unit_cols(c, dt, M, N)) return false;
  if (mul.defined() && !unit_cols(mul, dt, M, N)) return false;
  if (act_table != nullptr && (dt != kBFloat16 || mul.defined())) return false;
  if (bias.defined() && (bias.dim() != 1 || bias.dtype() != kBFloat16 || bias.numel() != N)) return false;

  const bool packing_pays = M >= kMinRows && (M >= kShortSumRows || K >= kLongSum);
  if (M < kKeptMinRows && K < kLongSum) return false;  // oneDNN's, kept tiles or not
  const int64_t ldb = transposed ? b.stride(1) : b.stride(0);
  thread_local KeptTiles kept;
  const uint32_t* tiles = kept.find(b, transposed, ldb, K, N);
  if (tiles == nullptr) {
    if (!packing_pays) return false;
    thread_local std::vector<uint32_t> tiles_buf;  // the caller's: every thread reads them
    uint32_t* packed = buffer(tiles_buf, N * K / 2, 16);
    pack_tiles(b, ldb, transposed, K, N, packed);
    tiles = packed;
  }
  thread_local std::vector<float> bias_buf;
  const float* bias_f = nullptr;
  if (bias.defined()) {
    float* f = buffer(bias_buf, N, 1);
    const auto* bits = static_cast<const uint16_t*>(bias.raw_data());
    for (int64_t j = 0; j < N; ++j) f[j] = tc::detail::bf16_bits_to_float(bits[j * bias.stride(0)]);  // exact
    bias_f = f;
  }
  // Tasks: passes over the columns (b's tiles for each stay in L2), each split in groups of
  // rows, handed out in that order so that the threads share a pass's tiles; narrower
  // passes where there are fewer groups than threads (finer splits lost: each task ends
  // with an epilogue not overlapped with products).
  const int64_t groups = (M + kRowGroup - 1) / kRowGroup;
  const int64_t want_passes = (get_num_threads() + groups - 1) / groups;
  const int64_t split = (N / kBlock + want_passes - 1) / want_passes * kBlock;
  // Each pass reads a's rows again (from L3 where a is large: mlp-large's 1024 x 4096 a is
  // 8 MiB), so passes are as wide as half of L2 holds where there are rows enough for every
  // thread twice, which cuts those re-reads; with fewer rows, narrower passes give more
  // tasks, which balance threads running at uneven rates (a core slowed by another tenant
  // would otherwise hold the product).
  const int64_t pass_bytes = groups >= 2 * get_num_threads() ? int64_t{1} << 20 : int64_t{1} << 19;
  const int64_t width = std::min(detail::matmul_amx_pass(N, K, pass_bytes), split), passes = (N + width - 1) / width;
  const auto* ap = static_cast<const uint16_t*>(a.raw_data());
  parallel_tasks(passes * groups, [&](int64_t task) {
    thread_local std::vector<float> acc_buf;
    float* acc = buffer(acc_buf, 2 * kBlock * kBlock, 16);
    const int64_t n0 = task / groups * width, m0 = task % groups * kRowGroup;
    detail::matmul_amx_rows({ap, a.stride(0), tiles, K, m0, std::min(M, m0 + kRowGroup), n0, std::min(N, n0 + width),
                             bias_f, mul.defined() ? mul.raw_data() : nullptr, mul.defined() ? mul.stride(0) : 0,
                             act_table, c.raw_data(), c.stride(0), dt == kBFloat16, acc});
  });
  return true;
}

}  // namespace tc::cpu
