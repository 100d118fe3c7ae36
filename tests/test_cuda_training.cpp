// The CUDA backend's training pieces against the CPU: optimizers (stochastic rounding
// included), pinned memory and the DataLoader, modules and clip_grad_norm_, an MLP and a GPT
// trained on the device, the GradScaler with its state on the device, events and
// asynchronous reads. They skip without a GPU, printing why (kernel-level checks:
// test_cuda.cpp).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "common/cuda_testing.h"
#include "common/testing.h"
#include "core/async_read.h"
#include "tensorcast/data/data_loader.h"
#include "tensorcast/tensorcast.h"

namespace tc {
namespace {

using testing::kGpu;
using testing::same_bits;

// SGD (momentum, Nesterov, weight decay) and AdamW on the device against the CPU, float32
// parameters and bf16 ones with float32 master weights, three steps, one of them through
// an AmpStep (inv_scale applied on the way in). The device contracts a*b+c into FMAs where
// the CPU rounds twice, so they agree to a few float32 ulps, not bit for bit.
TEST(Cuda, OptimizersMatchTheCpu) {
  SKIP_WITHOUT_GPU();
  for (DType dt : {kFloat32, kBFloat16}) {
    for (int which : {0, 1, 2}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + (which == 0   ? " SGD momentum"
                                                  : which == 1 ? " SGD nesterov"
                                                               : " AdamW"));
      auto run = [&](Device d) {
        manual_seed(10);
        Tensor p = randn({300}).to(dt).to(d).requires_grad_();
        std::unique_ptr<optim::Optimizer> opt;
        if (which == 0)
          opt = std::make_unique<optim::SGD>(std::vector<Tensor>{p},
                                             optim::SGDOptions(0.1).momentum(0.9).weight_decay(0.01));
        else if (which == 1)
          opt =
              std::make_unique<optim::SGD>(std::vector<Tensor>{p}, optim::SGDOptions(0.1).momentum(0.9).nesterov(true));
        else
          opt = std::make_unique<optim::AdamW>(std::vector<Tensor>{p}, optim::AdamWOptions(0.01));
        for (int step = 0; step < 3; ++step) {
          opt->zero_grad();
          sum(mul(mul(p, p), 0.5)).backward();  // gradient p
          if (step == 1) {
            NoGradGuard ng;
            Tensor g = p.grad();
            g.mul_(4.0);  // a scaled gradient, unscaled by the step
            opt->step(optim::AmpStep{full({}, 0.25, TensorOptions(d)), zeros({}, TensorOptions(d))});
          } else {
            opt->step();
          }
        }
        return p.detach().to(Device(kCPU));
      };
      const Tensor want = run(Device(kCPU)), got = run(kGpu);
      EXPECT_TRUE(testing::all_close(got, want.to_vector(),
                                     dt == kFloat32 ? testing::Tol{1e-6, 1e-6} : testing::Tol{0x1p-8, 0x1p-8}));
    }
  }
}

// Stochastic rounding of 16-bit parameters from their float32 master weights on the device
// gives the CPU's bits (the same hash of seed, step, parameter and element index). SGD with
// lr 1 and no momentum makes each master update one exact negation and one rounded add on
// both devices, so the masters agree bit for bit and the comparison is of the rounding.
TEST(Cuda, StochasticRoundingMatchesTheCpuBitForBit) {
  SKIP_WITHOUT_GPU();
  for (DType dt : {kBFloat16, kFloat16}) {
    SCOPED_TRACE(dtype_name(dt));
    auto run = [&](Device d, optim::Rounding rounding) {
      manual_seed(21);
      Tensor p = randn({4096}).to(dt).to(d).requires_grad_();
      const Tensor c = mul(randn({4096}), 0.01).to(d);
      optim::SGD opt({p}, optim::SGDOptions(1.0));
      opt.set_rounding(rounding, 7);
      for (int step = 0; step < 3; ++step) {
        opt.zero_grad();
        sum(mul(p, c)).backward();
        opt.step();
      }
      return p.detach().to(Device(kCPU));
    };
    const Tensor want = run(Device(kCPU), optim::Rounding::Stochastic);
    EXPECT_TRUE(same_bits(run(kGpu, optim::Rounding::Stochastic), want));
    EXPECT_FALSE(same_bits(run(kGpu, optim::Rounding::NearestEven), want)) << "the rounding was not stochastic";
  }
}

// Pinned host memory: pin_memory() copies into page-locked memory; copies from it to the
// device with non_blocking return at once and still deliver the bytes when the source is
// dropped right away (the block is kept until the copy is done, then reused); a
// non_blocking copy into pinned memory is complete after a synchronize; a DataLoader
// asked to pin hands out pinned batches.
TEST(CudaPinned, AsynchronousCopiesKeepTheirSourceAlive) {
  SKIP_WITHOUT_GPU();
  const Tensor t = randn({3, 257});
  const Tensor p = t.pin_memory();
  EXPECT_TRUE(p.is_pinned());
  EXPECT_FALSE(t.is_pinned());
  EXPECT_TRUE(same_bits(p, t));
  EXPECT_EQ(p.pin_memory().impl(), p.impl());  // already pinned: itself
  std::vector<Tensor> on_gpu;
  for (int i = 0; i < 50; ++i) {  // each source dies at once; later ones reuse the cached blocks
    on_gpu.push_back(mul(t, static_cast<double>(i)).pin_memory().to(kGpu, /*non_blocking=*/true));
  }
  for (int i = 0; i < 50; ++i) EXPECT_TRUE(same_bits(on_gpu[i], mul(t, static_cast<double>(i)))) << i;
  // To the CPU without waiting: the result is pinned, complete after a synchronize.
  const Tensor dst = on_gpu[7].to(Device(kCPU), /*non_blocking=*/true);
  EXPECT_TRUE(dst.is_pinned());
  cuda::synchronize();
  EXPECT_TRUE(same_bits(dst, mul(t, 7.0)));
  EXPECT_FALSE(on_gpu[7].to(Device(kCPU)).is_pinned());
}

TEST(CudaPinned, DataLoaderPinsBatches) {
  SKIP_WITHOUT_GPU();
  const data::TensorDataset ds(randn({100, 8}), arange(100, kInt64));
  data::DataLoader plain(ds, data::DataLoaderOptions(16)), pinned(ds, data::DataLoaderOptions(16).pin_memory(true));
  auto a = plain.begin();
  auto b = pinned.begin();
  int n = 0;
  for (; a != plain.end() && b != pinned.end(); ++a, ++b, ++n) {
    EXPECT_TRUE(b->data.is_pinned());
    EXPECT_TRUE(b->target.is_pinned());
    EXPECT_TRUE(same_bits(b->data.to(kGpu, true), a->data));
    EXPECT_TRUE(same_bits(b->target, a->target));
  }
  EXPECT_EQ(n, 7);
}

// nn::BatchNorm2d moved to the device counts its batches there (no host read of the
// counter) and normalizes as on the CPU, running statistics included.
TEST(Cuda, BatchNormModuleCountsBatchesOnTheDevice) {
  SKIP_WITHOUT_GPU();
  auto run = [](Device d) {
    manual_seed(22);
    nn::BatchNorm2d bn(nn::BatchNorm2dOptions(3));
    bn->to(d);
    const Tensor x = randn({4, 3, 5, 5}).to(d);
    Tensor y;
    for (int i = 0; i < 2; ++i) y = bn->forward(x);
    EXPECT_EQ(bn->num_batches_tracked.device(), d);
    return std::vector<Tensor>{y.to(Device(kCPU)), bn->running_mean.to(Device(kCPU)),
                               bn->num_batches_tracked.to(Device(kCPU))};
  };
  const auto want = run(Device(kCPU)), got = run(kGpu);
  EXPECT_EQ(got[2].item<int64_t>(), 2);
  EXPECT_TRUE(testing::all_close(got[0], want[0].to_vector(), {1e-5, 1e-5}));
  EXPECT_TRUE(testing::all_close(got[1], want[1].to_vector(), {1e-6, 1e-6}));
}

// clip_grad_norm_ on device gradients (one host read for all of them) gives the CPU's norm
// and clipped gradients, for the 2-norm, the 1-norm and the max norm.
TEST(Cuda, ClipGradNormMatchesTheCpu) {
  SKIP_WITHOUT_GPU();
  for (double p : {2.0, 1.0, std::numeric_limits<double>::infinity()}) {
    SCOPED_TRACE(p);
    auto run = [&](Device d) {
      manual_seed(23);
      std::vector<Tensor> params;
      for (int64_t n : {10, 300, 7}) {
        Tensor w = randn({n}).to(d).requires_grad_();
        sum(mul(w, w)).backward();
        params.push_back(w);
      }
      const double norm = nn::utils::clip_grad_norm_(params, 0.5, p);
      std::vector<double> g;
      for (const Tensor& w : params)
        for (double v : w.grad().to_vector()) g.push_back(v);
      return std::pair<double, std::vector<double>>{norm, g};
    };
    const auto [want_norm, want_g] = run(Device(kCPU));
    const auto [got_norm, got_g] = run(kGpu);
    EXPECT_NEAR(got_norm, want_norm, 1e-9 * want_norm);
    ASSERT_EQ(got_g.size(), want_g.size());
    for (size_t i = 0; i < got_g.size(); ++i) EXPECT_NEAR(got_g[i], want_g[i], 1e-6 * (1 + std::fabs(want_g[i])));
  }
}

// An MLP moved to the device with Module::to trains there, in float32 and under bf16
// autocast with AdamW, as on the CPU: the same losses step by step (to the products'
// rounding; bf16 within a bf16 ulp of the loss).
TEST(Cuda, AnMlpTrainsOnTheDeviceAsOnTheCpu) {
  SKIP_WITHOUT_GPU();
  for (bool bf16 : {false, true}) {
    SCOPED_TRACE(bf16 ? "bf16 autocast" : "float32");
    auto losses = [&](Device d) {
      manual_seed(12);
      nn::Sequential net(nn::Linear(20, 64), nn::GELU(), nn::Linear(64, 64), nn::ReLU(), nn::Linear(64, 5));
      net->to(d);
      optim::AdamW opt(net->parameters(), optim::AdamWOptions(1e-2));
      const Tensor x = randn({32, 20}).to(d);
      const Tensor y = randint(0, 5, {32}).to(d);
      std::vector<double> out;
      for (int step = 0; step < 5; ++step) {
        opt.zero_grad();
        Tensor loss;
        {
          amp::AutocastGuard guard(d.type, kBFloat16, bf16);
          loss = cross_entropy(net->forward(x), y);
        }
        loss.backward();
        opt.step();
        out.push_back(loss.item<double>());
      }
      return out;
    };
    const std::vector<double> want = losses(Device(kCPU)), got = losses(kGpu);
    for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], bf16 ? 2e-2 : 1e-4) << "step " << i;
  }
}

// A small GPT (embeddings with positions, causal attention, GELU MLP, layer norms, the lm
// head) trained on the device with bf16 autocast and fp16 + GradScaler, against the CPU:
// the same losses to the 16-bit products' rounding. Also a root gradient made on the
// device (sum(...).backward() and scale(loss).backward(), not only the losses' own), and
// the gradients of select/narrow views of a device tensor.
TEST(Cuda, AGptTrainsOnTheDeviceAsOnTheCpu) {
  SKIP_WITHOUT_GPU();
  for (DType dt : {kBFloat16, kFloat16}) {
    SCOPED_TRACE(dtype_name(dt));
    auto losses = [&](Device d) {
      manual_seed(14);
      nn::GPT net(nn::GPTConfig().vocab_size(64).context(32).layers(2).heads(2).width(64));
      net->to(d);
      optim::AdamW opt(net->parameters(), optim::AdamWOptions(3e-3));
      amp::GradScaler scaler(amp::GradScalerOptions().init_scale(1024).enabled(dt == kFloat16));
      const Tensor x = randint(0, 64, {4, 32}).to(d), y = randint(0, 64, {4, 32}).to(d);
      std::vector<double> out;
      for (int step = 0; step < 4; ++step) {
        opt.zero_grad();
        Tensor loss;
        {
          amp::AutocastGuard guard(d.type, dt);
          loss = cross_entropy(net->forward(x).reshape({-1, 64}), y.reshape({-1}));
        }
        scaler.scale(loss * 1.0).backward();  // a root that is not the loss op itself
        scaler.step(opt);
        scaler.update();
        out.push_back(loss.item<double>());
      }
      return out;
    };
    const std::vector<double> want = losses(Device(kCPU)), got = losses(kGpu);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 2e-2 * std::fabs(want[i])) << "step " << i;
  }
  const Tensor w = randn({3, 5}).to(kGpu).requires_grad_();
  sum(mul(w.select(0, 1), 2.0) + w.narrow(1, 0, 2).sum()).backward();
  ASSERT_TRUE(w.grad().defined());
  EXPECT_EQ(w.grad().device(), kGpu);
  const std::vector<double> g = w.grad().to_vector();
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t j = 0; j < 5; ++j)
      EXPECT_EQ(g[static_cast<size_t>(i * 5 + j)], (i == 1 ? 2.0 : 0.0) + (j < 2 ? 5.0 : 0.0)) << i << "," << j;
}

// fp16 autocast with a GradScaler on the device, against the CPU: an initial scale of 2^40
// overflows the fp16 gradients, so the first steps are skipped and the scale backs off
// both devices skip the same steps, end on the same scale and similar losses.
TEST(Cuda, GradScalerSkipsAndBacksOffAsOnTheCpu) {
  SKIP_WITHOUT_GPU();
  struct Run {
    std::vector<double> losses;
    double scale = 0;
    int64_t skipped = 0;
  };
  auto train = [&](Device d) {
    manual_seed(13);
    nn::Sequential net(nn::Linear(20, 64), nn::ReLU(), nn::Linear(64, 5));
    net->to(d);
    optim::SGD opt(net->parameters(), optim::SGDOptions(0.05).momentum(0.9));
    amp::GradScaler scaler(amp::GradScalerOptions().init_scale(0x1p40).growth_interval(1000));
    const Tensor x = randn({32, 20}).to(d), y = randint(0, 5, {32}).to(d);
    Run r;
    for (int step = 0; step < 40; ++step) {
      opt.zero_grad();
      Tensor loss;
      {
        amp::AutocastGuard guard(d.type, kFloat16);
        loss = cross_entropy(net->forward(x), y);
      }
      scaler.scale(loss).backward();
      if (step % 2 == 0) scaler.unscale_(opt);  // both paths: explicit unscale_, and step's fused one
      scaler.step(opt);
      scaler.update();
      r.losses.push_back(loss.item<double>());
    }
    r.scale = scaler.get_scale();
    r.skipped = scaler.steps_skipped();
    return r;
  };
  const Run want = train(Device(kCPU)), got = train(kGpu);
  EXPECT_GT(want.skipped, 0);
  EXPECT_EQ(got.skipped, want.skipped);
  EXPECT_EQ(got.scale, want.scale);
  EXPECT_NEAR(got.losses.back(), want.losses.back(), 2e-2);
}

// The scaler's state lives on the device of the loss, and a CUDA step reads nothing back:
// nothing below is read on the host until the end, so the skips (the very first step among
// them, with SGD's dampened momentum and AdamW's bf16 master weights that the skipped step
// must not create) are settled from the flags copied back one step late. Against the same
// run on the CPU: equal scale, trackers, counts and optimizer step counts, parameters
// within the kernels' FMA tolerance.
TEST(CudaScaler, StateStaysOnTheDeviceAndMatchesTheCpu) {
  SKIP_WITHOUT_GPU();
  const std::vector<int> bad = {0, 3, 4, 9};
  for (int which : {0, 1}) {
    SCOPED_TRACE(which == 0 ? "SGD dampening" : "AdamW bf16");
    struct Result {
      double scale = 0;
      int64_t growth = 0, taken = 0, skipped = 0, steps = 0;
      bool last_skipped = false;
      Tensor p;
    };
    auto run = [&](Device d) {
      manual_seed(31);
      const DType dt = which == 0 ? kFloat32 : kBFloat16;
      Tensor p = randn({1000}).to(dt).to(d).requires_grad_();
      const Tensor c = randn({1000});
      Tensor c_bad = c.clone();
      static_cast<float*>(c_bad.raw_data())[7] = std::numeric_limits<float>::infinity();
      const Tensor good = c.to(d), overflow = c_bad.to(d);
      std::unique_ptr<optim::Optimizer> opt;
      if (which == 0)
        opt =
            std::make_unique<optim::SGD>(std::vector<Tensor>{p}, optim::SGDOptions(0.01).momentum(0.9).dampening(0.5));
      else
        opt = std::make_unique<optim::AdamW>(std::vector<Tensor>{p}, optim::AdamWOptions(1e-3));
      amp::GradScaler scaler(amp::GradScalerOptions().init_scale(1024).growth_interval(3));
      for (int s = 0; s < 12; ++s) {
        opt->zero_grad();
        const bool overflows = std::find(bad.begin(), bad.end(), s) != bad.end();
        scaler.scale(sum(mul(p, overflows ? overflow : good))).backward();
        if (s % 2) scaler.unscale_(*opt);
        scaler.step(*opt);
        scaler.update();
      }
      Result r;
      r.last_skipped = scaler.last_step().skipped;
      r.taken = scaler.steps_taken();
      r.skipped = scaler.steps_skipped();
      r.scale = scaler.get_scale();
      r.growth = scaler.get_growth_tracker();
      r.steps = opt->state_dict().at("state.0.step").item<int64_t>();
      r.p = p.detach().to(Device(kCPU)).to(kFloat32);
      return r;
    };
    const Result want = run(Device(kCPU)), got = run(kGpu);
    EXPECT_EQ(want.skipped, 4);
    EXPECT_EQ(got.skipped, want.skipped);
    EXPECT_EQ(got.taken, want.taken);
    EXPECT_EQ(got.steps, want.steps);
    EXPECT_EQ(got.scale, want.scale);
    EXPECT_EQ(got.growth, want.growth);
    EXPECT_EQ(got.last_skipped, want.last_skipped);
    EXPECT_TRUE(testing::all_close(got.p, want.p.to_vector(),
                                   which == 0 ? testing::Tol{1e-5, 1e-5} : testing::Tol{0x1p-7, 0x1p-7}));
  }
}

// A backoff below min_scale is refused on the device (the scale stays) and raised by the
// next step() or update() (on the CPU update() itself raises); the reporting calls do not
// raise it, and update(new_scale) would drop it.
TEST(CudaScaler, RefusedBackoffRaisesAtTheNextCall) {
  SKIP_WITHOUT_GPU();
  Tensor p = randn({16}).to(kGpu).requires_grad_();
  Tensor c = full({16}, std::numeric_limits<double>::infinity()).to(kGpu);
  optim::SGD opt({p}, optim::SGDOptions(0.1));
  amp::GradScaler scaler(amp::GradScalerOptions().init_scale(2).min_scale(1));
  for (int s = 0; s < 2; ++s) {
    opt.zero_grad();
    scaler.scale(sum(mul(p, c))).backward();
    scaler.step(opt);
    scaler.update();  // the second would back off to 0.5
  }
  EXPECT_EQ(scaler.steps_skipped(), 2);  // counts without raising
  opt.zero_grad();
  scaler.scale(sum(mul(p, c))).backward();
  testing::expect_error(
      [&] {
        scaler.step(opt);
        scaler.update();
      },
      {"[GradScaler]", "below min_scale 1"});
  EXPECT_EQ(scaler.get_scale(), 1.0);
}

// cuda::Event marks a point of a stream; AsyncScalarRead brings a device value back behind it.
TEST(Cuda, EventsAndAsynchronousReads) {
  SKIP_WITHOUT_GPU();
  cuda::Event never;
  EXPECT_TRUE(never.query());  // never recorded: done
  const Tensor x = full({}, 3.5, TensorOptions(kFloat32).device(kGpu));
  Tensor y = mul(x, 2.0);
  cuda::Event e;
  e.record(cuda::current_stream(0));
  e.synchronize();
  EXPECT_TRUE(e.query());
  const detail::AsyncScalarRead read(add(y, 1.0));
  y.fill_(0.0);  // later work does not change what was read
  EXPECT_EQ(read.value(), 8.0f);
  EXPECT_TRUE(read.ready());
}

}  // namespace
}  // namespace tc
