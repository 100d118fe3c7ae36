// Internal: the AVX-512 BF16 attention kernels (attention_avx512bf16.cpp) and their AMX
// variant (attention_amx.cpp), called by backend/cpu/loops/attention.cpp on CPUs that have the
// instructions. Plain pointers only: those files are compiled for AVX-512 (and AMX) and
// must share no inline code with the rest of the library.
#pragma once
#include <cstdint>

namespace tc::cpu::detail {

// Rows [i0, i1) of one batch entry's attention out = softmax(scale q k^T) v over the keys
// [0, n) (row i sees keys j <= i when causal), bfloat16 in and out (raw bits; row i of q
// and of out at q + i q_row, out + i out_row). Rows of q, k, v and out are contiguous;
// *_row are row strides in elements. The scratch buffers are the caller's, of the sizes
// attention_block_scratch gives (no alignment needed). lse (null: not wanted): row i's
// log-sum-exp of its scaled scores at lse[i], for the backward.
struct Bf16AttentionBlock {
  const uint16_t *q, *k, *v;
  int64_t q_row, k_row, v_row;
  uint16_t* out;
  int64_t out_row;
  int64_t i0, i1, n, E, Ev;
  bool causal;
  float scale;
  uint16_t* k_pairs;  // sizes: attention_block_scratch
  uint16_t* v_pairs;
  uint16_t* q_group;
  float* scores;
  uint16_t* probs;
  float* tile;
  float* lse;
};

struct Bf16AttentionScratch {
  int64_t k_pairs, v_pairs, q_group, scores, probs, tile;  // elements of each buffer
};
Bf16AttentionScratch attention_block_scratch(int64_t n, int64_t E, int64_t Ev);

// Probabilities are normalized in float32 and rounded once to bfloat16 for the product
// with v (the product path's rounding points); products accumulate in float32; every
// rounding to bfloat16 is the library's (nearest even, subnormals kept).
void attention_block_avx512bf16(const Bf16AttentionBlock& b);

// The gradients of one batch entry's attention (all L query rows, S keys), FlashAttention-2's
// backward on the same instructions: per group of 4 query rows dp = g v^T, and in one pass
// the probabilities again from the forward's log-sum-exp (p = exp(scale s - lse)) and
// ds = scale p (dp - D), D = g . o (the forward's output row, FlashAttention-2's sum_j p_j dp_j),
// ds rounded once to bfloat16, then dq = ds k for the group and dv += p^T g, dk += ds^T q
// (rank-8 updates: two tiles of rows) into float32 sums. g: the output's gradient; dq (L
// rows), dk and dv (S rows): bfloat16 rows, each written once (null: not wanted).
struct Bf16AttentionBackward {
  const uint16_t *q, *k, *v, *g, *o;  // o: the forward's output
  const float* lse;                   // the forward's, row i at lse[i]
  int64_t q_row, k_row, v_row, g_row, o_row;
  uint16_t *dq, *dk, *dv;
  int64_t dq_row, dk_row, dv_row;
  int64_t L, S, E, Ev;
  bool causal;
  float scale;
  uint16_t* scratch16;  // sizes: attention_backward_scratch
  float* scratch32;
};

struct Bf16BackwardScratch {
  int64_t halves, floats;
};
Bf16BackwardScratch attention_backward_scratch(int64_t S, int64_t E, int64_t Ev);
void attention_backward_avx512bf16(const Bf16AttentionBackward& b);

// The same two kernels on AMX tiles (attention_amx.cpp; CPUs with AMX-BF16, the tile data
// granted by the OS): the same arguments, scratch of these sizes, the same rounding
// points (the float32 sums may add in another order).
Bf16AttentionScratch attention_block_scratch_amx(int64_t n, int64_t E, int64_t Ev);
void attention_block_amx(const Bf16AttentionBlock& b);
Bf16BackwardScratch attention_backward_scratch_amx(int64_t S, int64_t E, int64_t Ev);
void attention_backward_amx(const Bf16AttentionBackward& b);

}  // namespace tc::cpu::detail
