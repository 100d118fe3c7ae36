// dropout: inverted dropout with a mask drawn from the seeded global generator.
//
// One 64-bit key is taken from the generator per call; element i is kept when the
// counter-based hash splitmix64(key, i) maps to u >= p. The mask thus depends only on
// the seed and the element index, never on the thread count, and the kernel parallelizes.
#include "core/random.h"
#include "ops/pointwise.h"
#include "ops/row_io.h"
#include "tensorcast/autograd.h"
#include "ops/impl.h"

namespace tc::impl {

namespace {

// Uniform in [0, 1) from the i-th output of the splitmix64 stream keyed by `key`.
inline double hash_uniform(uint64_t key, uint64_t i) {
  uint64_t z = key + (i + 1) * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return static_cast<double>(z >> 11) * 0x1p-53;
}

// out = mask ? v * scale : 0 (an exact zero even for inf/NaN inputs, and for p = 1), in one
// pass over contiguous v and the uint8 mask; 16-bit values are scaled in float32, rounded once.
Tensor apply_mask(const Tensor& v_in, const Tensor& mask, double scale) {
  const Tensor v = v_in.detach().contiguous();
  Tensor out = make_tensor(v.sizes(), v.dtype(), v.device());
  const uint8_t* m = mask.data_ptr<uint8_t>();
  const DType dt = v.dtype();
  ops::dispatch_compute(dt, [&]<class C>() {
    const C s = static_cast<C>(scale);
    parallel_for(0, v.numel(), cpu::kGrainElements, [&](int64_t b, int64_t e) {
      alignas(64) C buf[cpu::kBlock];
      for (int64_t i = b; i < e; i += cpu::kBlock) {
        const int64_t n = std::min(cpu::kBlock, e - i);
        const C* x = ops::load_row<C>(v.raw_data(), dt, i, n, buf);
        for (int64_t j = 0; j < n; ++j) buf[j] = m[i + j] ? x[j] * s : C(0);
        ops::store_row<C>(buf, out.raw_data(), dt, i, n);
      }
    });
  });
  return out;
}

}  // namespace

Tensor dropout(const Tensor& x, double p, bool training) {
  constexpr const char* op = "dropout";
  TC_CHECK(x.defined(), op, "got an undefined input");
  TC_CHECK(p >= 0.0 && p <= 1.0, op, "dropout probability has to be between 0 and 1, but got ", p);
  if (!training || p == 0.0) return x;
  TC_CHECK(is_floating(x.dtype()), op, "expected a floating input, got ", dtype_name(x.dtype()), " of shape ",
           shape_str(x.sizes()));
  uint64_t key;
  {
    Generator& gen = default_generator();
    std::lock_guard<std::mutex> lock(gen.mutex);
    key = gen.engine();
  }
  // The mask is uint8 in x's logical (row-major) order, so it broadcasts onto any layout of x.
  Tensor mask = make_tensor(x.sizes(), kUInt8, x.device());
  uint8_t* m = mask.data_ptr<uint8_t>();
  parallel_for(0, mask.numel(), cpu::kGrainElements, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) m[i] = hash_uniform(key, static_cast<uint64_t>(i)) >= p ? 1 : 0;
  });
  const double scale = p == 1.0 ? 0.0 : 1.0 / (1.0 - p);
  Tensor out = apply_mask(x, mask, scale);
  return autograd::record(op, out, {x}, [mask, scale](const Tensor& g, const std::vector<bool>&) {
    return std::vector<Tensor>{apply_mask(g, mask, scale)};
  });
}

}  // namespace tc::impl
