// tc_convert_check: checks float -> bfloat16 and float -> float16 on every conversion path
// the CPU has against the scalar reference in half.h, for all 2^32 float bit patterns
// (or a sub-range / stride of them), and with --bench measures each path's throughput.
//
//   tc_convert_check                          all 2^32 patterns, every available path
//   tc_convert_check --stride=7               every 7th pattern (what the slow test runs)
//   tc_convert_check --start=0x7f000000 --end=0x80000000
//   tc_convert_check --bench [--n=1048576]    GB/s per path and direction
//
// Exit status: 0 when every path agrees on every input checked, 1 on any mismatch,
// 2 on bad arguments.
#include <algorithm>
#include <atomic>
#include <bit>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "tensorcast/convert.h"
#include "tensorcast/half.h"

namespace {

using tc::ConvertPath;
using Clock = std::chrono::steady_clock;

constexpr ConvertPath kPaths[] = {ConvertPath::kPortable, ConvertPath::kF16C, ConvertPath::kAVX512,
                                  ConvertPath::kAVX512BF16};
constexpr int kNumPaths = 4;
constexpr const char* kFormat[2] = {"float->bf16", "float->fp16"};

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

struct Options {
  uint64_t start = 0, end = uint64_t{1} << 32, stride = 1;
  unsigned threads = 0;
  bool bench = false;
  int64_t bench_n = 1 << 20;
};

void usage() {
  std::fprintf(stderr,
               "usage: tc_convert_check [--start=N] [--end=N] [--stride=N] [--threads=N]\n"
               "       tc_convert_check --bench [--n=N]\n"
               "Checks float->bf16 and float->fp16 on every available path against the scalar\n"
               "reference for the float bit patterns start, start+stride, ... < end\n"
               "(default: all 2^32). Numbers may be hex (0x...).\n");
}

bool parse_u64(std::string_view arg, std::string_view key, uint64_t& out) {
  if (arg.substr(0, key.size()) != key) return false;
  const std::string v(arg.substr(key.size()));
  char* endp = nullptr;
  out = std::strtoull(v.c_str(), &endp, 0);
  if (v.empty() || *endp != '\0') {
    std::fprintf(stderr, "tc_convert_check: bad number in '%s'\n", std::string(arg).c_str());
    std::exit(2);
  }
  return true;
}

// ---- exhaustive check ------------------------------------------------------------------

struct PathResult {
  std::atomic<uint64_t> mismatches{0};
  std::atomic<int64_t> nanos{0};
};

int run_check(const Options& o) {
  std::vector<ConvertPath> paths;
  for (ConvertPath p : kPaths)
    if (tc::convert_path_available(p)) paths.push_back(p);
  const uint64_t count = o.end > o.start ? (o.end - o.start + o.stride - 1) / o.stride : 0;
  const unsigned threads = o.threads ? o.threads : std::max(1u, std::thread::hardware_concurrency());
  std::printf("tc_convert_check: float patterns [0x%08llx, 0x%llx) stride %llu: %llu inputs, %u threads\n",
              static_cast<unsigned long long>(o.start), static_cast<unsigned long long>(o.end),
              static_cast<unsigned long long>(o.stride), static_cast<unsigned long long>(count), threads);
  std::printf("paths:");
  for (ConvertPath p : paths) std::printf(" %s", std::string(tc::convert_path_name(p)).c_str());
  std::printf("\n");
  std::fflush(stdout);

  PathResult results[2][kNumPaths];
  std::atomic<int64_t> ref_nanos{0};
  std::mutex print_mutex;
  int printed = 0;
  constexpr uint64_t kChunk = 1 << 16;
  const uint64_t chunks = (count + kChunk - 1) / kChunk;
  std::atomic<uint64_t> next{0};
  const auto t0 = Clock::now();

  auto worker = [&] {
    std::vector<float> in(kChunk);
    std::vector<uint16_t> ref_b(kChunk), ref_h(kChunk);
    std::vector<tc::BFloat16> out_b(kChunk);
    std::vector<tc::Half> out_h(kChunk);
    for (uint64_t c; (c = next.fetch_add(1)) < chunks;) {
      const uint64_t first = c * kChunk;
      const int64_t n = static_cast<int64_t>(std::min(kChunk, count - first));
      for (int64_t i = 0; i < n; ++i)
        in[i] = std::bit_cast<float>(static_cast<uint32_t>(o.start + (first + i) * o.stride));
      auto tr = Clock::now();
      for (int64_t i = 0; i < n; ++i) {
        ref_b[i] = tc::detail::float_to_bf16_bits(in[i]);
        ref_h[i] = tc::detail::float_to_half_bits(in[i]);
      }
      ref_nanos += std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - tr).count();
      for (size_t pi = 0; pi < paths.size(); ++pi) {
        const int slot = static_cast<int>(std::find(std::begin(kPaths), std::end(kPaths), paths[pi]) - kPaths);
        for (int fmt = 0; fmt < 2; ++fmt) {
          const auto tp = Clock::now();
          if (fmt == 0)
            tc::float_to_bf16(in.data(), out_b.data(), n, paths[pi]);
          else
            tc::float_to_half(in.data(), out_h.data(), n, paths[pi]);
          results[fmt][slot].nanos += std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - tp).count();
          const std::vector<uint16_t>& ref = fmt == 0 ? ref_b : ref_h;
          uint64_t bad = 0;
          for (int64_t i = 0; i < n; ++i) {
            const uint16_t got = fmt == 0 ? out_b[i].bits : out_h[i].bits;
            if (got == ref[i]) continue;
            ++bad;
            std::lock_guard<std::mutex> lock(print_mutex);
            if (printed++ < 20)
              std::printf("MISMATCH %s on %s: input 0x%08x -> 0x%04x, reference 0x%04x\n", kFormat[fmt],
                          std::string(tc::convert_path_name(paths[pi])).c_str(), std::bit_cast<uint32_t>(in[i]), got,
                          ref[i]);
          }
          results[fmt][slot].mismatches += bad;
        }
      }
    }
  };
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < threads; ++t) pool.emplace_back(worker);
  for (auto& t : pool) t.join();
  const double wall = seconds_since(t0);

  bool ok = true;
  for (int fmt = 0; fmt < 2; ++fmt) {
    for (ConvertPath p : paths) {
      const int slot = static_cast<int>(std::find(std::begin(kPaths), std::end(kPaths), p) - kPaths);
      const uint64_t bad = results[fmt][slot].mismatches;
      const double secs = static_cast<double>(results[fmt][slot].nanos.load()) * 1e-9;
      const std::string name(tc::convert_path_name(p));
      if (bad == 0) {
        std::printf("%s: all %llu inputs agree on path %s (%.2f s in the path)\n", kFormat[fmt],
                    static_cast<unsigned long long>(count), name.c_str(), secs);
      } else {
        ok = false;
        std::printf("%s: %llu of %llu inputs DIFFER on path %s\n", kFormat[fmt], static_cast<unsigned long long>(bad),
                    static_cast<unsigned long long>(count), name.c_str());
      }
    }
  }
  std::printf("reference: %.2f s; wall time: %.2f s on %u threads\n", static_cast<double>(ref_nanos.load()) * 1e-9,
              wall, threads);
  std::printf("%s\n", ok ? "OK" : "FAILED");
  return ok ? 0 : 1;
}

// ---- throughput ------------------------------------------------------------------------

// Best time of many short batches (~20 ms each): on a shared machine the best batch is
// the one that ran undisturbed.
template <class F>
double best_seconds_per_call(F&& f) {
  f();  // warm caches and page in the buffers
  int reps = 1;
  for (;;) {
    const auto t0 = Clock::now();
    for (int r = 0; r < reps; ++r) f();
    if (seconds_since(t0) > 0.02) break;
    reps *= 2;
  }
  double best = 1e30;
  for (int b = 0; b < 25; ++b) {
    const auto t0 = Clock::now();
    for (int r = 0; r < reps; ++r) f();
    best = std::min(best, seconds_since(t0) / reps);
  }
  return best;
}

int run_bench(const Options& o) {
  const int64_t n = o.bench_n;
  std::vector<float> src(static_cast<size_t>(n)), wide(static_cast<size_t>(n));
  std::vector<tc::BFloat16> b(static_cast<size_t>(n));
  std::vector<tc::Half> h(static_cast<size_t>(n));
  std::mt19937 rng(42);
  std::normal_distribution<float> dist(0.0f, 2.0f);  // activations/gradients-like values
  for (auto& x : src) x = dist(rng);
  tc::float_to_bf16(src.data(), b.data(), n, ConvertPath::kPortable);
  tc::float_to_half(src.data(), h.data(), n, ConvertPath::kPortable);
  const double bytes = static_cast<double>(n) * 6;  // 4 bytes read/written + 2 bytes
  std::printf("throughput, %lld elements (%.1f MB of float), GB/s counts bytes read + written (6 per element)\n",
              static_cast<long long>(n), static_cast<double>(n) * 4 / 1e6);
  std::printf("%-12s %12s %12s %12s %12s\n", "path", "f32->bf16", "f32->fp16", "bf16->f32", "fp16->f32");
  for (ConvertPath p : kPaths) {
    if (!tc::convert_path_available(p)) {
      std::printf("%-12s (not available on this CPU)\n", std::string(tc::convert_path_name(p)).c_str());
      continue;
    }
    const double t[4] = {
        best_seconds_per_call([&] { tc::float_to_bf16(src.data(), b.data(), n, p); }),
        best_seconds_per_call([&] { tc::float_to_half(src.data(), h.data(), n, p); }),
        best_seconds_per_call([&] { tc::bf16_to_float(b.data(), wide.data(), n, p); }),
        best_seconds_per_call([&] { tc::half_to_float(h.data(), wide.data(), n, p); }),
    };
    std::printf("%-12s", std::string(tc::convert_path_name(p)).c_str());
    for (double s : t) std::printf(" %12.1f", bytes / s / 1e9);
    std::printf("\n");
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a(argv[i]);
    uint64_t v = 0;
    if (a == "--bench")
      o.bench = true;
    else if (a == "--help" || a == "-h")
      return usage(), 0;
    else if (parse_u64(a, "--start=", v))
      o.start = v;
    else if (parse_u64(a, "--end=", v))
      o.end = v;
    else if (parse_u64(a, "--stride=", v))
      o.stride = v;
    else if (parse_u64(a, "--threads=", v))
      o.threads = static_cast<unsigned>(v);
    else if (parse_u64(a, "--n=", v))
      o.bench_n = static_cast<int64_t>(v);
    else {
      std::fprintf(stderr, "tc_convert_check: unknown argument '%s'\n", argv[i]);
      usage();
      return 2;
    }
  }
  if (o.stride == 0 || o.end > (uint64_t{1} << 32) || o.start > o.end || o.bench_n <= 0) {
    std::fprintf(stderr, "tc_convert_check: need stride >= 1, start <= end <= 2^32, n >= 1\n");
    return 2;
  }
  return o.bench ? run_bench(o) : run_check(o);
}
