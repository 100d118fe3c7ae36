// fill: the CPU's kernel for Tensor::fill_ (zeros, ones, full and every gradient buffer).
#include <algorithm>
#include <cstring>

#include "backend/cpu/loops/elementwise.h"
#include "tensorcast/factories.h"
#include "tensorcast/parallel.h"

namespace tc::cpu {

void fill(const Tensor& t, double v) {
  double value = v;
  const Tensor scalar = from_blob(&value, {}, kFloat64);
  if (!t.is_contiguous() || t.numel() == 0) {
    copy_into(t, scalar);
    return;
  }
  // Contiguous (zeros, ones, full, gradient buffers): convert the value once, then write
  // its bytes in parallel; memset for an all-zero pattern.
  alignas(8) unsigned char pattern[8] = {};
  const size_t es = element_size(t.dtype());
  copy_into(from_blob(pattern, {}, t.dtype()), scalar);
  char* base = static_cast<char*>(t.raw_data());
  const bool zero = std::all_of(pattern, pattern + es, [](unsigned char c) { return c == 0; });
  parallel_for(0, t.numel(), kGrainElements * 4, [&](int64_t b, int64_t e) {
    char* p = base + b * static_cast<int64_t>(es);
    const size_t n = static_cast<size_t>(e - b);
    auto fill_as = [&]<class U>() {
      U u;
      std::memcpy(&u, pattern, sizeof u);
      std::fill_n(reinterpret_cast<U*>(p), n, u);
    };
    if (zero)
      std::memset(p, 0, n * es);
    else if (es == 1)
      fill_as.template operator()<uint8_t>();
    else if (es == 2)
      fill_as.template operator()<uint16_t>();
    else if (es == 4)
      fill_as.template operator()<uint32_t>();
    else
      fill_as.template operator()<uint64_t>();
  });
}

}  // namespace tc::cpu
