// Slow test: float -> bf16 and float -> fp16 on every available path against the scalar
// reference (half.h) for a bounded, strided subset of all 2^32 float bit patterns: every
// 7th pattern (613,566,757 inputs; every exponent, sign and NaN payload region is hit).
// The full 2^32 run is tools/convert_check (see docs/numerics.md, "Conversions").
// TC_CONVERT_STRIDE=<n> in the environment changes the stride (1 = all 2^32 patterns).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "tensorcast/convert.h"
#include "tensorcast/half.h"

namespace tc {
namespace {

uint64_t stride_from_env() {
  const char* s = std::getenv("TC_CONVERT_STRIDE");
  if (s == nullptr || *s == '\0') return 7;
  const uint64_t v = std::strtoull(s, nullptr, 0);
  return v == 0 ? 7 : v;
}

TEST(SlowConvertExhaustive, StridedFloatPatternsOnEveryPath) {
  const uint64_t stride = stride_from_env();
  const uint64_t count = ((uint64_t{1} << 32) + stride - 1) / stride;
  std::vector<ConvertPath> paths;
  for (ConvertPath p : {ConvertPath::kPortable, ConvertPath::kF16C, ConvertPath::kAVX512, ConvertPath::kAVX512BF16}) {
    if (convert_path_available(p))
      paths.push_back(p);
    else
      std::printf("conversion path '%s' is not available on this CPU: not checked\n",
                  std::string(convert_path_name(p)).c_str());
  }

  constexpr uint64_t kChunk = 1 << 16;
  const uint64_t chunks = (count + kChunk - 1) / kChunk;
  std::atomic<uint64_t> next{0};
  std::vector<std::atomic<uint64_t>> bad(2 * paths.size());
  std::mutex mu;
  std::string examples;
  int n_examples = 0;

  auto worker = [&] {
    std::vector<float> in(kChunk);
    std::vector<uint16_t> ref_b(kChunk), ref_h(kChunk);
    std::vector<BFloat16> out_b(kChunk);
    std::vector<Half> out_h(kChunk);
    for (uint64_t c; (c = next.fetch_add(1)) < chunks;) {
      const uint64_t first = c * kChunk;
      const int64_t n = static_cast<int64_t>(std::min(kChunk, count - first));
      for (int64_t i = 0; i < n; ++i) {
        in[i] = std::bit_cast<float>(static_cast<uint32_t>((first + i) * stride));
        ref_b[i] = detail::float_to_bf16_bits(in[i]);
        ref_h[i] = detail::float_to_half_bits(in[i]);
      }
      for (size_t p = 0; p < paths.size(); ++p) {
        float_to_bf16(in.data(), out_b.data(), n, paths[p]);
        float_to_half(in.data(), out_h.data(), n, paths[p]);
        for (int64_t i = 0; i < n; ++i) {
          for (int fmt = 0; fmt < 2; ++fmt) {
            const uint16_t got = fmt == 0 ? out_b[i].bits : out_h[i].bits;
            const uint16_t want = fmt == 0 ? ref_b[i] : ref_h[i];
            if (got == want) continue;
            ++bad[2 * p + fmt];
            std::lock_guard<std::mutex> lock(mu);
            if (n_examples++ < 10) {
              char buf[160];
              std::snprintf(buf, sizeof buf, "\n  %s on %s: 0x%08x -> 0x%04x, reference 0x%04x",
                            fmt == 0 ? "float->bf16" : "float->fp16", std::string(convert_path_name(paths[p])).c_str(),
                            std::bit_cast<uint32_t>(in[i]), got, want);
              examples += buf;
            }
          }
        }
      }
    }
  };
  const unsigned threads = std::clamp(std::thread::hardware_concurrency(), 1u, 8u);
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < threads; ++t) pool.emplace_back(worker);
  for (auto& t : pool) t.join();

  for (size_t p = 0; p < paths.size(); ++p) {
    for (int fmt = 0; fmt < 2; ++fmt) {
      EXPECT_EQ(bad[2 * p + fmt].load(), 0u)
          << (fmt == 0 ? "float->bf16" : "float->fp16") << " on path " << convert_path_name(paths[p]) << ", " << count
          << " inputs (stride " << stride << ")";
      if (bad[2 * p + fmt].load() == 0)
        std::printf("%s: all %llu inputs agree on path %s\n", fmt == 0 ? "float->bf16" : "float->fp16",
                    static_cast<unsigned long long>(count), std::string(convert_path_name(paths[p])).c_str());
    }
  }
  EXPECT_TRUE(examples.empty()) << "first mismatches:" << examples;
  std::printf("%llu float patterns (stride %llu) checked on %zu paths, %u threads\n",
              static_cast<unsigned long long>(count), static_cast<unsigned long long>(stride), paths.size(), threads);
}

}  // namespace
}  // namespace tc
