// Internal: the AMX kernel of a 16-bit product whose b is a weight (matmul_amx_kernel.cpp),
// called by backend/cpu/x86/matmul_amx.cpp on CPUs with AMX-BF16. Plain pointers only: that
// file is compiled for AVX-512 and AMX and must share no inline code with the rest of the
// library.
#pragma once
#include <cstdint>

namespace tc::cpu::detail {

// b's tiles for c's columns [j0, j1) (multiples of 16) of a product with sum length k (a
// multiple of 32), as the kernel reads them: tile (j, t) for columns 16 j .. 16 j + 15 and
// terms 32 t .. 32 t + 31 at tiles + (j k / 32 + t) 256 words, its row r the pairs
// (b[32 t + 2 r][col], b[32 t + 2 r + 1][col]) for the tile's 16 columns. b is bfloat16
// (raw bits) with rows ld elements apart, or, transposed, b = w^T for a w whose rows (c's
// columns) are ld elements apart: a weight as linear's forward reads it. tiles: 64-byte
// aligned.
void pack_b_tiles(const uint16_t* b, int64_t ld, bool transposed, int64_t k, int64_t j0, int64_t j1, uint32_t* tiles);

// c's block [m0, m1) x [n0, n1) (multiples of 32) = a @ b (+ bias[j]) (* mul[i][j]), from
// a's bfloat16 rows (lda elements apart, the k terms contiguous) and b's packed tiles; the
// float32 sums rounded once, to bfloat16 (c_bf16; mul bfloat16 too) or not (float32 c and
// mul). Each element is summed in the order of k, 32 terms at a time, whatever the block.
// For speed n1 - n0 <= matmul_amx_pass(n, k, bytes): b's tiles for those columns stay in L2 while
// the rows walk them. acc: 2048 floats, 64-byte aligned.
struct MatmulAmxRows {
  const uint16_t* a;
  int64_t lda;
  const uint32_t* b_tiles;
  int64_t k, m0, m1, n0, n1;
  const float* bias;  // c's n floats, or null
  const void* mul;    // or null
  int64_t ldmul;
  const uint32_t* table;  // null, or with bfloat16 c and no mul: c's rounded values replaced by
                          // these entries' low halves (activation.h's activation_table)
  void* c;
  int64_t ldc;
  bool c_bf16;
  float* acc;
};
int64_t matmul_amx_pass(int64_t n, int64_t k, int64_t pass_bytes);
void matmul_amx_rows(const MatmulAmxRows& r);

}  // namespace tc::cpu::detail
