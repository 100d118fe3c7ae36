// Defines the GradScaler's CPU kernels: the fused multi-tensor non-finite check + unscale,
// its read-only variant, and the scale update (see amp_kernels.h).
#include "backend/cpu/loops/amp_kernels.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <string>
#include <type_traits>

#include "backend/cpu/loops/elementwise.h"
#include "tensorcast/convert.h"
#include "tensorcast/parallel.h"

namespace tc::cpu {
namespace {

constexpr const char* kOp = "GradScaler";
// Below this many elements in all, one thread does the whole pass (a fork costs more).
constexpr int64_t kGrain = 1 << 16;
// Stack block for 16-bit data: converted to float32, scaled, converted back.
constexpr int64_t kHalfBlock = 1024;

// Exponent-bits view of each storage type: all exponent bits set means inf or NaN.
template <class T>
struct Bits;
template <>
struct Bits<float> {
  using U = uint32_t;
  static constexpr U kExp = 0x7f800000u;
};
template <>
struct Bits<double> {
  using U = uint64_t;
  static constexpr U kExp = 0x7ff0000000000000ull;
};
template <>
struct Bits<Half> {
  using U = uint16_t;
  static constexpr U kExp = 0x7c00u;
};
template <>
struct Bits<BFloat16> {
  using U = uint16_t;
  static constexpr U kExp = 0x7f80u;
};

// 1 when the exponent bits are all ones (inf/NaN), else 0. OR-ing these over a loop is
// branch-free and vectorizes with baseline SSE2 compares (an unsigned max would need SSE4.1).
template <class T>
constexpr typename Bits<T>::U non_finite_bit(typename Bits<T>::U u) {
  return static_cast<typename Bits<T>::U>((u & Bits<T>::kExp) == Bits<T>::kExp);
}

template <class T>
bool any_non_finite(const T* p, int64_t n) {
  using U = typename Bits<T>::U;
  const U* u = reinterpret_cast<const U*>(p);  // T is a plain bit container of size U
  U acc = 0;
  for (int64_t i = 0; i < n; ++i) acc |= non_finite_bit<T>(u[i]);
  return acc != 0;
}

// 32/64-bit floats: check and scale in one sweep over memory.
template <class T>
bool check_and_scale_wide(T* p, int64_t n, T s) {
  using U = typename Bits<T>::U;
  U acc = 0;
  for (int64_t i = 0; i < n; ++i) {
    const T v = p[i];
    acc |= non_finite_bit<T>(std::bit_cast<U>(v));
    p[i] = v * s;
  }
  return acc != 0;
}

// 16-bit floats: the check reads raw bits; scaling goes through float32 in stack blocks
// with the library's bulk conversions (round to nearest even, as static_cast<scalar_t>).
template <class T>
bool check_and_scale_half(T* p, int64_t n, float s) {
  alignas(64) float buf[kHalfBlock];
  bool bad = false;
  for (int64_t j = 0; j < n; j += kHalfBlock) {
    const int64_t m = std::min(kHalfBlock, n - j);
    T* q = p + j;
    bad |= any_non_finite(q, m);
    if constexpr (std::is_same_v<T, BFloat16>)
      bf16_to_float(q, buf, m);
    else
      half_to_float(q, buf, m);
    for (int64_t i = 0; i < m; ++i) buf[i] *= s;
    if constexpr (std::is_same_v<T, BFloat16>)
      float_to_bf16(buf, q, m);
    else
      float_to_half(buf, q, m);
  }
  return bad;
}

template <class T>
bool check_segment(T* p, int64_t n, bool write, float inv_scale) {
  if (!write) return any_non_finite(p, n);
  if constexpr (std::is_same_v<T, float>)
    return check_and_scale_wide<float>(p, n, inv_scale);
  else if constexpr (std::is_same_v<T, double>)
    return check_and_scale_wide<double>(p, n, inv_scale);
  else
    return check_and_scale_half<T>(p, n, inv_scale);
}

bool check_span(char* base, DType dt, int64_t begin, int64_t n, bool write, float inv_scale) {
  return dispatch_floating(
      dt, kOp, [&]<class T>() { return check_segment<T>(reinterpret_cast<T*>(base) + begin, n, write, inv_scale); });
}

void check_impl(const std::vector<Tensor>& grads, const Tensor& found_inf, const Tensor& inv_scale) {
  TC_CHECK(found_inf.defined() && found_inf.dtype() == kFloat32 && found_inf.numel() == 1, kOp,
           "found_inf must be a one-element float32 tensor");
  float s = 1.0f;
  if (inv_scale.defined()) {
    TC_CHECK(inv_scale.dtype() == kFloat32 && inv_scale.numel() == 1, kOp,
             "inv_scale must be a one-element float32 tensor, got ", dtype_name(inv_scale.dtype()), " of shape ",
             shape_str(inv_scale.sizes()));
    s = *inv_scale.data_ptr<float>();
  }
  const bool write = s != 1.0f;  // PyTorch: inv_scale == 1 leaves the values untouched

  // Contiguous tensors are laid end to end in one index space split evenly across the
  // threads; the rare strided gradient goes through a contiguous copy.
  std::vector<Tensor> flat;
  std::vector<std::pair<Tensor, Tensor>> copy_back;
  flat.reserve(grads.size());
  for (const Tensor& g : grads) {
    TC_CHECK(g.defined(), kOp, "undefined gradient tensor");
    TC_CHECK(g.device().type == kCPU, kOp, "gradients on ", g.device(), " are not supported by this build");
    TC_CHECK(g.is_floating_point(), kOp, "gradients must be floating, got ", dtype_name(g.dtype()));
    if (g.numel() == 0) continue;
    if (g.is_contiguous()) {
      flat.push_back(g);
    } else {
      Tensor c = as_contiguous(g);
      flat.push_back(c);
      if (write) copy_back.emplace_back(g, c);
    }
  }
  std::vector<int64_t> start(flat.size() + 1, 0);
  for (size_t k = 0; k < flat.size(); ++k) start[k + 1] = start[k] + flat[k].numel();
  const int64_t total = start.back();

  std::atomic<bool> found{false};
  parallel_for(0, total, kGrain, [&](int64_t b, int64_t e) {
    size_t k = std::upper_bound(start.begin(), start.end(), b) - start.begin() - 1;
    bool bad = false;
    for (int64_t i = b; i < e; ++k) {
      const int64_t off = i - start[k];
      const int64_t n = std::min(e, start[k + 1]) - i;
      bad |= check_span(static_cast<char*>(flat[k].raw_data()), flat[k].dtype(), off, n, write, s);
      i += n;
    }
    if (bad) found.store(true, std::memory_order_relaxed);
  });
  for (auto& [g, c] : copy_back) copy_into(g, c);
  if (found.load()) *found_inf.data_ptr<float>() = 1.0f;
}

}  // namespace

void amp_non_finite_check_and_unscale_(const std::vector<Tensor>& grads, const Tensor& found_inf,
                                       const Tensor& inv_scale) {
  TC_CHECK(inv_scale.defined(), kOp, "inv_scale is undefined");
  check_impl(grads, found_inf, inv_scale);
  for (const Tensor& g : grads) increment_version(g);
  increment_version(found_inf);
}

void amp_non_finite_check(const std::vector<Tensor>& grads, const Tensor& found_inf) {
  check_impl(grads, found_inf, Tensor());
}

void non_finite_check_and_unscale(const std::vector<Tensor>& grads, const Tensor& found_inf, const Tensor& inv_scale) {
  if (inv_scale.defined())
    amp_non_finite_check_and_unscale_(grads, found_inf, inv_scale);
  else
    amp_non_finite_check(grads, found_inf);
}

bool has_non_finite(const Tensor& t) {
  Tensor f = make_tensor({}, kFloat32);
  *f.data_ptr<float>() = 0.0f;
  check_impl({t}, f, Tensor());
  return *f.data_ptr<float>() != 0.0f;
}

}  // namespace tc::cpu
