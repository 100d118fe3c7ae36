// scaled_dot_product_attention beyond the op table (which checks small samples against a
// float64 loop and gradchecks them in every dtype): the fused kernel against the composite
// (forced by a mask that changes nothing) and against float64 at GPT's real shapes, forward
// and backward; the output layout that makes merging heads a view; no (L, S) buffer;
// autocast; error messages.
#include <cmath>
#include <limits>
#include <vector>

#include "backend/cpu/loops/attention.h"
#include "common/testing.h"
#include "tensorcast/allocator.h"
#include "tensorcast/convert.h"
#include "tensorcast/gemm16.h"
#include "tensorcast/parallel.h"
#include "tensorcast/profiler.h"

namespace tc {
namespace {

using testing::all_close;
using testing::uniform;

// A mask that selects the composite without changing the result: causal as a bool
// tril(L, S), else all-true.
Tensor neutral_mask(int64_t L, int64_t S, bool causal) {
  const Tensor i = arange(static_cast<double>(L), kInt64).unsqueeze(1),
               j = arange(static_cast<double>(S), kInt64).unsqueeze(0);
  return causal ? le(j, i) : ge(j + i, 0.0);
}

// The bfloat16 kernels' variants this CPU runs: on AMX tiles (where it has AMX-BF16) and
// on AVX-512 BF16 dot products; a test runs f(label) once per variant.
template <class F>
void for_each_bf16_kernel(F f) {
  const bool amx = cpu::sdpa_uses_amx();
  for (bool use : {true, false}) {
    if (use && !amx) continue;
    cpu::set_sdpa_amx(use);
    f(use ? " amx" : "");
  }
  cpu::set_sdpa_amx(true);
}

struct Result {
  Tensor out, dq, dk, dv;
};

Result run(const Tensor& q0, const Tensor& k0, const Tensor& v0, const Tensor& g, bool causal, bool composite) {
  Tensor q = q0.detach().requires_grad_(), k = k0.detach().requires_grad_(), v = v0.detach().requires_grad_();
  const Tensor mask = composite ? neutral_mask(q.size(-2), k.size(-2), causal) : Tensor();
  Tensor out = scaled_dot_product_attention(q, k, v, mask, 0.0, causal && !composite);
  (out * g.to(out.dtype())).sum().backward();
  return {out.detach(), q.grad(), k.grad(), v.grad()};
}

// Both paths at GPT's shapes (B=2, H=4, T=128, hd=64) and odd ones, every dtype: the fused
// result against the float64 composite, as close as the composite in the same dtype is.
// Causal self-attention of 128 and 200 rows runs the product path in bands (2 of 64, 3 of
// 67 rows) that skip the keys above the diagonal; with AVX-512 BF16 the bfloat16 forward
// runs on its dot products (odd E and Ev, partial pairs and blocks, and a length whose
// scores the product path would not hold, included).
TEST(Sdpa, FusedMatchesCompositeAndFloat64) {
  struct Case {
    Shape q, k, v;
    bool causal;
  };
  for (const Case& c :
       {Case{{2, 4, 128, 64}, {2, 4, 128, 64}, {2, 4, 128, 64}, true},
        Case{{3, 37, 24}, {3, 53, 24}, {3, 53, 40}, false}, Case{{2, 61, 16}, {2, 29, 16}, {2, 29, 8}, true},
        Case{{2, 29, 16}, {2, 61, 16}, {2, 61, 8}, true},  // causal, keys past the last query: zero gradients
        Case{{1, 2, 200, 32}, {1, 2, 200, 32}, {1, 2, 200, 24}, true}, Case{{2, 19, 7}, {2, 19, 7}, {2, 19, 33}, true},
        Case{{1, 1, 1040, 16}, {1, 1, 1040, 16}, {1, 1, 1040, 16}, true}}) {
    const Tensor q = uniform(c.q, kFloat64, -2, 2, 1), k = uniform(c.k, kFloat64, -2, 2, 2),
                 v = uniform(c.v, kFloat64, -1, 1, 3);
    Shape os = c.q;
    os.back() = c.v.back();
    const Tensor g = uniform(os, kFloat64, -1, 1, 4);
    const Result ref = run(q, k, v, g, c.causal, true);  // float64: the composite
    // 16-bit inputs take the product path where this CPU multiplies them natively (kNative;
    // elsewhere both settings give the fused kernel), the fused kernel under kFloat32.
    for_each_bf16_kernel([&](const char* kernel) {
      for (Gemm16 mode : {Gemm16::kFloat32, Gemm16::kNative})
        for (DType dt : {kFloat32, kBFloat16, kFloat16}) {
          set_cpu_gemm16(mode);
          const Result fused = run(q.to(dt), k.to(dt), v.to(dt), g, c.causal, false);
          set_cpu_gemm16(Gemm16::kAuto);
          const Result comp = run(q.to(dt), k.to(dt), v.to(dt), g, c.causal, true);
          auto err = [](const Tensor& a, const Tensor& b) {
            double m = 0;
            const std::vector<double> x = a.to_vector(), y = b.to_vector();
            for (size_t i = 0; i < x.size(); ++i) m = std::max(m, std::fabs(x[i] - y[i]));
            return m;
          };
          const std::pair<Tensor, Tensor> pairs[] = {
              {fused.out, ref.out}, {fused.dq, ref.dq}, {fused.dk, ref.dk}, {fused.dv, ref.dv}};
          const std::pair<Tensor, Tensor> comp_pairs[] = {
              {comp.out, ref.out}, {comp.dq, ref.dq}, {comp.dk, ref.dk}, {comp.dv, ref.dv}};
          const char* names[] = {"out", "dq", "dk", "dv"};
          for (int t = 0; t < 4; ++t) {
            const double e_fused = err(pairs[t].first, pairs[t].second);
            const double e_comp = err(comp_pairs[t].first, comp_pairs[t].second);
            const double scale = err(zeros_like(pairs[t].second), pairs[t].second);
            // The fused kernel rounds once per output; the composite rounds scores, weights and
            // products in `dt`: the fused error is at most the composite's (plus float32 noise).
            EXPECT_LE(e_fused, std::max(1.5 * e_comp, 1e-5 * scale))
                << shape_str(c.q) << " " << dtype_name(dt) << " " << gemm16_name(mode) << kernel << " " << names[t]
                << ": fused " << e_fused << ", composite " << e_comp;
            EXPECT_EQ(pairs[t].first.dtype(), dt);
          }
        }
    });
  }
}

// The bfloat16 kernels' log-sum-exp (their float32 softmax sums, which the backward
// recomputes the probabilities from) against float64 from the same inputs: scores over
// more than 100 orders of magnitude of exp (some rows' terms below float32's range), causal
// and not, odd lengths. The bound holds the softmax's exp to a few float32 ulp: the fused
// outputs themselves, rounded to bfloat16, would not see a 1e-3 error in it.
TEST(Sdpa, Bf16KernelsLogSumExpMatchesFloat64) {
  const CpuFeatures& f = cpu_features();
  if (!(f.avx512f && f.avx512bw && f.avx512vl && f.avx512_bf16)) GTEST_SKIP() << "no AVX-512 BF16 on this CPU";
  struct Case {
    int64_t L, S, E;
    bool causal;
    double scale;
  };
  for_each_bf16_kernel([](const char* kernel) {
    for (const Case& c : {Case{128, 128, 64, true, 0.125}, Case{37, 53, 24, false, 1.0}, Case{61, 29, 16, true, 3.0},
                          Case{200, 200, 32, true, 12.0}}) {
      const Tensor q = uniform({2, c.L, c.E}, kBFloat16, -1, 1, 21), k = uniform({2, c.S, c.E}, kBFloat16, -1, 1, 22),
                   v = uniform({2, c.S, 8}, kBFloat16, -1, 1, 23);
      const Tensor out = empty({2, c.L, 8}, kBFloat16), lse = empty({2, c.L}, kFloat32);
      ASSERT_TRUE(cpu::sdpa_forward_bf16(out, lse, q, k, v, c.scale, c.causal));
      const std::vector<double> qd = q.to_vector(), kd = k.to_vector(), got = lse.to_vector();
      double worst = 0;
      for (int64_t b = 0; b < 2; ++b)
        for (int64_t i = 0; i < c.L; ++i) {
          const int64_t m = c.causal ? std::min(c.S, i + 1) : c.S;
          std::vector<double> s(static_cast<size_t>(m));
          double mx = -1e300;
          for (int64_t j = 0; j < m; ++j) {
            double dot = 0;
            for (int64_t e = 0; e < c.E; ++e)
              dot +=
                  qd[static_cast<size_t>((b * c.L + i) * c.E + e)] * kd[static_cast<size_t>((b * c.S + j) * c.E + e)];
            s[static_cast<size_t>(j)] = c.scale * dot;
            mx = std::max(mx, s[static_cast<size_t>(j)]);
          }
          double sum = 0;
          for (double x : s) sum += std::exp(x - mx);
          const double ref = mx + std::log(sum), err = std::fabs(got[static_cast<size_t>(b * c.L + i)] - ref);
          // float32 scores (sums of E exact products) and the float32 sum of the exps
          worst = std::max(worst, err / (1e-6 * (1.0 + std::fabs(ref))));
        }
      EXPECT_LE(worst, 1.0) << "L " << c.L << " S " << c.S << " E " << c.E << kernel
                            << ": worst error in units of 1e-6 (1 + |lse|)";
    }
  });
}

TEST(Sdpa, OutputMergesHeadsWithoutACopy) {
  const Tensor q = uniform({2, 4, 16, 8}, kFloat32, -1, 1, 5);
  const Tensor out = scaled_dot_product_attention(q, q, q, Tensor(), 0.0, true);
  EXPECT_EQ(out.sizes(), (Shape{2, 4, 16, 8}));
  EXPECT_TRUE(out.transpose(1, 2).is_contiguous());  // memory (B, T, H, hd)
  const int64_t before = memory_stats().allocation_count;
  const Tensor merged = out.transpose(1, 2).reshape({2, 16, 32});
  EXPECT_EQ(memory_stats().allocation_count, before);
  EXPECT_TRUE(merged.is_same(merged));
}

TEST(Sdpa, FusedKeepsNoScoreMatrix) {
  // (B*H) * T * T float32 scores would be 64 MiB here; the fused forward allocates the
  // output and the (B*H, T) float32 log-sum-exp the backward starts from, nothing else
  // (the AVX-512 BF16 kernels, where bfloat16 runs on them, not even the log-sum-exp when
  // no backward will run).
  const CpuFeatures& f = cpu_features();
  const bool bf16_kernels =
      cpu_gemm16_path(kBFloat16) == Gemm16::kNative && f.avx512f && f.avx512bw && f.avx512vl && f.avx512_bf16;
  for (Gemm16 mode : {Gemm16::kFloat32, Gemm16::kAuto})
    for (bool grad : {true, false}) {
      set_cpu_gemm16(mode);
      const Tensor q = uniform({4, 4, 1024, 16}, kBFloat16, -1, 1, 6).requires_grad_(grad);
      reset_peak_memory_stats();
      const int64_t base = memory_stats().current_bytes;
      const Tensor out = scaled_dot_product_attention(q, q, q, Tensor(), 0.0, true);
      const bool lse = mode == Gemm16::kFloat32 || !bf16_kernels || grad;
      EXPECT_EQ(memory_stats().peak_bytes - base, 4 * 4 * 1024 * 16 * 2 + (lse ? 4 * 4 * 1024 * 4 : 0))
          << gemm16_name(mode) << " grad " << grad;
      set_cpu_gemm16(Gemm16::kAuto);
    }
}

// Where bf16 GEMMs are native, bf16 attention keeps no (L, S) matrix in memory with the
// AVX-512 BF16 kernels (rows with unit stride), and the product path that runs otherwise
// (here: rows of stride 2) holds the float32 scores of a chunk of the batch at a time:
// 1 MiB for 4 of the 16 entries, not the 4 MiB of all.
TEST(Sdpa, NativeBf16PathsBoundTheirScoreMemory) {
  if (cpu_gemm16_path(kBFloat16) != Gemm16::kNative) GTEST_SKIP() << "no native bf16 GEMM on this CPU";
  const CpuFeatures& f = cpu_features();
  const bool kernels = f.avx512f && f.avx512bw && f.avx512vl && f.avx512_bf16;
  const int64_t qkv_bytes = 16 * 4 * 128 * 64 * 2, chunk_scores = 4 * 4 * 128 * 128, lse_bytes = 16 * 4 * 128 * 4;
  for (bool strided : {false, true}) {
    set_cpu_gemm16(Gemm16::kNative);
    const Tensor x = strided ? uniform({16, 4, 128, 128}, kBFloat16, -1, 1, 8).slice(3, 0, 128, 2)
                             : uniform({16, 4, 128, 64}, kBFloat16, -1, 1, 8);
    Tensor q = x.detach().requires_grad_(), k = x.detach().requires_grad_(), v = x.detach().requires_grad_();
    reset_peak_memory_stats();
    int64_t base = memory_stats().current_bytes;
    const Tensor out = scaled_dot_product_attention(q, k, v, Tensor(), 0.0, true);
    const int64_t forward = memory_stats().peak_bytes - base;
    const Tensor g = ones_like(out);
    reset_peak_memory_stats();
    base = memory_stats().current_bytes;
    out.backward(g);
    const int64_t backward = memory_stats().peak_bytes - base;
    set_cpu_gemm16(Gemm16::kAuto);
    if (kernels && !strided) {
      EXPECT_EQ(forward, qkv_bytes + lse_bytes);  // the output and each row's log-sum-exp only
      EXPECT_EQ(backward, 3 * qkv_bytes);         // dq, dk, dv only
    } else {
      // Per chunk float32 scores and bf16 P, and dense copies of the chunk's strided q, k
      // for the GEMMs (a quarter of qkv_bytes each).
      EXPECT_LE(forward, qkv_bytes + chunk_scores * (4 + 2) + 2 * qkv_bytes / 4);
      EXPECT_GT(forward, qkv_bytes) << "strided " << strided;
      // dq, dk, dv and, per chunk, float32 P and dP, bf16 P and dS, and dense operands.
      EXPECT_LE(backward, 3 * qkv_bytes + chunk_scores * (4 + 4 + 2 + 2) + 3 * qkv_bytes / 4);
      EXPECT_GT(backward, 3 * qkv_bytes + chunk_scores * 4);
    }
  }
}

// q, k and v selected from one (B, T, 3, H, hd) projection, as nn::GPT does: the backward
// writes their gradients into one block laid out as the projection, which the engine takes
// as the projection's gradient (the selects' backwards allocate and copy nothing, and the
// permute's backward hands on a contiguous gradient), with the values of separate
// contiguous q, k, v. Both CPU paths (the product path where bf16 GEMMs are native).
TEST(Sdpa, GradientsOfOneProjectionShareOneBlock) {
  const int64_t B = 2, T = 128, H = 2, hd = 32;
  const Tensor proj0 = uniform({B, T, 3, H, hd}, kFloat32, -2, 2, 11);
  const Tensor g = uniform({B, H, T, hd}, kFloat32, -1, 1, 12);
  for_each_bf16_kernel([&](const char* kernel) {
    for (Gemm16 mode : {Gemm16::kFloat32, Gemm16::kNative})
      for (DType dt : {kFloat32, kBFloat16}) {
        set_cpu_gemm16(mode);
        Tensor proj = proj0.to(dt).detach().requires_grad_();
        profiler::Profile prof;
        const Tensor heads = mul(proj, 1.0).permute({2, 0, 3, 1, 4});  // a non-leaf, as a linear's output
        const Tensor out = scaled_dot_product_attention(heads.select(0, 0), heads.select(0, 1), heads.select(0, 2),
                                                        Tensor(), 0.0, true);
        (out * g.to(dt)).sum().backward();
        prof.stop();
        int64_t selects = 0, select_bytes = 0, copies = 0;
        for (const profiler::OpStat& st : prof.key_averages()) {
          if (st.name.rfind("select backward", 0) == 0) {
            selects += st.calls;
            select_bytes += st.self_alloc_bytes;
          }
          if (st.name == "clone" || st.name == "contiguous") copies += st.calls;
        }
        const std::string what = std::string(dtype_name(dt)) + " " + std::string(gemm16_name(mode)) + kernel;
        EXPECT_EQ(selects, 3) << what;
        EXPECT_EQ(select_bytes, 0) << what;
        EXPECT_EQ(copies, 0) << what;
        // Reference: the same attention on contiguous copies of q, k, v.
        const Tensor hp = proj0.to(dt).permute({2, 0, 3, 1, 4});
        const Result ref = run(hp.select(0, 0).contiguous(), hp.select(0, 1).contiguous(), hp.select(0, 2).contiguous(),
                               g, true, false);
        set_cpu_gemm16(Gemm16::kAuto);
        const Tensor gp = proj.grad().permute({2, 0, 3, 1, 4});
        EXPECT_TRUE(testing::equal(gp.select(0, 0), ref.dq)) << what;
        EXPECT_TRUE(testing::equal(gp.select(0, 1), ref.dk)) << what;
        EXPECT_TRUE(testing::equal(gp.select(0, 2), ref.dv)) << what;
      }
  });
}

// A NaN in a query row makes that row's output NaN and leaves the others alone, in every
// path and dtype (the composite's softmax propagates it the same way).
// A NaN in query row 5 (causal): its output row is NaN and no other; in the backward its dq
// row and no other, the dv rows of the keys it sees (0 .. 5) and no other, and those keys'
// dk rows (the kernels' padding multiplies the NaN query by zeros of ds for some later
// keys too, as the composite's dense ds^T q does for every key).
TEST(Sdpa, NanQueryRowPoisonsOnlyItsRow) {
  for_each_bf16_kernel([](const char* kernel) {
    for (Gemm16 mode : {Gemm16::kFloat32, Gemm16::kNative})
      for (DType dt : {kFloat32, kBFloat16}) {
        set_cpu_gemm16(mode);
        Tensor q0 = uniform({1, 2, 40, 16}, kFloat32, -1, 1, 13);
        q0.select(2, 5).select(2, 3).fill_(std::nan(""));
        const Tensor k0 = uniform({1, 2, 40, 16}, kFloat32, -1, 1, 14),
                     g = uniform({1, 2, 40, 16}, kFloat32, -1, 1, 15);
        const Result r = run(q0.to(dt), k0.to(dt), k0.to(dt), g, true, false);
        set_cpu_gemm16(Gemm16::kAuto);
        const std::vector<double> out = r.out.to_vector(), dq = r.dq.to_vector(), dk = r.dk.to_vector(),
                                  dv = r.dv.to_vector();
        const std::string what = std::string(dtype_name(dt)) + " " + std::string(gemm16_name(mode)) + kernel;
        for (int64_t h = 0; h < 2; ++h)
          for (int64_t i = 0; i < 40; ++i)
            for (int64_t e = 0; e < 16; ++e) {
              const size_t at = static_cast<size_t>((h * 40 + i) * 16 + e);
              EXPECT_EQ(std::isnan(out[at]), i == 5) << what << " out, head " << h << " row " << i;
              EXPECT_EQ(std::isnan(dq[at]), i == 5) << what << " dq, head " << h << " row " << i;
              if (i <= 5) EXPECT_TRUE(std::isnan(dk[at])) << what << " dk, head " << h << " row " << i;
              EXPECT_EQ(std::isnan(dv[at]), i <= 5) << what << " dv, head " << h << " row " << i;
            }
      }
  });
}

// The kernels split work by batch entry and query block, never by thread: the same bits
// on 1 and on 3 threads, forward and backward, in every CPU path.
TEST(Sdpa, ResultsDoNotDependOnTheThreadCount) {
  const int saved = get_num_threads();
  const Tensor x = uniform({2, 3, 3, 150, 32}, kFloat32, -2, 2, 15), g = uniform({2, 3, 150, 32}, kFloat32, -1, 1, 16);
  for_each_bf16_kernel([&](const char* kernel) {
    for (Gemm16 mode : {Gemm16::kFloat32, Gemm16::kNative})
      for (DType dt : {kFloat32, kBFloat16}) {
        set_cpu_gemm16(mode);
        Result r[2];
        for (int t = 0; t < 2; ++t) {
          set_num_threads(t == 0 ? 1 : 3);
          const Tensor h = x.to(dt).permute({1, 0, 2, 3, 4});
          r[t] = run(h.select(0, 0), h.select(0, 1), h.select(0, 2), g, true, false);
        }
        set_cpu_gemm16(Gemm16::kAuto);
        const std::string what = std::string(dtype_name(dt)) + " " + std::string(gemm16_name(mode)) + kernel;
        EXPECT_TRUE(testing::equal(r[0].out, r[1].out)) << what;
        EXPECT_TRUE(testing::equal(r[0].dq, r[1].dq)) << what;
        EXPECT_TRUE(testing::equal(r[0].dk, r[1].dk)) << what;
        EXPECT_TRUE(testing::equal(r[0].dv, r[1].dv)) << what;
      }
  });
  set_num_threads(saved);
}

TEST(Sdpa, AutocastRunsIn16Bit) {
  const Tensor q = uniform({2, 5, 4}, kFloat32, -1, 1, 7);
  amp::AutocastGuard autocast(kCPU, kBFloat16);
  EXPECT_EQ(scaled_dot_product_attention(q, q, q, Tensor(), 0.0, true).dtype(), kBFloat16);
}

TEST(Sdpa, DropoutKeepsExpectation) {
  // The composite with dropout: E[out] is the undropped output (weights scaled by 1/(1-p)).
  manual_seed(3);
  const Tensor q = uniform({1, 4, 8}, kFloat64, -1, 1, 8), v = uniform({1, 4, 8}, kFloat64, -1, 1, 9);
  const Tensor plain = scaled_dot_product_attention(q, q, v);
  Tensor mean = zeros_like(plain);
  const int n = 4000;
  for (int i = 0; i < n; ++i) mean = mean + scaled_dot_product_attention(q, q, v, Tensor(), 0.25);
  EXPECT_TRUE(all_close(mean / n, plain.to_vector(), {0.05, 0.0}));
}

TEST(Sdpa, ErrorMessages) {
  const Tensor q = uniform({2, 3, 4}, kFloat32, -1, 1, 10);
  TC_EXPECT_ERROR(scaled_dot_product_attention(q, q.to(kBFloat16), q),
                  "[scaled_dot_product_attention] expected query, key and value to have the same dtype, got float32, "
                  "bfloat16 and float32");
  TC_EXPECT_ERROR(scaled_dot_product_attention(q, uniform({2, 3, 5}, kFloat32, -1, 1, 1), q),
                  "must have the same embedding size");
  TC_EXPECT_ERROR(scaled_dot_product_attention(q, q, uniform({2, 4, 4}, kFloat32, -1, 1, 1)),
                  "must have the same sequence length");
  TC_EXPECT_ERROR(scaled_dot_product_attention(q, q, q, ones({3, 3}), 0.0, true),
                  "an explicit attn_mask should not be set when is_causal=true");
  TC_EXPECT_ERROR(scaled_dot_product_attention(q, q, q, Tensor(), 1.0), "dropout_p must be in [0, 1), got 1");
  TC_EXPECT_ERROR(scaled_dot_product_attention(q.select(0, 0).select(0, 0), q, q), "at least 2 dims");
  TC_EXPECT_ERROR(scaled_dot_product_attention(q, q, q, ones({3, 3}, kInt64)), "expected a bool or floating attn_mask");
}

}  // namespace
}  // namespace tc
