// CPU reduction kernels: blocked pairwise sums (sum, mean, var) and max/min with indices.
// See reduce.h for the loop shapes and the accumulation rules.
#include "backend/cpu/loops/reduce.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "backend/cpu/loops/elementwise.h"

namespace tc::cpu {
namespace {

constexpr int64_t kChunk = 8192;           // columns per outer-loop item: whole rows stream best from memory
constexpr int64_t kRowsPerBlock = 64;      // rows summed plainly before a pairwise step
constexpr int64_t kSplitElements = 32768;  // reduced elements per work item when splitting
constexpr int64_t kTargetItems = 64;       // split small outputs into about this many items

// One group of dims (kept or reduced), coalesced; byte strides, outermost first. Always
// at least one dim (a lone size-1 dim of stride 0 when the group is empty).
struct Group {
  int n = 0;
  int64_t size[kMaxDims];
  int64_t stride[kMaxDims];
  int64_t numel = 1;
};

Group make_group(const std::vector<std::pair<int64_t, int64_t>>& dims) {
  Group g;
  for (auto [size, stride] : dims) {
    if (size == 1) continue;
    if (g.n > 0 && g.stride[g.n - 1] == stride * size) {
      g.size[g.n - 1] *= size;
      g.stride[g.n - 1] = stride;
    } else {
      g.size[g.n] = size;
      g.stride[g.n] = stride;
      ++g.n;
    }
  }
  if (g.n == 0) {
    g.n = 1;
    g.size[0] = 1;
    g.stride[0] = 0;
  }
  for (int d = 0; d < g.n; ++d) g.numel *= g.size[d];
  return g;
}

// Byte offset of linear index `lin` over the first `nd` dims of g.
inline int64_t group_offset(const Group& g, int64_t lin, int nd) {
  int64_t off = 0;
  for (int d = nd - 1; d >= 0 && lin != 0; --d) {
    off += (lin % g.size[d]) * g.stride[d];
    lin /= g.size[d];
  }
  return off;
}

struct Plan {
  Group kept, red;
  const char* base;
  DType dtype;
  int64_t es;
  bool outer;  // the kept innermost dim is contiguous and the reduced one is not
};

// `logical_order`: keep the reduced dims in row-major order (needed for flat indices);
// otherwise order them by stride so the innermost run is the most contiguous one.
Plan make_plan(const Tensor& x, const std::vector<bool>& reduced, bool logical_order) {
  TC_CHECK(x.dim() <= kMaxDims, "reduce", "at most ", kMaxDims, " dimensions are supported, got ", x.dim());
  Plan p;
  p.dtype = x.dtype();
  p.es = static_cast<int64_t>(element_size(x.dtype()));
  p.base = static_cast<const char*>(x.raw_data());
  std::vector<std::pair<int64_t, int64_t>> kd, rd;
  for (int64_t d = 0; d < x.dim(); ++d) (reduced[d] ? rd : kd).push_back({x.size(d), x.stride(d) * p.es});
  if (!logical_order)
    std::stable_sort(rd.begin(), rd.end(), [](auto a, auto b) { return std::abs(a.second) > std::abs(b.second); });
  p.kept = make_group(kd);
  p.red = make_group(rd);
  p.outer = p.kept.stride[p.kept.n - 1] == p.es && p.red.stride[p.red.n - 1] != p.es;
  return p;
}

// ---- loading as the accumulation type C (float, double or int64_t)

template <class C>
void load_c(const char* p, int64_t stride, DType dt, C* dst, int64_t n) {
  if constexpr (std::is_same_v<C, int64_t>) {
    dispatch_all(dt, "reduce", [&]<class T>() {
      if constexpr (std::is_integral_v<T>) {
        for (int64_t i = 0; i < n; ++i) {
          T v;
          std::memcpy(&v, p + i * stride, sizeof(T));
          dst[i] = static_cast<int64_t>(v);
        }
      } else {
        TC_FAIL("reduce", "internal: integer accumulation of ", dtype_name(dt));
      }
    });
  } else {
    load_block<C>(p, stride, dt, dst, n);
  }
}

// A pointer to n values as C: the data itself when it already is contiguous C, else buf.
template <class C, bool kDirect>
inline const C* view_c(const char* p, int64_t stride, DType dt, C* buf, int64_t n) {
  if (kDirect && dt == dtype_of<C> && stride == static_cast<int64_t>(sizeof(C))) return reinterpret_cast<const C*>(p);
  load_c<C>(p, stride, dt, buf, n);
  return buf;
}

template <class C>
void store_c(const C* src, char* p, DType dt, int64_t n) {
  const int64_t es = static_cast<int64_t>(element_size(dt));
  if constexpr (std::is_same_v<C, int64_t>) {
    dispatch_all(dt, "reduce", [&]<class T>() {
      for (int64_t i = 0; i < n; ++i) {
        T v;
        if constexpr (std::is_same_v<T, bool>)
          v = src[i] != 0;
        else
          v = static_cast<T>(src[i]);
        std::memcpy(p + i * es, &v, sizeof(T));
      }
    });
  } else {
    store_block<C>(src, p, es, dt, n);
  }
}

// ---- pairwise accumulation

// Sum of n contiguous values with 8 independent lanes (vectorizes, and splits the
// rounding error of a block eight ways).
template <class C>
inline C block_sum(const C* v, int64_t n) {
  C lane[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int l = 0; l < 8; ++l) lane[l] += v[i + l];
  for (; i < n; ++i) lane[0] += v[i];
  return ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]));
}

// Pairwise sum of a stream of block sums: part[k] holds the sum of 2^k pushed values,
// combined like the carries of a binary counter. O(log n) error growth, O(log n) state.
template <class C>
struct Cascade {
  C part[64];
  uint64_t count = 0;
  void push(C v) {
    int k = 0;
    for (uint64_t c = count; c & 1; c >>= 1, ++k) v += part[k];
    part[k] = v;
    ++count;
  }
  C total() const {
    C s = 0;
    int k = 0;
    for (uint64_t c = count; c; c >>= 1, ++k)
      if (c & 1) s += part[k];
    return s;
  }
};

// The same for rows of `width` values (the outer loop's row buffers).
template <class C>
struct RowCascade {
  int64_t width;
  std::vector<C> levels;  // level k at [k * width, (k + 1) * width)
  uint64_t count = 0;
  explicit RowCascade(int64_t w) : width(w) {}
  void push(C* row) {  // consumes row
    int k = 0;
    for (uint64_t c = count; c & 1; c >>= 1, ++k) {
      const C* lv = levels.data() + k * width;
      for (int64_t j = 0; j < width; ++j) row[j] += lv[j];
    }
    if (levels.size() < static_cast<size_t>((k + 1) * width)) levels.resize((k + 1) * width);
    std::copy(row, row + width, levels.data() + k * width);
    ++count;
  }
  void total(C* dst) const {
    std::fill(dst, dst + width, C(0));
    int k = 0;
    for (uint64_t c = count; c; c >>= 1, ++k)
      if (c & 1)
        for (int64_t j = 0; j < width; ++j) dst[j] += levels[k * width + j];
  }
};

// A block transform applied to loaded values before they are summed; `step` is 0 when
// the whole block belongs to output o, 1 when value j belongs to output o + j.
struct Identity {
  static constexpr bool kIdentity = true;
  template <class C>
  void operator()(int64_t, int64_t, C*, int64_t) const {}
};

template <class C>
struct SquaredDeviation {
  static constexpr bool kIdentity = false;
  const C* mean;
  void operator()(int64_t o, int64_t step, C* b, int64_t n) const {
    if (step == 0) {
      const C m = mean[o];
      for (int64_t i = 0; i < n; ++i) b[i] = (b[i] - m) * (b[i] - m);
    } else {
      const C* m = mean + o;
      for (int64_t i = 0; i < n; ++i) b[i] = (b[i] - m[i]) * (b[i] - m[i]);
    }
  }
};

// Sum of reduced elements [rb, re) of output o, whose data starts at base.
template <class C, class Prep>
C inner_partial(const Plan& p, const char* base, int64_t o, int64_t rb, int64_t re, const Prep& prep) {
  const Group& R = p.red;
  const int nd = R.n;
  const int64_t L = R.size[nd - 1], Ls = R.stride[nd - 1];
  Cascade<C> cas;
  alignas(64) C buf[kBlock];
  for (int64_t r = rb; r < re;) {
    const int64_t q = r / L, pos = r % L, m = std::min(L - pos, re - r);
    const char* run = base + group_offset(R, q, nd - 1) + pos * Ls;
    for (int64_t j = 0; j < m; j += kBlock) {
      const int64_t k = std::min(kBlock, m - j);
      const C* v = view_c<C, Prep::kIdentity>(run + j * Ls, Ls, p.dtype, buf, k);
      if constexpr (!Prep::kIdentity) prep(o, 0, buf, k);
      cas.push(block_sum(v, k));
    }
    r += m;
  }
  return cas.total();
}

// Sums rows [rb, re) of `ncol` contiguous columns starting at base into dst; column j
// belongs to output o_first + j.
template <class C, class Prep>
void outer_partial(const Plan& p, const char* base, int64_t ncol, int64_t o_first, int64_t rb, int64_t re,
                   const Prep& prep, C* dst) {
  const Group& R = p.red;
  RowCascade<C> cas(ncol);
  // Four rows are added per pass over the row buffer: a quarter of the buffer stores,
  // which otherwise stall on the next row's loads.
  constexpr int kRows = 4;
  std::vector<C> scratch(static_cast<size_t>((kRows + 1) * ncol), C(0));
  C* rows = scratch.data() + kRows * ncol;
  int64_t in_block = 0;
  for (int64_t r = rb; r < re;) {
    const int k = static_cast<int>(std::min<int64_t>({kRows, re - r, kRowsPerBlock - in_block}));
    const C* v[kRows];
    for (int t = 0; t < k; ++t) {
      C* buf = scratch.data() + t * ncol;
      v[t] = view_c<C, Prep::kIdentity>(base + group_offset(R, r + t, R.n), p.es, p.dtype, buf, ncol);
      if constexpr (!Prep::kIdentity) prep(o_first, 1, buf, ncol);
    }
    if (k == kRows) {
      const C *a = v[0], *b = v[1], *c = v[2], *d = v[3];
      for (int64_t j = 0; j < ncol; ++j) rows[j] += (a[j] + b[j]) + (c[j] + d[j]);
    } else {
      for (int t = 0; t < k; ++t)
        for (int64_t j = 0; j < ncol; ++j) rows[j] += v[t][j];
    }
    r += k;
    in_block += k;
    if (in_block == kRowsPerBlock) {
      cas.push(rows);
      std::fill(rows, rows + ncol, C(0));
      in_block = 0;
    }
  }
  if (cas.count == 0) {  // fewer than one block of rows: the plain sum is the result
    std::copy(rows, rows + ncol, dst);
    return;
  }
  if (in_block) cas.push(rows);
  cas.total(dst);
}

// final[o] = sum of prep(x) over the reduced elements of output o, for all kept outputs.
template <class C, class Prep>
void reduce_sum(const Plan& p, C* final_out, const Prep& prep) {
  const int64_t n_out = p.kept.numel, n_red = p.red.numel;
  const Group& K = p.kept;
  if (p.outer) {
    const int64_t W = K.size[K.n - 1];
    const int64_t chunks = (W + kChunk - 1) / kChunk;
    const int64_t items_out = (n_out / W) * chunks;
    int64_t splits = 1;
    if (items_out < kTargetItems)
      splits = std::clamp<int64_t>(n_red * std::min(W, kChunk) / kSplitElements, 1, kTargetItems / items_out);
    std::vector<C> part(splits > 1 ? static_cast<size_t>(splits * n_out) : 0);
    const int64_t per_item = std::max<int64_t>(1, n_red / splits * std::min(W, kChunk));
    parallel_for(0, items_out * splits, std::max<int64_t>(1, kGrainElements / per_item), [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        const int64_t s = i % splits, rest = i / splits, cc = rest % chunks, o2 = rest / chunks;
        const int64_t ncol = std::min(kChunk, W - cc * kChunk);
        const int64_t o_first = o2 * W + cc * kChunk;
        const char* base = p.base + group_offset(K, o2, K.n - 1) + cc * kChunk * p.es;
        C* dst = splits > 1 ? part.data() + s * n_out + o_first : final_out + o_first;
        outer_partial<C>(p, base, ncol, o_first, n_red * s / splits, n_red * (s + 1) / splits, prep, dst);
      }
    });
    if (splits > 1)
      parallel_for(0, n_out, kGrainElements, [&](int64_t b, int64_t e) {
        for (int64_t o = b; o < e; ++o) {
          C acc = part[o];
          for (int64_t s = 1; s < splits; ++s) acc += part[s * n_out + o];
          final_out[o] = acc;
        }
      });
    return;
  }
  int64_t splits = 1;
  if (n_out < kTargetItems) splits = std::clamp<int64_t>(n_red / kSplitElements, 1, kTargetItems / n_out);
  const Group& R = p.red;
  if (splits == 1 && R.n == 1 && R.stride[0] == p.es && R.size[0] <= kBlock / 4 && K.n == 1 &&
      K.stride[0] == R.size[0] * p.es) {
    // Short contiguous rows (n_out, L): load many rows per block instead of one call per row.
    const int64_t L = R.size[0], rows = kBlock / L;
    parallel_for(0, n_out, std::max<int64_t>(1, kGrainElements / L), [&](int64_t b, int64_t e) {
      alignas(64) C buf[kBlock];
      for (int64_t o = b; o < e; o += rows) {
        const int64_t m = std::min(rows, e - o);
        const C* v = view_c<C, Prep::kIdentity>(p.base + o * L * p.es, p.es, p.dtype, buf, m * L);
        for (int64_t r = 0; r < m; ++r) {
          if constexpr (!Prep::kIdentity) prep(o + r, 0, buf + r * L, L);
          final_out[o + r] = block_sum(v + r * L, L);
        }
      }
    });
    return;
  }
  std::vector<C> part(splits > 1 ? static_cast<size_t>(splits * n_out) : 0);
  const int64_t per_item = std::max<int64_t>(1, n_red / splits);
  parallel_for(0, n_out * splits, std::max<int64_t>(1, kGrainElements / per_item), [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const int64_t o = i / splits, s = i % splits;
      const C v =
          inner_partial<C>(p, p.base + group_offset(K, o, K.n), o, n_red * s / splits, n_red * (s + 1) / splits, prep);
      (splits > 1 ? part[i] : final_out[o]) = v;
    }
  });
  if (splits > 1)
    for (int64_t o = 0; o < n_out; ++o) {  // a few outputs only
      C acc = part[o * splits];
      for (int64_t s = 1; s < splits; ++s) acc += part[o * splits + s];
      final_out[o] = acc;
    }
}

// Writes final / divisor to out (contiguous), converting to out's dtype.
template <class C>
void store_result(const Tensor& out, C* final_vals, double divisor) {
  char* dst = static_cast<char*>(out.raw_data());
  const int64_t es = static_cast<int64_t>(element_size(out.dtype()));
  parallel_for(0, out.numel(), kGrainElements, [&](int64_t b, int64_t e) {
    alignas(64) C buf[kBlock];
    for (int64_t j = b; j < e; j += kBlock) {
      const int64_t m = std::min(kBlock, e - j);
      for (int64_t i = 0; i < m; ++i) buf[i] = divisor == 1.0 ? final_vals[j + i] : final_vals[j + i] / C(divisor);
      store_c<C>(buf, dst + j * es, out.dtype(), m);
    }
  });
}

template <class F>
void dispatch_acc(DType dt, const char* op, F&& f) {
  if (is_float8(dt)) fail_float8_op(op, dt);
  if (dt == kFloat64)
    f.template operator()<double>();
  else if (is_floating(dt))
    f.template operator()<float>();
  else
    f.template operator()<int64_t>();
}

}  // namespace

void sum_kernel(const Tensor& out, const Tensor& x, const std::vector<bool>& reduced, double divisor) {
  TC_CHECK(x.device().is_cpu(), "sum", "no CUDA kernel yet for this op (tensor on ", x.device(), ")");
  if (out.numel() == 0) return;
  dispatch_acc(x.dtype(), "sum", [&]<class C>() {
    if (x.numel() == 0) {  // empty reduction: 0 (0 / 0 = nan for a mean)
      std::vector<C> zero(static_cast<size_t>(out.numel()), C(0));
      store_result<C>(out, zero.data(), std::is_same_v<C, int64_t> ? 1.0 : divisor);
      return;
    }
    const Plan p = make_plan(x, reduced, false);
    if (out.dtype() == dtype_of<C> && (divisor == 1.0 || std::is_same_v<C, int64_t>)) {
      reduce_sum<C>(p, static_cast<C*>(out.raw_data()), Identity{});
      return;
    }
    std::vector<C> acc(static_cast<size_t>(out.numel()));
    reduce_sum<C>(p, acc.data(), Identity{});
    store_result<C>(out, acc.data(), divisor);
  });
}

void var_kernel(const Tensor& out, const Tensor& mean_out, const Tensor& x, const std::vector<bool>& reduced,
                int64_t correction) {
  if (out.numel() == 0) return;
  const int64_t n_out = out.numel();
  const int64_t n = n_out == 0 ? 0 : x.numel() / n_out;
  const double divisor = static_cast<double>(std::max<int64_t>(0, n - correction));
  dispatch_acc(x.dtype(), "var", [&]<class C>() {
    if constexpr (std::is_same_v<C, int64_t>) {
      TC_FAIL("var", "expected a floating dtype, got ", dtype_name(x.dtype()));
    } else {
      std::vector<C> mean(static_cast<size_t>(n_out), C(0)), acc(static_cast<size_t>(n_out), C(0));
      if (n > 0) {
        const Plan p = make_plan(x, reduced, false);
        reduce_sum<C>(p, mean.data(), Identity{});
        for (auto& m : mean) m /= C(n);
        reduce_sum<C>(p, acc.data(), SquaredDeviation<C>{mean.data()});
      } else {
        std::fill(mean.begin(), mean.end(), std::numeric_limits<C>::quiet_NaN());
        std::fill(acc.begin(), acc.end(), std::numeric_limits<C>::quiet_NaN());
      }
      if (mean_out.defined()) std::copy(mean.begin(), mean.end(), mean_out.data_ptr<C>());
      store_result<C>(out, acc.data(), divisor);
    }
  });
}

// ---- max / min

namespace {

template <class C, bool kMax>
struct Best {
  C v{};
  int64_t i = -1;  // -1: nothing seen yet
  static bool is_nan(C a) {
    if constexpr (std::is_floating_point_v<C>)
      return a != a;
    else
      return false;
  }
  static bool better(C a, C b) { return kMax ? a > b : a < b; }
  bool done() const { return i >= 0 && is_nan(v); }
  // Offers candidate (a, ia) that comes after everything seen so far.
  void offer(C a, int64_t ia) {
    if (done()) return;
    if (i < 0 || is_nan(a) || better(a, v)) {
      v = a;
      i = ia;
    }
  }
  // Scans n contiguous values whose first flat index is i0.
  void scan(const C* x, int64_t n, int64_t i0) {
    if (done()) return;
    C lane[8];
    bool nan = false;
    int64_t j = 0;
    if (n >= 8) {
      for (int l = 0; l < 8; ++l) lane[l] = x[l];
      for (; j + 8 <= n; j += 8)
        for (int l = 0; l < 8; ++l) {
          nan |= is_nan(x[j + l]);
          lane[l] = better(x[j + l], lane[l]) ? x[j + l] : lane[l];
        }
    } else {
      for (int l = 0; l < 8; ++l) lane[l] = x[0];
    }
    for (; j < n; ++j) {
      nan |= is_nan(x[j]);
      lane[0] = better(x[j], lane[0]) ? x[j] : lane[0];
    }
    if (nan) {
      for (j = 0; !is_nan(x[j]); ++j) {
      }
      offer(x[j], i0 + j);
      return;
    }
    C bm = lane[0];
    for (int l = 1; l < 8; ++l) bm = better(lane[l], bm) ? lane[l] : bm;
    if (i >= 0 && !better(bm, v)) return;
    for (j = 0; x[j] != bm; ++j) {
    }
    v = bm;
    i = i0 + j;
  }
};

template <class C, bool kMax>
void write_minmax(const Tensor& values, const Tensor& indices, const Tensor& x, const std::vector<Best<C, kMax>>& best,
                  int64_t splits);

// Max/min along a dim whose kept innermost dim is contiguous (e.g. (N, C) over N): walks
// the rows in order keeping a running best per column, instead of striding down columns.
template <class C, bool kMax>
void minmax_rows(const Plan& p, std::vector<Best<C, kMax>>& best) {
  const Group& K = p.kept;
  const Group& R = p.red;
  const int64_t W = K.size[K.n - 1], chunks = (W + kChunk - 1) / kChunk, n_red = R.numel;
  parallel_for(0, (K.numel / W) * chunks, std::max<int64_t>(1, kGrainElements / (n_red * std::min(W, kChunk))),
               [&](int64_t b, int64_t e) {
                 std::vector<C> scratch(static_cast<size_t>(2 * kChunk));
                 C* buf = scratch.data();
                 C* bv = scratch.data() + kChunk;
                 std::vector<int64_t> bi(static_cast<size_t>(kChunk));
                 for (int64_t it = b; it < e; ++it) {
                   const int64_t cc = it % chunks, o2 = it / chunks, ncol = std::min(kChunk, W - cc * kChunk);
                   const char* base = p.base + group_offset(K, o2, K.n - 1) + cc * kChunk * p.es;
                   const C* v0 = view_c<C, true>(base, p.es, p.dtype, buf, ncol);
                   std::copy(v0, v0 + ncol, bv);
                   std::fill(bi.begin(), bi.end(), 0);
                   for (int64_t r = 1; r < n_red; ++r) {
                     const C* v = view_c<C, true>(base + group_offset(R, r, R.n), p.es, p.dtype, buf, ncol);
                     for (int64_t j = 0; j < ncol; ++j) {
                       const bool take = Best<C, kMax>::better(v[j], bv[j]) ||
                                         (Best<C, kMax>::is_nan(v[j]) && !Best<C, kMax>::is_nan(bv[j]));
                       bv[j] = take ? v[j] : bv[j];
                       bi[j] = take ? r : bi[j];
                     }
                   }
                   const int64_t o_first = o2 * W + cc * kChunk;
                   for (int64_t j = 0; j < ncol; ++j) best[o_first + j] = {bv[j], bi[j]};
                 }
               });
}

template <class C, bool kMax>
void minmax_impl(const Tensor& values, const Tensor& indices, const Tensor& x, const std::vector<bool>& reduced) {
  const Plan p = make_plan(x, reduced, true);
  const Group& K = p.kept;
  const Group& R = p.red;
  const int64_t n_out = K.numel, n_red = R.numel;
  int64_t splits = 1;
  if (p.outer && n_out >= kTargetItems) {
    std::vector<Best<C, kMax>> best(static_cast<size_t>(n_out));
    minmax_rows<C, kMax>(p, best);
    write_minmax<C, kMax>(values, indices, x, best, 1);
    return;
  }
  if (n_out < kTargetItems) splits = std::clamp<int64_t>(n_red / kSplitElements, 1, kTargetItems / n_out);
  std::vector<Best<C, kMax>> best(static_cast<size_t>(n_out * splits));
  const int64_t nd = R.n, L = R.size[nd - 1], Ls = R.stride[nd - 1];
  parallel_for(0, n_out * splits, std::max<int64_t>(1, kGrainElements / std::max<int64_t>(1, n_red / splits)),
               [&](int64_t b, int64_t e) {
                 alignas(64) C buf[kBlock];
                 for (int64_t it = b; it < e; ++it) {
                   const int64_t o = it / splits, s = it % splits;
                   const int64_t rb = n_red * s / splits, re = n_red * (s + 1) / splits;
                   const char* base = p.base + group_offset(K, o, K.n);
                   Best<C, kMax>& bo = best[it];
                   for (int64_t r = rb; r < re && !bo.done();) {
                     const int64_t q = r / L, pos = r % L, m = std::min(L - pos, re - r);
                     const char* run = base + group_offset(R, q, nd - 1) + pos * Ls;
                     for (int64_t j = 0; j < m && !bo.done(); j += kBlock) {
                       const int64_t k = std::min(kBlock, m - j);
                       bo.scan(view_c<C, true>(run + j * Ls, Ls, p.dtype, buf, k), k, r + j);
                     }
                     r += m;
                   }
                 }
               });
  for (int64_t o = 0; o < n_out; ++o) {
    Best<C, kMax>& b0 = best[o * splits];
    for (int64_t s = 1; s < splits; ++s) b0.offer(best[o * splits + s].v, best[o * splits + s].i);
  }
  write_minmax<C, kMax>(values, indices, x, best, splits);
}

template <class C, bool kMax>
void write_minmax(const Tensor& values, const Tensor& indices, const Tensor& x, const std::vector<Best<C, kMax>>& best,
                  int64_t splits) {
  const int64_t n_out = static_cast<int64_t>(best.size()) / splits;
  parallel_for(0, n_out, kGrainElements, [&](int64_t b, int64_t e) {
    alignas(64) C buf[kBlock];
    const int64_t es = static_cast<int64_t>(element_size(x.dtype()));
    int64_t* idx = indices.defined() ? indices.data_ptr<int64_t>() : nullptr;
    for (int64_t j = b; j < e; j += kBlock) {
      const int64_t m = std::min(kBlock, e - j);
      for (int64_t t = 0; t < m; ++t) {
        buf[t] = best[(j + t) * splits].v;
        if (idx) idx[j + t] = best[(j + t) * splits].i;
      }
      if (values.defined()) store_c<C>(buf, static_cast<char*>(values.raw_data()) + j * es, values.dtype(), m);
    }
  });
}

}  // namespace

void minmax_kernel(const Tensor& values, const Tensor& indices, const Tensor& x, int64_t dim, bool is_max) {
  std::vector<bool> reduced(static_cast<size_t>(x.dim()), dim < 0);
  if (dim >= 0) reduced[dim] = true;
  if ((values.defined() ? values.numel() : indices.numel()) == 0) return;
  dispatch_acc(x.dtype(), is_max ? "max" : "min", [&]<class C>() {
    if (is_max)
      minmax_impl<C, true>(values, indices, x, reduced);
    else
      minmax_impl<C, false>(values, indices, x, reduced);
  });
}

void scatter_along_dim(const Tensor& grad_in, const Tensor& g, const Tensor& index, int64_t dim) {
  const Shape& sz = grad_in.sizes();
  const int64_t L = sz.empty() ? 1 : sz[dim];
  int64_t inner = 1;
  for (size_t d = static_cast<size_t>(dim) + 1; d < sz.size(); ++d) inner *= sz[d];
  const size_t es = element_size(grad_in.dtype());
  const char* src = static_cast<const char*>(g.raw_data());
  char* dst = static_cast<char*>(grad_in.raw_data());
  const int64_t* idx = index.data_ptr<int64_t>();
  parallel_for(0, g.numel(), kGrainElements, [&](int64_t b, int64_t e) {
    for (int64_t o = b; o < e; ++o) {
      const int64_t pos = (o / inner) * L * inner + idx[o] * inner + o % inner;
      std::memcpy(dst + pos * es, src + o * es, es);
    }
  });
}

}  // namespace tc::cpu
