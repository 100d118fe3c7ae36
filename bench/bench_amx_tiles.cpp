// What a tile product costs in the loop orders a 16-bit product can take on AMX, against
// the same products with every tile in L1: the ceiling of the products-by-a-weight kernel
// (backend/cpu/x86/amx/matmul_amx_kernel.cpp) and of the variants tried against it. One thread
// (pin it: `taskset -c 0`), one process, the loops alternating round by round, since on a
// shared host (a cloud guest) the AMX unit's rate can drift several-fold within minutes
// (another tenant's work): the ratio of each round's loop to that round's L1 rate
// is the measure, its median over the rounds the figure. Plain C++ and intrinsics, no
// library: a study of the hardware, not of tensorcast's code paths (bench_amx_ab times
// those).
//
//   bench_amx_tiles [ROUNDS]    (default 41)
//
// Every loop computes c = a b for a of 512 rows (a thread's share of 1024) by k terms and b
// of n columns, in 32 x 32 blocks of four accumulator tiles, two a and two b tiles loaded
// per four products (amx_tiles.h's block_products); b is packed as the kernel packs it
// (16-column tiles of 32-term chunks, contiguous). The loops:
//   kernel      the kernel's order: columns in passes whose b tiles (1 MiB) stay in L2, rows
//               outer, each block's whole sum at once; a's 32 rows read in place (rows k
//               apart), b's tiles from L2
//   + epilogue, c in L2   the same with the kernel's epilogue: each finished block's sums plus a
//               bias, rounded to bfloat16 and stored into c (rows n apart), 32 rows spread
//               over the next block's chunks; c written again by every run (in L2 where
//               it fits: 1 MiB for n = 1024)
//   + epilogue  the same with c rotating among 8 copies, so that it leaves L2 between runs
//               as a layer's output does (its stores miss)
//   slabs       sums in slabs of 1024 terms outside the rows, partial sums in float32 (a
//               pass as wide as 1 MiB of one slab's tiles): a's slab read once per pass
//   slabs, a packed   the same with a copied to contiguous tiles first (copy not timed)
//   b prefetched      the kernel's order with the next chunks' b tiles prefetched into L1
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <x86intrin.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

// Its own few tile helpers rather than amx_tiles.h's, which need the whole file compiled for
// AMX: here only these functions are, so that main runs on any x86-64 CPU and says so.
#define TC_AMX __attribute__((target("avx512f,avx512bw,avx512bf16,amx-tile,amx-bf16")))

namespace {

constexpr int64_t kRows = 512;  // a thread's share of 1024 rows
constexpr int64_t kTileWords = 256;
constexpr int64_t kPassBytes = int64_t{1} << 20;
constexpr int64_t kCopies = 8;  // of c

struct alignas(64) TileConfig {
  uint8_t palette, start_row, reserved[14];
  uint16_t colsb[16];
  uint8_t rows[16];
};

bool has_amx() {
  unsigned a, b, c, d;
  __asm__("cpuid" : "=a"(a), "=b"(b), "=c"(c), "=d"(d) : "a"(7), "c"(0));
  const bool amx = (d >> 22 & 1) && (d >> 24 & 1);  // AMX-BF16, AMX-TILE
  constexpr long kReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
  return amx && syscall(SYS_arch_prctl, kReqXcompPerm, kXfeatureXtiledata) == 0;
}

TC_AMX void configure() {
  static TileConfig cfg;
  cfg.palette = 1;
  for (int t = 0; t < 8; ++t) {
    cfg.colsb[t] = 64;
    cfg.rows[t] = 16;
  }
  _tile_loadconfig(&cfg);
}

TC_AMX void release() { _tile_release(); }

TC_AMX inline void products4(const void* a0, const void* a1, int64_t lda, const void* b0, const void* b1) {
  _tile_loadd(4, a0, lda);
  _tile_loadd(6, b0, 64);
  _tile_dpbf16ps(0, 4, 6);
  _tile_loadd(7, b1, 64);
  _tile_dpbf16ps(1, 4, 7);
  _tile_loadd(5, a1, lda);
  _tile_dpbf16ps(2, 5, 6);
  _tile_dpbf16ps(3, 5, 7);
}
TC_AMX inline void zero4() {
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
}
TC_AMX inline void load4(const float* c) {  // a 32 x 32 block of floats, rows 32 apart
  _tile_loadd(0, c, 128);
  _tile_loadd(1, c + 16, 128);
  _tile_loadd(2, c + 512, 128);
  _tile_loadd(3, c + 528, 128);
}
TC_AMX inline void store4(float* c) {
  _tile_stored(0, c, 128);
  _tile_stored(1, c + 16, 128);
  _tile_stored(2, c + 512, 128);
  _tile_stored(3, c + 528, 128);
}

struct Problem {
  int64_t k, n;
  std::vector<uint16_t> a, a_tiles, c;  // a row-major; a as contiguous tiles; bfloat16 c
  std::vector<uint32_t> b;              // packed: tile (j, t) at (j k / 32 + t) 256 words
  std::vector<float> partial, acc, bias;
  int64_t chunks() const { return k / 32; }
  int64_t pass(int64_t terms) const { return std::min<int64_t>(n, kPassBytes / 2 / terms / 32 * 32); }
};

Problem make(int64_t k, int64_t n) {
  Problem p{k, n, {}, {}, {}, {}, {}, {}, {}};
  p.a.resize(kRows * k + 64);
  for (size_t i = 0; i < p.a.size(); ++i) p.a[i] = static_cast<uint16_t>(0x3f80 + (i * 7 & 0x3f));  // 1.0-1.5
  p.a_tiles.resize(p.a.size());
  for (int64_t i = 0; i < kRows; i += 16)  // tile (i / 16, t): rows i.., terms 32 t.., contiguous
    for (int64_t t = 0; t < p.chunks(); ++t)
      for (int64_t r = 0; r < 16; ++r)
        std::memcpy(&p.a_tiles[((i / 16) * p.chunks() + t) * 512 + r * 32], &p.a[(i + r) * k + t * 32], 64);
  p.b.assign(k * n / 2 + 64, 0x3c003c00u);  // pairs of 2^-7
  p.c.assign(kCopies * kRows * n + 64, 0);
  p.partial.assign(kRows * n + 64, 0.f);
  p.acc.assign(2 * 1024 + 16, 0.f);
  p.bias.assign(n + 16, 0.5f);
  return p;
}

template <class T>
T* aligned(std::vector<T>& v) {
  return reinterpret_cast<T*>((reinterpret_cast<uintptr_t>(v.data()) + 63) & ~uintptr_t{63});
}

// The products with every operand in L1 (a: 32 rows of 256 terms, b: 16 KiB), as many as
// the problem has: the peak the other loops are measured against.
TC_AMX int64_t l1_only(Problem& p) {
  const uint16_t* a = aligned(p.a);
  const uint32_t* b = aligned(p.b);
  float* acc = aligned(p.acc);
  const int64_t blocks = kRows * p.n / 1024 * p.chunks() / 8;
  for (int64_t it = 0; it < blocks; ++it) {
    zero4();
    for (int64_t t = 0; t < 8; ++t)
      products4(a + t * 32, a + 16 * 256 + t * 32, 512, b + t * kTileWords, b + (8 + t) * kTileWords);
    store4(acc);
  }
  return blocks * 32;
}

// c's finished block (32 rows from acc) plus the bias, rounded, into c: rows [r0, r1).
TC_AMX void epilogue(const float* acc, const float* bias, uint16_t* c, int64_t ldc, int64_t r0, int64_t r1) {
  const __m512 lo_b = _mm512_loadu_ps(bias), hi_b = _mm512_loadu_ps(bias + 16);
  for (int64_t r = r0; r < r1; ++r) {
    const __m512 lo = _mm512_add_ps(_mm512_load_ps(acc + r * 32), lo_b);
    const __m512 hi = _mm512_add_ps(_mm512_load_ps(acc + r * 32 + 16), hi_b);
    _mm512_storeu_si512(c + r * ldc, (__m512i)_mm512_cvtne2ps_pbh(hi, lo));
  }
}

TC_AMX void prefetch_tile(const uint32_t* t) {
  for (int r = 0; r < 16; ++r) _mm_prefetch(reinterpret_cast<const char*>(t + r * 16), _MM_HINT_T0);
}

// The kernel's order; with the epilogue (into the same c each run, or into the next of
// kCopies), or b's tiles two chunks ahead prefetched.
TC_AMX int64_t kernel_order(Problem& p, bool with_epilogue, bool prefetch_b, bool rotate_c) {
  const uint16_t* a = aligned(p.a);
  const uint32_t* b = aligned(p.b);
  float* acc = aligned(p.acc);
  static int64_t copy = 0;
  copy = rotate_c ? (copy + 1) % kCopies : 0;
  uint16_t* c = aligned(p.c) + copy * kRows * p.n;
  const int64_t k = p.k, chunks = p.chunks(), width = p.pass(k), per_chunk = (32 + chunks - 1) / chunks;
  int64_t products = 0, done_i = -1, done_j = 0, half = 0;
  for (int64_t p0 = 0; p0 < p.n; p0 += width)
    for (int64_t i = 0; i < kRows; i += 32)
      for (int64_t j = p0; j < std::min(p.n, p0 + width); j += 32) {
        const uint32_t* b0 = b + j / 16 * chunks * kTileWords;
        const uint32_t* b1 = b0 + chunks * kTileWords;
        zero4();
        for (int64_t t = 0; t < chunks; ++t) {
          if (prefetch_b) {  // (past the block's own tiles: the next tiles in memory)
            prefetch_tile(b0 + (t + 2) * kTileWords);
            prefetch_tile(b1 + (t + 2) * kTileWords);
          }
          products4(a + i * k + t * 32, a + (i + 16) * k + t * 32, k * 2, b0 + t * kTileWords, b1 + t * kTileWords);
          if (with_epilogue && done_i >= 0 && t * per_chunk < 32)
            epilogue(acc + (half ^ 1) * 1024, aligned(p.bias) + done_j, c + done_i * p.n + done_j, p.n, t * per_chunk,
                     std::min<int64_t>(32, (t + 1) * per_chunk));
        }
        store4(acc + half * 1024);
        done_i = i;
        done_j = j;
        half ^= 1;
        products += 4 * chunks;
      }
  return products;
}

// Slabs of `slab` terms outside the rows, partial sums of all rows in float32.
TC_AMX int64_t slabs(Problem& p, int64_t slab, bool packed_a) {
  const uint16_t* a = packed_a ? aligned(p.a_tiles) : aligned(p.a);
  const uint32_t* b = aligned(p.b);
  float* part = aligned(p.partial);
  const int64_t k = p.k, chunks = p.chunks(), width = p.pass(slab), slab_chunks = slab / 32;
  int64_t products = 0;
  for (int64_t p0 = 0; p0 < p.n; p0 += width)
    for (int64_t k0 = 0; k0 < k; k0 += slab)
      for (int64_t i = 0; i < kRows; i += 32)
        for (int64_t j = p0; j < std::min(p.n, p0 + width); j += 32) {
          const uint16_t* a0 = packed_a ? a + ((i / 16) * chunks + k0 / 32) * 512 : a + i * k + k0;
          const uint16_t* a1 = packed_a ? a0 + chunks * 512 : a0 + 16 * k;
          const int64_t lda = packed_a ? 64 : k * 2, step = packed_a ? 512 : 32;
          const uint32_t* b0 = b + (j / 16 * chunks + k0 / 32) * kTileWords;
          const uint32_t* b1 = b0 + chunks * kTileWords;
          float* c = part + i * p.n + j * 32;  // block-major partial sums
          if (k0 == 0)
            zero4();
          else
            load4(c);
          for (int64_t t = 0; t < slab_chunks; ++t)
            products4(a0 + t * step, a1 + t * step, lda, b0 + t * kTileWords, b1 + t * kTileWords);
          store4(c);
          products += 4 * slab_chunks;
        }
  return products;
}

double ticks_per_product(int64_t (*loop)(Problem&, int), Problem& p, int arg) {
  const uint64_t t0 = __rdtsc();
  const int64_t products = loop(p, arg);
  return static_cast<double>(__rdtsc() - t0) / static_cast<double>(products);
}

struct Loop {
  const char* name;
  int64_t (*run)(Problem&, int);
  int arg;
};

}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::max(3, std::atoi(argv[1])) : 41;
  if (!has_amx()) {
    std::printf("bench_amx_tiles: this CPU (or OS) offers no AMX-BF16 tiles; nothing to measure\n");
    return 0;
  }
  configure();
  const Loop loops[] = {
      {"L1 only", [](Problem& p, int) { return l1_only(p); }, 0},
      {"kernel", [](Problem& p, int) { return kernel_order(p, false, false, false); }, 0},
      {"+ epilogue, c in L2", [](Problem& p, int) { return kernel_order(p, true, false, false); }, 0},
      {"+ epilogue", [](Problem& p, int) { return kernel_order(p, true, false, true); }, 0},
      {"slabs", [](Problem& p, int s) { return slabs(p, s, false); }, 1024},
      {"slabs, a packed", [](Problem& p, int s) { return slabs(p, s, true); }, 1024},
      {"b prefetched", [](Problem& p, int) { return kernel_order(p, false, true, false); }, 0},
  };
  constexpr int kLoops = sizeof(loops) / sizeof(loops[0]);
  std::printf(
      "AMX tile products, one thread, %d rounds: TSC ticks per TDPBF16PS (the fastest round) and the median over "
      "rounds of each round's ticks / that round's L1-only ticks\n\n| a rows x k x n |",
      rounds);
  for (const Loop& l : loops) std::printf(" %s |", l.name);
  std::printf("\n|---|");
  for (int i = 0; i < kLoops; ++i) std::printf("---|");
  std::printf("\n");
  const int64_t shapes[][2] = {{256, 1024}, {1024, 1024}, {1024, 4096}, {4096, 1024}};
  for (const auto& s : shapes) {
    Problem p = make(s[0], s[1]);
    std::vector<double> best(kLoops, 1e30);
    std::vector<std::vector<double>> ratio(kLoops);
    for (int r = 0; r < rounds; ++r) {
      double l1 = 0;
      for (int i = 0; i < kLoops; ++i) {
        if (loops[i].arg > p.k) continue;  // a slab longer than the sum
        const double t = ticks_per_product(loops[i].run, p, loops[i].arg);
        if (i == 0) l1 = t;
        best[i] = std::min(best[i], t);
        ratio[i].push_back(t / l1);
      }
    }
    std::printf("| %ld x %ld x %ld |", static_cast<long>(kRows), static_cast<long>(s[0]), static_cast<long>(s[1]));
    for (int i = 0; i < kLoops; ++i) {
      if (ratio[i].empty()) {
        std::printf(" — |");
        continue;
      }
      std::sort(ratio[i].begin(), ratio[i].end());
      std::printf(" %.1f (%.2fx) |", best[i], ratio[i][ratio[i].size() / 2]);
    }
    std::printf("\n");
  }
  release();
  return 0;
}
