// Matrix product and convolution throughput: tensorcast's ops next to the same problem
// run on a oneDNN primitive created once (the ceiling tensorcast's per-call work —
// checks, output allocation, primitive cache lookup — is measured against).
// Reports GFLOP/s (per CPU-second single-threaded, per wall-second with more threads).
// Run single-core as: OMP_NUM_THREADS=1 ./bench_matmul --benchmark_repetitions=3
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <oneapi/dnnl/dnnl.hpp>
#include <string>
#include <unordered_map>
#include <vector>

#include "tensorcast/gemm16.h"
#include "tensorcast/tensorcast.h"

namespace {

using dt = dnnl::memory::data_type;
using tag = dnnl::memory::format_tag;

dnnl::engine& engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

dt to_dnnl(tc::DType d) { return d == tc::kBFloat16 ? dt::bf16 : dt::f32; }

void set_flops(benchmark::State& state, double flops_per_iter) {
  state.counters["GFLOP/s"] = benchmark::Counter(flops_per_iter * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

// ---------------------------------------------------------------- matmul 1024^3

constexpr int64_t kN = 1024;

void BM_tc_matmul(benchmark::State& state, tc::DType dtype) {
  tc::manual_seed(0);
  tc::Tensor a = tc::randn({kN, kN}).to(dtype), b = tc::randn({kN, kN}).to(dtype);
  tc::NoGradGuard no_grad;
  for (auto _ : state) {
    tc::Tensor c = tc::matmul(a, b);
    benchmark::DoNotOptimize(c.raw_data());
  }
  set_flops(state, 2.0 * kN * kN * kN);
}

void BM_dnnl_matmul(benchmark::State& state, tc::DType dtype) {
  const dnnl::memory::dims dims{kN, kN};
  dnnl::memory::desc md(dims, to_dnnl(dtype), tag::ab);
  dnnl::matmul prim(dnnl::matmul::primitive_desc(dnnl::matmul::desc(md, md, md), engine()));
  tc::manual_seed(0);
  tc::Tensor a = tc::randn({kN, kN}).to(dtype), b = tc::randn({kN, kN}).to(dtype), c = tc::empty({kN, kN}, dtype);
  dnnl::memory ma(md, engine(), a.raw_data()), mb(md, engine(), b.raw_data()), mc(md, engine(), c.raw_data());
  dnnl::stream s(engine());
  for (auto _ : state) {
    prim.execute(s, {{DNNL_ARG_SRC, ma}, {DNNL_ARG_WEIGHTS, mb}, {DNNL_ARG_DST, mc}});
    s.wait();
    benchmark::DoNotOptimize(c.raw_data());
  }
  set_flops(state, 2.0 * kN * kN * kN);
}

// ---------------------------------------------------------------- linear on a few rows

// A batch-1 (or few-row) forward of Linear(1024, 4096): the weight is read once and each
// element used `rows` times, so memory speed bounds it; reported as weight GB/s too.
constexpr int64_t kIn = 1024, kOut = 4096;

void set_linear_counters(benchmark::State& state, int64_t rows, tc::DType dtype) {
  set_flops(state, 2.0 * static_cast<double>(rows * kIn * kOut));
  state.counters["weight GB/s"] = benchmark::Counter(static_cast<double>(kIn * kOut * tc::element_size(dtype)) * 1e-9,
                                                     benchmark::Counter::kIsIterationInvariantRate);
}

void BM_tc_linear_rows(benchmark::State& state, tc::DType dtype) {
  const int64_t rows = state.range(0);
  tc::manual_seed(0);
  tc::Tensor x = tc::randn({rows, kIn}).to(dtype), w = tc::randn({kOut, kIn}).to(dtype),
             b = tc::randn({kOut}).to(dtype);
  tc::NoGradGuard no_grad;
  for (auto _ : state) {
    tc::Tensor y = tc::linear(x, w, b);
    benchmark::DoNotOptimize(y.raw_data());
  }
  set_linear_counters(state, rows, dtype);
}

// oneDNN's matmul on the same row-major weight read transposed (as linear reads it).
void BM_dnnl_linear_rows(benchmark::State& state, tc::DType dtype) {
  const int64_t rows = state.range(0);
  const dt d = to_dnnl(dtype);
  const dnnl::memory::desc src({rows, kIn}, d, tag::ab), wei({kIn, kOut}, d, tag::ba), bias({1, kOut}, d, tag::ab),
      dst({rows, kOut}, d, tag::ab);
  dnnl::matmul prim(dnnl::matmul::primitive_desc(dnnl::matmul::desc(src, wei, bias, dst), engine()));
  tc::manual_seed(0);
  tc::Tensor x = tc::randn({rows, kIn}).to(dtype), w = tc::randn({kOut, kIn}).to(dtype),
             b = tc::randn({kOut}).to(dtype);
  tc::Tensor y = tc::empty({rows, kOut}, dtype);
  dnnl::memory mx(src, engine(), x.raw_data()), mw(wei, engine(), w.raw_data()), mb(bias, engine(), b.raw_data()),
      my(dst, engine(), y.raw_data());
  dnnl::stream s(engine());
  for (auto _ : state) {
    prim.execute(s, {{DNNL_ARG_SRC, mx}, {DNNL_ARG_WEIGHTS, mw}, {DNNL_ARG_BIAS, mb}, {DNNL_ARG_DST, my}});
    s.wait();
    benchmark::DoNotOptimize(y.raw_data());
  }
  set_linear_counters(state, rows, dtype);
}

// ---------------------------------------------------------------- conv2d

// N=64, 32 -> 64 channels, 14x14, 3x3, stride 1, pad 1 (a mid-network ResNet-style layer).
constexpr int64_t kBatch = 64, kCin = 32, kCout = 64, kHW = 14, kK = 3;
constexpr double kConvFlops = 2.0 * kBatch * kCout * kHW * kHW * kCin * kK * kK;

void BM_tc_conv2d(benchmark::State& state, tc::DType dtype) {
  tc::manual_seed(0);
  tc::Tensor x = tc::randn({kBatch, kCin, kHW, kHW}).to(dtype);
  tc::Tensor w = tc::randn({kCout, kCin, kK, kK}).to(dtype), bias = tc::randn({kCout}).to(dtype);
  tc::NoGradGuard no_grad;
  try {
    (void)tc::conv2d(x, w, bias, {1, 1}, {1, 1});
  } catch (const tc::Error& e) {
    state.SkipWithError(e.what());  // e.g. "[conv2d] not implemented yet"
    return;
  }
  for (auto _ : state) {
    tc::Tensor y = tc::conv2d(x, w, bias, {1, 1}, {1, 1});
    benchmark::DoNotOptimize(y.raw_data());
  }
  set_flops(state, kConvFlops);
}

// The raw peer gets oneDNN's preferred (blocked) layouts with the weights reordered once;
// the NCHW activations are reordered in and out on every call, since a framework holding
// plain NCHW tensors must do the same.
void BM_dnnl_conv2d(benchmark::State& state, tc::DType dtype) {
  const dt d = to_dnnl(dtype);
  const dnnl::memory::dims src_dims{kBatch, kCin, kHW, kHW}, w_dims{kCout, kCin, kK, kK}, b_dims{kCout},
      dst_dims{kBatch, kCout, kHW, kHW};
  auto any = [&](const dnnl::memory::dims& dims) { return dnnl::memory::desc(dims, d, tag::any); };
  dnnl::convolution_forward::desc cd(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct,
                                     any(src_dims), any(w_dims), dnnl::memory::desc(b_dims, d, tag::a), any(dst_dims),
                                     {1, 1}, {1, 1}, {1, 1});
  dnnl::convolution_forward::primitive_desc pd(cd, engine());
  dnnl::convolution_forward conv(pd);
  dnnl::stream s(engine());

  tc::manual_seed(0);
  tc::Tensor x = tc::randn({kBatch, kCin, kHW, kHW}).to(dtype), y = tc::empty({kBatch, kCout, kHW, kHW}, dtype);
  tc::Tensor w = tc::randn({kCout, kCin, kK, kK}).to(dtype), bias = tc::randn({kCout}).to(dtype);
  dnnl::memory user_src({src_dims, d, tag::nchw}, engine(), x.raw_data());
  dnnl::memory user_dst({dst_dims, d, tag::nchw}, engine(), y.raw_data());
  dnnl::memory user_w({w_dims, d, tag::oihw}, engine(), w.raw_data());
  dnnl::memory mb({b_dims, d, tag::a}, engine(), bias.raw_data());
  dnnl::memory src = user_src, dst = user_dst, wts = user_w;
  if (pd.weights_desc() != user_w.get_desc()) {
    wts = dnnl::memory(pd.weights_desc(), engine());
    dnnl::reorder(user_w, wts).execute(s, user_w, wts);
  }
  const bool reorder_src = pd.src_desc() != user_src.get_desc(), reorder_dst = pd.dst_desc() != user_dst.get_desc();
  if (reorder_src) src = dnnl::memory(pd.src_desc(), engine());
  if (reorder_dst) dst = dnnl::memory(pd.dst_desc(), engine());
  dnnl::reorder r_src = reorder_src ? dnnl::reorder(user_src, src) : dnnl::reorder();
  dnnl::reorder r_dst = reorder_dst ? dnnl::reorder(dst, user_dst) : dnnl::reorder();
  for (auto _ : state) {
    if (reorder_src) r_src.execute(s, user_src, src);
    conv.execute(s, {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, wts}, {DNNL_ARG_BIAS, mb}, {DNNL_ARG_DST, dst}});
    if (reorder_dst) r_dst.execute(s, dst, user_dst);
    s.wait();
    benchmark::DoNotOptimize(y.raw_data());
  }
  set_flops(state, kConvFlops);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

// ---------------------------------------------------------------- a transformer's MLP block
// Forward and backward of linear(gelu(linear(x))) at the gpt model's shape (B=16 x T=128
// tokens, width 256, hidden 1024, bf16): tc::mlp (one node; gelu' written by the forward
// and applied in the backward GEMM's epilogue) against the same three ops recorded apart,
// alternating within each iteration so that a shared machine's drift hits both alike. The
// counters are the medians of each (ms) and their ratio; the iteration time is the pair.
void BM_tc_mlp_block(benchmark::State& state) {
  const int64_t rows = 2048, d = 256, h = 1024;
  const tc::DType bf = tc::kBFloat16;
  const tc::Tensor x = tc::randn({rows, d}).to(bf).requires_grad_();
  const tc::Tensor w1 = (tc::randn({h, d}) * 0.05).to(bf).requires_grad_(), b1 = tc::zeros({h}, bf).requires_grad_();
  const tc::Tensor w2 = (tc::randn({d, h}) * 0.05).to(bf).requires_grad_(), b2 = tc::zeros({d}, bf).requires_grad_();
  const tc::Tensor g = tc::randn({rows, d}).to(bf);
  std::vector<double> ms[2];
  for (auto _ : state) {
    for (int fused = 0; fused < 2; ++fused) {
      const auto t0 = std::chrono::steady_clock::now();
      const tc::Tensor y = fused ? tc::mlp(x, w1, b1, w2, b2, tc::Activation::kGelu)
                                 : tc::linear(tc::gelu(tc::linear(x, w1, b1)), w2, b2);
      y.backward(g);
      ms[fused].push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
      for (const tc::Tensor* p : {&x, &w1, &b1, &w2, &b2}) p->set_grad(tc::Tensor());
    }
  }
  state.counters["fused_ms"] = median(ms[1]);
  state.counters["composed_ms"] = median(ms[0]);
  state.counters["fused/composed"] = median(ms[1]) / median(ms[0]);
}

// ---------------------------------------------------------------- causal self-attention
// scaled_dot_product_attention at the gpt model's shape (B=16, H=4, T=128, hd=64, bf16,
// causal), q, k, v selected from one projection as nn::GPT does, forward and backward:
// the 16-bit path this CPU takes (its AVX-512 BF16 kernels where it has them, else the
// product path on the native 16-bit GEMM) against the float32 fused kernel (the 16-bit
// GEMM mode set to float32), alternating within each iteration. Counters: the medians of
// each direction (ms) and the ratio of the two totals.
void BM_tc_attention(benchmark::State& state) {
  const int64_t B = 16, H = 4, T = 128, hd = 64;
  const tc::Tensor proj = tc::randn({B, T, 3, H, hd}).to(tc::kBFloat16).requires_grad_();
  const tc::Tensor g = tc::randn({B, H, T, hd}).to(tc::kBFloat16);
  std::vector<double> fwd[2], bwd[2];
  for (auto _ : state) {
    for (int native = 0; native < 2; ++native) {
      tc::set_cpu_gemm16(native ? tc::Gemm16::kAuto : tc::Gemm16::kFloat32);
      const tc::Tensor heads = (proj * 1.0).permute({2, 0, 3, 1, 4});
      const auto t0 = std::chrono::steady_clock::now();
      const tc::Tensor y = tc::scaled_dot_product_attention(heads.select(0, 0), heads.select(0, 1), heads.select(0, 2),
                                                            tc::Tensor(), 0.0, true);
      const auto t1 = std::chrono::steady_clock::now();
      y.backward(g);
      const auto t2 = std::chrono::steady_clock::now();
      fwd[native].push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
      bwd[native].push_back(std::chrono::duration<double, std::milli>(t2 - t1).count());
      proj.set_grad(tc::Tensor());
    }
  }
  tc::set_cpu_gemm16(tc::Gemm16::kAuto);
  state.counters["16bit_fwd_ms"] = median(fwd[1]);
  state.counters["16bit_bwd_ms"] = median(bwd[1]);
  state.counters["f32_fwd_ms"] = median(fwd[0]);
  state.counters["f32_bwd_ms"] = median(bwd[0]);
  state.counters["16bit/f32"] = (median(fwd[1]) + median(bwd[1])) / (median(fwd[0]) + median(bwd[0]));
}

// ---------------------------------------------------------------- a step's products alone
// Every linear-layer product of a model's step, in bf16 with the layouts tensorcast's step
// uses (the weight read transposed through its strides; backward: dX = g W and dW = g^T x
// through a transposed view), and nothing else: no activation, norm, attention, cast or
// optimizer. Its time is what any step built on these oneDNN products must spend at least;
// bench/compare sets it against the peers. Each iteration also times one bf16 1024^3
// product, so that the pass and the GEMM peak are measured in the same seconds of a shared
// machine. Counters: the median pass (ms), its rate over the linear layers' FLOPs, the
// median 1024^3 rate (peak GFLOP/s) and their ratio.
struct ProductLayer {
  tc::Tensor x, w, b, g;
  bool needs_dx;  // false for a layer reading the data, whose input has no gradient
};

ProductLayer product_layer(int64_t rows, int64_t in, int64_t out, bool needs_dx = true) {
  const tc::DType bf = tc::kBFloat16;
  return {tc::randn({rows, in}).to(bf), (tc::randn({out, in}) * 0.05).to(bf), tc::zeros({out}, bf),
          tc::randn({rows, out}).to(bf), needs_dx};
}

void time_products(benchmark::State& state, const std::vector<ProductLayer>& ls, bool training) {
  double flops = 0;
  for (const ProductLayer& l : ls) {
    const double fwd = 2.0 * static_cast<double>(l.w.numel() * l.x.size(0));
    flops += training ? fwd * (l.needs_dx ? 3 : 2) : fwd;
  }
  const tc::Tensor a = tc::randn({kN, kN}).to(tc::kBFloat16), b = tc::randn({kN, kN}).to(tc::kBFloat16);
  tc::NoGradGuard no_grad;
  std::vector<double> ms, peak_ms;
  for (auto _ : state) {
    // A step's optimizer writes every weight: the kernel packs its tiles per product, as in
    // the step (inference keeps them: the weights are unchanged between forward passes).
    if (training)
      for (const ProductLayer& l : ls) tc::increment_version(l.w);
    const auto t0 = std::chrono::steady_clock::now();
    for (const ProductLayer& l : ls) benchmark::DoNotOptimize(tc::linear(l.x, l.w, l.b).raw_data());
    if (training)
      for (auto it = ls.rbegin(); it != ls.rend(); ++it) {
        benchmark::DoNotOptimize(tc::matmul(it->g.t(), it->x).raw_data());
        if (it->needs_dx) benchmark::DoNotOptimize(tc::matmul(it->g, it->w).raw_data());
      }
    const auto t1 = std::chrono::steady_clock::now();
    benchmark::DoNotOptimize(tc::matmul(a, b).raw_data());
    ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    peak_ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t1).count());
  }
  const double rate = flops * 1e-6 / median(ms), peak = 2.0 * kN * kN * kN * 1e-6 / median(peak_ms);
  state.counters["ms"] = median(ms);
  state.counters["GFLOP/s"] = rate;
  state.counters["peak GFLOP/s"] = peak;
  state.counters["of peak"] = rate / peak;
}

// tc::nn::GPT: qkv, attention out, fc, proj per block, and the head. Args: batch, context,
// width, layers, training (0: the forward only).
void BM_tc_gpt_products(benchmark::State& state) {
  const int64_t B = state.range(0), T = state.range(1), C = state.range(2), layers = state.range(3), vocab = 256;
  const int64_t rows = B * T;
  std::vector<ProductLayer> ls;
  for (int64_t l = 0; l < layers; ++l)
    for (auto [in, out] : {std::pair{C, 3 * C}, {C, C}, {C, 4 * C}, {4 * C, C}})
      ls.push_back(product_layer(rows, in, out));
  ls.push_back(product_layer(rows, C, vocab));
  time_products(state, ls, state.range(4) != 0);
}

// The CLI's mlp-large: Linear(W, 4W), Linear(4W, W), Linear(W, 10) (the GELUs are not
// products); the first layer reads the data, so its input gets no gradient. Args: batch,
// width, training.
void BM_tc_mlp_products(benchmark::State& state) {
  const int64_t B = state.range(0), W = state.range(1);
  time_products(state, {product_layer(B, W, 4 * W, false), product_layer(B, 4 * W, W), product_layer(B, W, 10)},
                state.range(2) != 0);
}

// ---------------------------------------------------------------- memory bandwidth
// An in-place update, a[i] += s b[i], on 2 x 128 MiB of float32 (8 times a 32 MiB L3) on
// the intra-op threads: the rate at which memory-bound work that reads and rewrites its
// state in place (an optimizer step over state no cache holds) can stream, 12 bytes an
// element (a read and a write of a, a read of b; no write-allocate traffic, as in such a
// step). The fastest repetition counts: bench/compare turns it into the least time of an
// AdamW step, which must not be overestimated.
void BM_stream_update(benchmark::State& state) {
  constexpr int64_t n = int64_t{32} << 20;
  std::vector<float> a(n, 1.0f), b(n, 2.0f);
  auto update = [&] {
    tc::parallel_for(0, n, 1 << 16, [&](int64_t i0, int64_t i1) {
      float* __restrict ap = a.data();
      const float* __restrict bp = b.data();
      for (int64_t i = i0; i < i1; ++i) ap[i] += 0.5f * bp[i];
    });
  };
  update();  // first touch
  double best = 1e30;
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    update();
    benchmark::DoNotOptimize(a.data());
    best = std::min(best, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  state.counters["GB/s"] = 12.0 * n * 1e-6 / best;
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  // Single-threaded, the calling thread's CPU time is the compute time and is not inflated
  // by other processes on a shared machine; with more threads only wall time counts them all.
  const bool wall = tc::get_num_threads() > 1;
  auto add = [&](const std::string& name, void (*fn)(benchmark::State&, tc::DType), tc::DType d) {
    auto* b = benchmark::RegisterBenchmark(name.c_str(), fn, d)->Unit(benchmark::kMillisecond);
    if (wall) b->UseRealTime();
  };
  for (tc::DType d : {tc::kFloat32, tc::kBFloat16}) {
    const std::string suffix = d == tc::kFloat32 ? "/f32" : "/bf16";
    add("tc_matmul_1024" + suffix, BM_tc_matmul, d);
    add("dnnl_matmul_1024" + suffix, BM_dnnl_matmul, d);
  }
  for (tc::DType d : {tc::kFloat32, tc::kBFloat16}) {
    const std::string suffix = d == tc::kFloat32 ? "/f32" : "/bf16";
    for (auto* fn : {BM_tc_linear_rows, BM_dnnl_linear_rows}) {
      const std::string name = std::string(fn == BM_tc_linear_rows ? "tc" : "dnnl") + "_linear_1024x4096" + suffix;
      auto* b = benchmark::RegisterBenchmark(name.c_str(), fn, d)->Unit(benchmark::kMicrosecond);
      for (int64_t rows : {1, 2, 4, 8}) b->Arg(rows);
      if (wall) b->UseRealTime();
    }
  }
  for (tc::DType d : {tc::kFloat32, tc::kBFloat16}) {
    const std::string suffix = d == tc::kFloat32 ? "/f32" : "/bf16";
    add("tc_conv2d" + suffix, BM_tc_conv2d, d);
    add("dnnl_conv2d" + suffix, BM_dnnl_conv2d, d);
  }
  // The benchmarks that time themselves in wall milliseconds, for at least min_time s.
  auto timed = [](benchmark::internal::Benchmark* b, double min_time) {
    b->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(min_time);
  };
  timed(benchmark::RegisterBenchmark("tc_mlp_block_fused_vs_composed/bf16", BM_tc_mlp_block), 3.0);
  timed(benchmark::RegisterBenchmark("tc_attention_16bit_vs_f32/bf16", BM_tc_attention), 3.0);
  // The configurations bench/compare times, named as it looks them up: gpt's B=16 step and
  // inference, batch-1 inference and the 8-layer d=512 step; mlp-large's B=1024 step and
  // inference.
  for (const auto& [name, args] :
       std::vector<std::pair<std::string, std::vector<int64_t>>>{{"B16_T128_C256_L4_train", {16, 128, 256, 4, 1}},
                                                                 {"B16_T128_C256_L4_infer", {16, 128, 256, 4, 0}},
                                                                 {"B1_T128_C256_L4_infer", {1, 128, 256, 4, 0}},
                                                                 {"B4_T256_C512_L8_train", {4, 256, 512, 8, 1}}})
    timed(benchmark::RegisterBenchmark(("tc_gpt_products/bf16/" + name).c_str(), BM_tc_gpt_products)->Args(args), 2.0);
  for (const auto& [name, args] : std::vector<std::pair<std::string, std::vector<int64_t>>>{
           {"B1024_W1024_train", {1024, 1024, 1}}, {"B1024_W1024_infer", {1024, 1024, 0}}})
    timed(benchmark::RegisterBenchmark(("tc_mlp_products/bf16/" + name).c_str(), BM_tc_mlp_products)->Args(args), 2.0);
  timed(benchmark::RegisterBenchmark("stream_update", BM_stream_update), 1.0);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
