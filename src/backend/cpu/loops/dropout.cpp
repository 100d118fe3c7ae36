// dropout's kernels: the hashed keep mask and the fused mask-and-scale pass.
#include "backend/cpu/loops/dropout.h"

#include "backend/cpu/loops/row_io.h"

namespace tc::cpu {

namespace {

// Uniform in [0, 1) from the i-th output of the splitmix64 stream keyed by `key`.
inline double hash_uniform(uint64_t key, uint64_t i) {
  uint64_t z = key + (i + 1) * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return static_cast<double>(z >> 11) * 0x1p-53;
}

}  // namespace

void dropout_mask(const Tensor& mask, uint64_t key, double p) {
  uint8_t* m = mask.data_ptr<uint8_t>();
  parallel_for(0, mask.numel(), kGrainElements, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) m[i] = hash_uniform(key, static_cast<uint64_t>(i)) >= p ? 1 : 0;
  });
}

void dropout_apply(const Tensor& out, const Tensor& v, const Tensor& mask, double scale) {
  const uint8_t* m = mask.data_ptr<uint8_t>();
  const DType dt = v.dtype();
  dispatch_compute(dt, [&]<class C>() {
    const C s = static_cast<C>(scale);
    parallel_for(0, v.numel(), kGrainElements, [&](int64_t b, int64_t e) {
      alignas(64) C buf[kBlock];
      for (int64_t i = b; i < e; i += kBlock) {
        const int64_t n = std::min(kBlock, e - i);
        const C* x = load_row<C>(v.raw_data(), dt, i, n, buf);
        for (int64_t j = 0; j < n; ++j) buf[j] = m[i + j] ? x[j] * s : C(0);
        store_row<C>(buf, out.raw_data(), dt, i, n);
      }
    });
  });
}

}  // namespace tc::cpu
