// GradScaler benchmarks: the fused unscale + inf check over 10M gradient elements (fp32,
// bf16, fp16; GB/s counts bytes read + written) against memcpy, the ceiling of a pass
// that reads and writes every byte once, and the scaler's overhead in an MLP training step.
//
//   ./bench_amp                       # all threads
//   OMP_NUM_THREADS=1 ./bench_amp     # one core
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstring>
#include <vector>

#include "backend/cpu/loops/amp_kernels.h"
#include "tensorcast/amp/grad_scaler.h"
#include "tensorcast/optim/sgd.h"
#include "tensorcast/tensorcast.h"

namespace {

constexpr int64_t kElements = 10'000'000;

tc::DType dtype_arg(int64_t i) { return i == 0 ? tc::kFloat32 : i == 1 ? tc::kBFloat16 : tc::kFloat16; }

void set_label(benchmark::State& state, tc::DType dt, const char* what) {
  state.SetLabel(std::string(what) + " " + std::string(tc::dtype_name(dt)));
}

// memcpy of the same bytes: one thread, and split over the intra-op threads.
void BM_Memcpy(benchmark::State& state) {
  const int64_t bytes = kElements * 4;
  std::vector<char> src(bytes, 1), dst(bytes, 0);
  const bool parallel = state.range(0) != 0;
  for (auto _ : state) {
    if (parallel)
      tc::parallel_for(0, bytes, 1 << 20, [&](int64_t b, int64_t e) { std::memcpy(&dst[b], &src[b], e - b); });
    else
      std::memcpy(dst.data(), src.data(), bytes);
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * 2 * bytes);
  state.SetLabel(parallel ? "40 MB, all threads" : "40 MB, one thread");
}
BENCHMARK(BM_Memcpy)->Arg(0)->Arg(1)->UseRealTime();

// Ten gradients of 1M elements each: one multi-tensor pass, as unscale_ runs it.
std::vector<tc::Tensor> make_grads(tc::DType dt) {
  std::vector<tc::Tensor> g;
  for (int k = 0; k < 10; ++k) g.push_back(tc::randn({kElements / 10}, dt));
  return g;
}

void BM_UnscaleAndCheck(benchmark::State& state) {
  const tc::DType dt = dtype_arg(state.range(0));
  auto grads = make_grads(dt);
  tc::Tensor found = tc::zeros({});
  // Alternating x2 and x0.5 keeps the values stable (no drift into subnormals).
  tc::Tensor up = tc::full({}, 2.0), down = tc::full({}, 0.5);
  bool flip = false;
  for (auto _ : state) {
    tc::cpu::amp_non_finite_check_and_unscale_(grads, found, (flip = !flip) ? up : down);
  }
  state.SetBytesProcessed(state.iterations() * 2 * kElements * static_cast<int64_t>(tc::element_size(dt)));
  set_label(state, dt, "10M, read+write");
}
BENCHMARK(BM_UnscaleAndCheck)->DenseRange(0, 2)->UseRealTime();

void BM_CheckOnly(benchmark::State& state) {
  const tc::DType dt = dtype_arg(state.range(0));
  auto grads = make_grads(dt);
  tc::Tensor found = tc::zeros({});
  for (auto _ : state) tc::cpu::amp_non_finite_check(grads, found);
  state.SetBytesProcessed(state.iterations() * kElements * static_cast<int64_t>(tc::element_size(dt)));
  set_label(state, dt, "10M, read only");
}
BENCHMARK(BM_CheckOnly)->DenseRange(0, 2)->UseRealTime();

// The public path: GradScaler::unscale_ on an optimizer holding one 10M-element gradient.
void BM_ScalerUnscale(benchmark::State& state) {
  tc::Tensor p = tc::zeros({kElements}).requires_grad_();
  p.set_grad(tc::randn({kElements}));
  tc::optim::SGD opt({p}, tc::optim::SGDOptions(0.1));
  tc::amp::GradScaler scaler(tc::amp::GradScalerOptions().init_scale(2.0));
  scaler.scale(tc::zeros({}));
  bool flip = false;
  for (auto _ : state) {
    scaler.unscale_(opt);
    scaler.update((flip = !flip) ? 0.5 : 2.0);  // resets the state machine; keeps values stable
  }
  state.SetBytesProcessed(state.iterations() * 2 * kElements * 4);
  state.SetLabel("10M f32 via GradScaler::unscale_");
}
BENCHMARK(BM_ScalerUnscale)->UseRealTime();

// One MLP training step (784-1024-1024-10, batch 128, fp32, SGD with momentum) with and
// without the scaler, interleaved so that machine noise hits both alike.
struct Mlp {
  std::vector<tc::Tensor> params;
  tc::Tensor x, y;
  Mlp() {
    tc::manual_seed(1);
    const int64_t sizes[] = {784, 1024, 1024, 10};
    for (int l = 0; l < 3; ++l) {
      params.push_back((tc::randn({sizes[l + 1], sizes[l]}) * 0.03).detach().requires_grad_());
      params.push_back(tc::zeros({sizes[l + 1]}).requires_grad_());
    }
    x = tc::randn({128, 784});
    y = tc::randint(0, 10, {128});
  }
  tc::Tensor loss() const {
    tc::Tensor h = x;
    for (int l = 0; l < 3; ++l) {
      h = tc::linear(h, params[2 * l], params[2 * l + 1]);
      if (l < 2) h = tc::relu(h);
    }
    return tc::cross_entropy(h, y);
  }
};

void BM_StepOverhead(benchmark::State& state) {
  Mlp plain_model, scaled_model;
  tc::optim::SGD plain(plain_model.params, tc::optim::SGDOptions(1e-3).momentum(0.9));
  tc::optim::SGD scaled(scaled_model.params, tc::optim::SGDOptions(1e-3).momentum(0.9));
  tc::amp::GradScaler scaler;
  using clock = std::chrono::steady_clock;
  double t_plain = 0, t_scaled = 0;
  for (auto _ : state) {
    auto t0 = clock::now();
    plain.zero_grad();
    plain_model.loss().backward();
    plain.step();
    auto t1 = clock::now();
    scaled.zero_grad();
    scaler.scale(scaled_model.loss()).backward();
    scaler.step(scaled);
    scaler.update();
    auto t2 = clock::now();
    t_plain += std::chrono::duration<double>(t1 - t0).count();
    t_scaled += std::chrono::duration<double>(t2 - t1).count();
  }
  const double n = static_cast<double>(state.iterations());
  state.counters["plain_ms"] = 1e3 * t_plain / n;
  state.counters["scaler_ms"] = 1e3 * t_scaled / n;
  state.counters["overhead_%"] = 100.0 * (t_scaled - t_plain) / t_plain;
  state.SetLabel("MLP 784-1024-1024-10, batch 128, fp32, SGD momentum; both steps per iteration");
}
BENCHMARK(BM_StepOverhead)->Unit(benchmark::kMillisecond)->MinTime(3.0)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
