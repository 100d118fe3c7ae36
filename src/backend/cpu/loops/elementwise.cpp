// Strided block loads/stores with dtype conversion, broadcast strides, copy_into and
// the contiguous copies and zero fills that kernels need.
#include "backend/cpu/loops/elementwise.h"

#include <cstdint>
#include <cstring>

#include "backend/cpu/x86/copy_kernels.h"
#include "tensorcast/convert.h"

namespace tc::cpu {

template <class C>
void load_block(const char* p, int64_t stride, DType dt, C* dst, int64_t n) {
  if (n <= 0) return;  // (an empty tensor's data pointer may be null, which memcpy may not take)
  if (stride == 0) {   // a broadcast value
    C v{};
    load_block<C>(p, static_cast<int64_t>(element_size(dt)), dt, &v, 1);
    std::fill(dst, dst + n, v);
    return;
  }
  if (dt == dtype_of<C> && stride == static_cast<int64_t>(sizeof(C))) {  // the compute type, contiguous
    std::memcpy(dst, p, static_cast<size_t>(n) * sizeof(C));
    return;
  }
  if constexpr (std::is_same_v<C, float>) {
    if (stride == 2 && dt == kBFloat16) return bf16_to_float(reinterpret_cast<const BFloat16*>(p), dst, n);
    if (stride == 2 && dt == kFloat16) return half_to_float(reinterpret_cast<const Half*>(p), dst, n);
  }
  dispatch_all(dt, "load", [&]<class T>() {
    for (int64_t i = 0; i < n; ++i) {
      T v;
      std::memcpy(&v, p + i * stride, sizeof(T));
      dst[i] = static_cast<C>(v);
    }
  });
}

template <class C>
void store_block(const C* src, char* p, int64_t stride, DType dt, int64_t n) {
  if (n <= 0) return;
  if (dt == dtype_of<C> && stride == static_cast<int64_t>(sizeof(C))) {
    std::memcpy(p, src, static_cast<size_t>(n) * sizeof(C));
    return;
  }
  if constexpr (std::is_same_v<C, float>) {
    if (stride == 2 && dt == kBFloat16) return float_to_bf16(src, reinterpret_cast<BFloat16*>(p), n);
    if (stride == 2 && dt == kFloat16) return float_to_half(src, reinterpret_cast<Half*>(p), n);
  }
  dispatch_all(dt, "store", [&]<class T>() {
    for (int64_t i = 0; i < n; ++i) {
      T v;
      if constexpr (std::is_same_v<T, bool>)
        v = src[i] != C(0);
      else if constexpr (std::is_integral_v<T>)
        v = static_cast<T>(static_cast<int64_t>(src[i]));
      else if constexpr (std::is_same_v<C, double> && (std::is_same_v<T, BFloat16> || std::is_same_v<T, Half>))
        v = round_double_to<T>(src[i]);  // double -> float -> 16-bit would round twice
      else
        v = static_cast<T>(src[i]);
      std::memcpy(p + i * stride, &v, sizeof(T));
    }
  });
}

template void load_block<float>(const char*, int64_t, DType, float*, int64_t);
template void load_block<double>(const char*, int64_t, DType, double*, int64_t);
template void store_block<float>(const float*, char*, int64_t, DType, int64_t);
template void store_block<double>(const double*, char*, int64_t, DType, int64_t);

namespace {

// A same-dtype copy whose source is a transpose of the destination's layout: the
// destination's innermost dim is contiguous and the source's is the next one out (b.t()
// made contiguous). Walking the destination's rows reads the source down a column, a
// cache line per element, at a power-of-two stride as often as not (the lines then share
// a few L1 sets and evict each other before their next element is read). By square tiles
// through a buffer instead: each source line is read whole into the tile, each
// destination line written whole from it; 16-bit tiles on AVX-512 by permutes in
// registers (copy_kernels.h), which removes the buffer's round trip as well.
// Below ~1 MiB the column walk's lines stay in L2 and it is as fast as the scalar tiles
// (not as the registers').
bool has_avx512_tiles(int64_t es) {
  const CpuFeatures& f = cpu_features();
  return es == 2 && f.avx512f && f.avx512bw;
}

bool is_transpose(const RunGeometry<2>& g, int64_t es) {
  const int nd = g.ndim;
  const int64_t min_bytes = has_avx512_tiles(es) ? 0 : int64_t{1} << 20;
  return nd >= 2 && g.numel * es > min_bytes && g.strides[0][nd - 1] == es && g.strides[1][nd - 2] == es &&
         g.strides[1][nd - 1] != es && g.strides[1][nd - 1] != 0 && g.sizes[nd - 1] >= 16 && g.sizes[nd - 2] >= 16;
}

template <class U>
void copy_transposed(const RunGeometry<2>& g) {
  constexpr int64_t kTile = 32;
  const int nd = g.ndim;
  const int64_t R = g.sizes[nd - 2], C = g.sizes[nd - 1];
  const int64_t d_row = g.strides[0][nd - 2], s_col = g.strides[1][nd - 1];  // bytes
  int64_t outer = 1;
  for (int d = 0; d < nd - 2; ++d) outer *= g.sizes[d];
  const int64_t row_tiles = (R + kTile - 1) / kTile;
  const bool avx512 = has_avx512_tiles(sizeof(U));
  parallel_for(0, outer * row_tiles, std::max<int64_t>(1, kGrainElements / (kTile * C)), [&](int64_t b, int64_t e) {
    alignas(64) U tile[kTile][kTile];  // tile[c][r]: a source line per c
    for (int64_t t = b; t < e; ++t) {
      char* dp = g.base[0];
      const char* sp = g.base[1];
      for (int64_t rem = t / row_tiles, d = nd - 3; d >= 0; --d) {
        const int64_t i = rem % g.sizes[d];
        rem /= g.sizes[d];
        dp += i * g.strides[0][d];
        sp += i * g.strides[1][d];
      }
      const int64_t r0 = (t % row_tiles) * kTile, nr = std::min(kTile, R - r0);
      for (int64_t c0 = 0; c0 < C; c0 += kTile) {
        const int64_t nc = std::min(kTile, C - c0);
        if (avx512 && nr == kTile && nc == kTile) {  // a full 16-bit tile in registers
          detail::transpose_tile_16bit_avx512(reinterpret_cast<const uint16_t*>(sp + r0 * 2 + c0 * s_col), s_col / 2,
                                              reinterpret_cast<uint16_t*>(dp + r0 * d_row + c0 * 2), d_row / 2);
          continue;
        }
        for (int64_t c = 0; c < nc; ++c)
          std::memcpy(tile[c], sp + r0 * static_cast<int64_t>(sizeof(U)) + (c0 + c) * s_col, nr * sizeof(U));
        for (int64_t r = 0; r < nr; ++r) {
          char* row = dp + (r0 + r) * d_row + c0 * static_cast<int64_t>(sizeof(U));
          for (int64_t c = 0; c < nc; ++c)
            std::memcpy(row + c * static_cast<int64_t>(sizeof(U)), &tile[c][r], sizeof(U));
        }
      }
    }
  });
}

}  // namespace

void copy_into(const Tensor& dst, const Tensor& src) {
  TC_CHECK(dst.device().is_cpu() && src.device().is_cpu(), "copy_", "a CPU copy got tensors on ", dst.device(), " and ",
           src.device());
  Shape ss = broadcast_strides(src, dst.sizes(), "copy_");
  Shape ds = dst.strides();
  if (dst.dtype() == src.dtype()) {
    // Same dtype: move bytes, exact for every type (int64 included).
    const size_t es = element_size(dst.dtype());
    std::array<Operand, 2> ops{Operand{static_cast<char*>(dst.raw_data()), dst.dtype(), &ds},
                               Operand{static_cast<char*>(src.raw_data()), src.dtype(), &ss}};
    const RunGeometry<2> g = make_geometry<2>(ops, dst.sizes());
    if (g.numel > 0 && is_transpose(g, static_cast<int64_t>(es))) {
      switch (es) {
        case 1:
          return copy_transposed<uint8_t>(g);
        case 2:
          return copy_transposed<uint16_t>(g);
        case 4:
          return copy_transposed<uint32_t>(g);
        case 8:
          return copy_transposed<uint64_t>(g);
        default:
          break;  // (no other element size today)
      }
    }
    for_each_run<2>(ops, dst.sizes(), [es](char** p, const int64_t* st, int64_t n) {
      if (st[0] == static_cast<int64_t>(es) && st[1] == static_cast<int64_t>(es)) {
        std::memcpy(p[0], p[1], n * es);
        return;
      }
      auto strided = [&]<class U>() {  // a constant size: each memcpy is one move, not a call
        for (int64_t i = 0; i < n; ++i) std::memcpy(p[0] + i * st[0], p[1] + i * st[1], sizeof(U));
      };
      switch (es) {
        case 1:
          strided.template operator()<uint8_t>();
          break;
        case 2:
          strided.template operator()<uint16_t>();
          break;
        case 4:
          strided.template operator()<uint32_t>();
          break;
        default:
          strided.template operator()<uint64_t>();
          break;
      }
    });
    return;
  }
  if (dst.is_contiguous() && src.is_contiguous() && dst.sizes() == src.sizes()) {
    const int64_t n = dst.numel();
    char* d = static_cast<char*>(dst.raw_data());
    const char* s = static_cast<const char*>(src.raw_data());
    const size_t des = element_size(dst.dtype()), ses = element_size(src.dtype());
    parallel_for(0, n, kGrainElements,
                 [&](int64_t b, int64_t e) { convert(s + b * ses, src.dtype(), d + b * des, dst.dtype(), e - b); });
    return;
  }
  if (is_float8(dst.dtype()) || is_float8(src.dtype())) {
    // An 8-bit float converts between contiguous buffers only (convert()): a strided or
    // broadcast operand is first copied contiguous in its own dtype.
    const Tensor s = make_tensor(dst.sizes(), src.dtype(), dst.device());
    copy_into(s, src);
    const Tensor d = dst.is_contiguous() ? dst : make_tensor(dst.sizes(), dst.dtype(), dst.device());
    copy_into(d, s);
    if (!d.is_same(dst)) copy_into(dst, d);
    return;
  }
  const bool dbl = computes_in_double(dst.dtype()) || computes_in_double(src.dtype());
  auto body = [&]<class C>() {
    map_blocks<C, 1>(dst, {src}, "copy_",
                     [](int64_t n, const C* const* in, C* o) { std::memcpy(o, in[0], n * sizeof(C)); });
  };
  if (dbl)
    body.template operator()<double>();
  else
    body.template operator()<float>();
}

Tensor as_contiguous(const Tensor& t) {
  if (t.is_contiguous()) return t;
  Tensor out = make_tensor(t.sizes(), t.dtype(), t.device());
  copy_into(out, t);
  return out;
}

void fill_zero(const Tensor& t) {
  if (t.numel() == 0) return;
  if (!t.is_contiguous()) {
    const Tensor zero = make_tensor({}, t.dtype(), t.device());
    std::memset(zero.raw_data(), 0, element_size(t.dtype()));
    copy_into(t, zero);
    return;
  }
  // All-zero bits are +0 in every dtype (E8M0's are 2^-127, which is also what 0 converts to).
  char* base = static_cast<char*>(t.raw_data());
  const int64_t es = static_cast<int64_t>(element_size(t.dtype()));
  parallel_for(0, t.numel(), kGrainElements * 4,
               [&](int64_t b, int64_t e) { std::memset(base + b * es, 0, static_cast<size_t>((e - b) * es)); });
}

}  // namespace tc::cpu
