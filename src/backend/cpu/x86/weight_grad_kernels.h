// Internal: the AMX kernel of a weight gradient's product (weight_grad_amx.cpp), called by
// backend/cpu/x86/weight_grad.cpp on CPUs with AMX-BF16. Plain pointers only: that file is
// compiled for AVX-512 and AMX and must share no inline code with the rest of the library.
#pragma once
#include <cstdint>

namespace tc::cpu::detail {

// c[i][j] = sum over k in [k0, k1) of g[k][m0 + i] x[k][n0 + j], for i < m1 - m0,
// j < n1 - n0: the block [m0, m1) x [n0, n1) of g^T x in float32, written (not added) at c
// (its first element; rows ldc floats apart). g and x are bfloat16 (raw bits), rows ldg and
// ldx elements apart, columns contiguous. m0, m1, n0 and n1 are multiples of 32; any
// k0 < k1. Products are exact and summed in float32 in the order of k, 32 terms at a time
// (the tiles' dot products), whatever the block. col_sums (null: not wanted): also
// col_sums[i] = sum over k of g[k][m0 + i], a bias's gradient, on the same tiles of g.
// scratch: weight_grad_scratch(m1 - m0, n1 - n0, k1 - k0) elements.
struct WeightGradBlock {
  const uint16_t* g;
  int64_t ldg;
  const uint16_t* x;
  int64_t ldx;
  float* c;
  int64_t ldc;
  int64_t k0, k1, m0, m1, n0, n1;
  float* col_sums;
  uint16_t* scratch;
};
int64_t weight_grad_scratch(int64_t m, int64_t n, int64_t k);
void weight_grad_amx(const WeightGradBlock& b);

}  // namespace tc::cpu::detail
