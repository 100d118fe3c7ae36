// The CUDA backend's kernels: devices and errors, memory, copies and casts, matrix products,
// the GradScaler's unscale kernel, and each op family (training pieces:
// test_cuda_training.cpp). The first group runs everywhere (what a build or machine
// without a GPU answers); the rest skip without a GPU, printing why, and compare each
// CUDA result with the CPU's (bit for bit where both compute the same way) or with float64.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "amp/dispatch.h"
#include "backend/cpu/loops/amp_kernels.h"
#include "backend/cpu/loops/dropout.h"
#if defined(TC_WITH_CUDNN)
#include "backend/cuda/conv.h"  // conv2d_cache_size
#endif
#include "backend/kernels.h"
#include "common/cuda_testing.h"
#include "common/testing.h"
#include "core/tensor_impl.h"
#include "tensorcast/cuda.h"
#include "tensorcast/tensorcast.h"

namespace tc {
namespace {

using testing::kGpu;
using testing::same_bits;

Tensor random_bits(int64_t n, DType dt, uint64_t seed) {
  Tensor t = empty({n}, dt);
  std::mt19937_64 g(seed);
  auto* p = static_cast<unsigned char*>(t.raw_data());
  for (size_t i = 0; i < static_cast<size_t>(n) * element_size(dt); ++i) p[i] = static_cast<unsigned char>(g());
  if (dt == kBool)
    for (int64_t i = 0; i < n; ++i) p[i] &= 1;
  return t;
}

// ---------------------------------------------------------------- without a GPU too

TEST(CudaRuntime, SaysWhyItIsUnavailable) {
  if (cuda::is_available()) {
    EXPECT_GT(cuda::device_count(), 0);
    EXPECT_EQ(cuda::unavailable_reason(), "");
    return;
  }
  EXPECT_EQ(cuda::device_count(), 0);
  EXPECT_NE(cuda::unavailable_reason(), "");
  EXPECT_THROW(cuda::current_device(), Error);
  EXPECT_THROW(cuda::synchronize(), Error);
  try {
    (void)empty({4}, TensorOptions(kGpu));
    FAIL() << "allocating on cuda:0 without a device did not throw";
  } catch (const Error& e) {
    // A CUDA build without a device says why; a CPU-only build that it has no backend for
    // the device (tc::cuda::unavailable_reason() says how to build one).
    const std::string msg = e.what();
    EXPECT_TRUE(msg.find(cuda::unavailable_reason()) != std::string::npos ||
                msg.find("device cuda:0 is not available: this build has no backend for it") != std::string::npos)
        << msg;
  }
  EXPECT_THROW((void)ones({2}).to(kGpu), Error);
}

// conv2d on a CUDA tensor in a build without cuDNN (or without CUDA) says so, naming the op,
// before any kernel reads the memory (a from_blob over host memory claiming cuda:0).
TEST(CudaRuntime, Conv2dWithoutCudnnSaysHowToGetIt) {
  if (testing::kBuiltWithCudnn) GTEST_SKIP() << "this build has cuDNN";
  std::vector<float> host(2 * 3 * 5 * 5, 1.0f), weight(4 * 3 * 3 * 3, 1.0f);
  const Tensor x = from_blob(host.data(), {2, 3, 5, 5}, TensorOptions(kGpu));
  const Tensor w = from_blob(weight.data(), {4, 3, 3, 3}, TensorOptions(kGpu));
  try {
    (void)conv2d(x, w, Tensor(), {1, 1}, {1, 1});
    ADD_FAILURE() << "conv2d ran without cuDNN";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("conv2d"), std::string::npos) << msg;
    // A CUDA build says how to get cuDNN; a CPU-only build that it has no backend for the device.
    const bool cpu_only = msg.find("no backend of this build") != std::string::npos;
    EXPECT_TRUE(msg.find("TC_CUDNN_ROOT") != std::string::npos || cpu_only) << msg;
  }
  EXPECT_EQ(host, std::vector<float>(2 * 3 * 5 * 5, 1.0f));
}

// Pinned memory where no GPU is usable: pin_memory() says why, and a DataLoader asked to pin
// hands out the same (unpinned) batches, as PyTorch ignores pin_memory without a device.
TEST(CudaRuntime, PinnedMemoryWithoutAGpu) {
  if (cuda::is_available()) GTEST_SKIP() << "a GPU is present (CudaPinned.* cover pinned memory)";
  const Tensor t = arange(6, kFloat32);
  EXPECT_FALSE(t.is_pinned());
  EXPECT_TRUE(testing::throws_with([&] { (void)t.pin_memory(); }, {"[pin_memory]", "pinned memory needs a"}));
  const data::TensorDataset ds(arange(10, kFloat32).reshape({10, 1}), arange(10, kInt64));
  data::DataLoader plain(ds, data::DataLoaderOptions(4)), pinned(ds, data::DataLoaderOptions(4).pin_memory(true));
  auto a = plain.begin();
  auto b = pinned.begin();
  for (; a != plain.end() && b != pinned.end(); ++a, ++b) {
    EXPECT_FALSE(b->data.is_pinned());
    EXPECT_TRUE(same_bits(b->data, a->data));
    EXPECT_TRUE(same_bits(b->target, a->target));
  }
}

// ---------------------------------------------------------------- on a GPU

TEST(Cuda, DevicePropertiesAndStreams) {
  SKIP_WITHOUT_GPU();
  const cuda::DeviceProperties p = cuda::get_device_properties(0);
  EXPECT_FALSE(p.name.empty());
  EXPECT_GE(p.major, 7);
  EXPECT_GT(p.total_memory, int64_t{1} << 30);
  EXPECT_EQ(cuda::current_stream(), cuda::default_stream());
  const cuda::Stream side = cuda::stream_from_pool();
  EXPECT_NE(side.handle(), nullptr);
  {
    cuda::StreamGuard guard(side);
    EXPECT_EQ(cuda::current_stream(), side);
    const Tensor x = arange(1000.0).to(kGpu);  // allocated and copied on the side stream
    EXPECT_EQ(x.impl()->storage->stream, side.handle());
    EXPECT_EQ(x.to(Device(kCPU)).to_vector()[999], 999.0);
    side.synchronize();
    EXPECT_TRUE(side.query());
  }
  EXPECT_EQ(cuda::current_stream(), cuda::default_stream());
  EXPECT_THROW(cuda::set_device(cuda::device_count()), Error);
}

TEST(Cuda, MemoryStatsCountTensorsAndTheCache) {
  SKIP_WITHOUT_GPU();
  const int64_t bytes = int64_t{64} << 20;
  const MemoryStats before = memory_stats(kGpu);
  {
    const Tensor t = empty({bytes / 4}, TensorOptions(kGpu));
    const MemoryStats during = memory_stats(kGpu);
    EXPECT_EQ(during.current_bytes - before.current_bytes, bytes);
    EXPECT_GE(during.peak_bytes, during.current_bytes);
    EXPECT_GE(during.reserved_bytes, during.current_bytes);
  }
  cuda::synchronize();
  const MemoryStats after = memory_stats(kGpu);
  EXPECT_EQ(after.current_bytes, before.current_bytes);
  EXPECT_GE(after.cached_bytes, bytes);  // kept for the next step
  empty_cache(kGpu);
  EXPECT_LT(memory_stats(kGpu).reserved_bytes, after.reserved_bytes);
  EXPECT_EQ(memory_stats(Device(kCPU)).current_bytes, memory_stats(Device(kCPU)).current_bytes);
}

TEST(Cuda, OutOfMemoryIsAnErrorAndNothingIsLost) {
  SKIP_WITHOUT_GPU();
  const Tensor kept = full({1000}, 3.0, TensorOptions(kGpu));
  try {
    (void)empty({int64_t{1} << 50}, TensorOptions(kGpu).dtype(kFloat32));  // 4 PiB
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("out of memory"), std::string::npos) << e.what();
  }
  EXPECT_EQ(kept.to(Device(kCPU)).to_vector()[999], 3.0);
  EXPECT_EQ(full({8}, 2.0, TensorOptions(kGpu)).to(Device(kCPU)).to_vector()[7], 2.0);  // still allocates
}

// Every dtype, contiguous, channels-last and non-dense, there and back: the same bits and
// the dense layouts kept.
TEST(Cuda, ToDeviceAndBackKeepsBitsAndLayout) {
  SKIP_WITHOUT_GPU();
  for (DType dt : {kFloat32, kFloat16, kBFloat16, kFloat64, kInt64, kInt32, kUInt8, kBool}) {
    SCOPED_TRACE(dtype_name(dt));
    const Tensor x = random_bits(2 * 3 * 4 * 5, dt, 7).view({2, 3, 4, 5});
    EXPECT_TRUE(same_bits(x.to(kGpu), x));
    const Tensor cl = x.contiguous(MemoryFormat::ChannelsLast);
    const Tensor g = cl.to(kGpu);
    EXPECT_EQ(g.strides(), cl.strides());
    EXPECT_TRUE(same_bits(g, cl));
    const Tensor odd = x.transpose(1, 3).narrow(0, 1, 1);  // not dense: made contiguous on the way
    EXPECT_TRUE(same_bits(odd.to(kGpu), odd.contiguous()));
    EXPECT_TRUE(same_bits(g.transpose(0, 2).to(Device(kCPU)), cl.transpose(0, 2)));
  }
}

// Casts on the device give the CPU's bits: every 16-bit pattern widened, 2^20 random
// float32 and float64 patterns (NaN payloads, subnormals, ties) narrowed, integers and bool.
TEST(Cuda, CastsMatchTheCpuBitForBit) {
  SKIP_WITHOUT_GPU();
  const DType all[] = {kFloat32, kFloat16, kBFloat16, kFloat64, kInt64, kInt32, kUInt8, kBool};
  for (DType from : all) {
    const int64_t n = element_size(from) == 2 ? 65536 : int64_t{1} << 20;
    Tensor x = random_bits(n, from, 11);
    if (element_size(from) == 2)  // exhaustive
      for (int64_t i = 0; i < n; ++i) static_cast<uint16_t*>(x.raw_data())[i] = static_cast<uint16_t>(i);
    if (from == kFloat32 || from == kFloat64) {  // finite values too, so integer casts are defined
      Tensor v = mul(randn({n}, TensorOptions(from)), 1000.0);
      x = cat({x.narrow(0, 0, n / 2), v.narrow(0, 0, n / 2)}, 0).detach();
    }
    const Tensor gx = x.to(kGpu);
    for (DType to : all) {
      if (!is_floating(to) && is_floating(from)) continue;  // float -> int of inf/NaN is undefined in C++
      SCOPED_TRACE(std::string(dtype_name(from)) + " -> " + std::string(dtype_name(to)));
      EXPECT_TRUE(same_bits(gx.to(to), x.to(to)));
    }
  }
  // Finite floats to integers (truncation, as the CPU's static_cast).
  const Tensor f = mul(randn({4096}), 100.0).detach();
  for (DType to : {kInt64, kInt32, kUInt8, kBool}) EXPECT_TRUE(same_bits(f.abs().to(kGpu).to(to), f.abs().to(to)));
}

TEST(Cuda, StridedBroadcastCopiesAndFills) {
  SKIP_WITHOUT_GPU();
  const Tensor row = randn({1, 7});
  Tensor dst_cpu = zeros({7, 5}).t();  // (5, 7) transposed view
  Tensor dst_gpu = zeros({7, 5}, TensorOptions(kGpu)).t();
  dst_cpu.copy_(row);
  dst_gpu.copy_(row.to(kGpu));
  EXPECT_TRUE(same_bits(dst_gpu, dst_cpu));
  dst_gpu.copy_(row.to(kBFloat16));  // across devices and dtypes at once
  dst_cpu.copy_(row.to(kBFloat16));
  EXPECT_TRUE(same_bits(dst_gpu, dst_cpu));
  Tensor sliced = zeros({6, 8}, TensorOptions(kGpu).dtype(kFloat16)).slice(1, 1, 8, 2);
  sliced.fill_(0.1);
  EXPECT_TRUE(same_bits(sliced, full({6, 4}, 0.1, TensorOptions(kFloat16))));
  manual_seed(5);
  const Tensor a = randn({33, 17}, TensorOptions(kGpu).dtype(kBFloat16));
  manual_seed(5);
  EXPECT_TRUE(same_bits(a, randn({33, 17}, TensorOptions(kBFloat16))));  // the same draws as on the CPU
  EXPECT_TRUE(same_bits(a.clone(), a.to(Device(kCPU))));
  EXPECT_TRUE(same_bits(a.t().contiguous(), a.to(Device(kCPU)).t().contiguous()));
}

// Products against float64 on the CPU: transposed operands, broadcast batches, a bias, an
// fp32 output of 16-bit inputs, float64 itself; the tolerance is the op table's
// (k roundings of the accumulation plus the output's rounding).
TEST(Cuda, MatrixProductsMatchFloat64) {
  SKIP_WITHOUT_GPU();
  manual_seed(1);
  for (DType dt : {kFloat32, kBFloat16, kFloat16, kFloat64}) {
    SCOPED_TRACE(dtype_name(dt));
    const double out_eps = dt == kFloat32 ? 0x1p-24 : dt == kFloat64 ? 0x1p-53 : traits(dt).epsilon / 2;
    auto check = [&](const Tensor& got, const Tensor& want64, int64_t k) {
      const std::vector<double> g = got.to(Device(kCPU)).to_vector(), w = want64.to_vector();
      ASSERT_EQ(g.size(), w.size());
      double worst = 0;
      for (size_t i = 0; i < g.size(); ++i) {
        const double tol = out_eps * std::fabs(w[i]) + 4.0 * k * (dt == kFloat64 ? 0x1p-53 : 0x1p-24) * 8.0 + 1e-12;
        worst = std::max(worst, std::fabs(g[i] - w[i]) / tol);
      }
      EXPECT_LE(worst, 1.0) << "worst error in tolerances";
    };
    const Tensor a = randn({3, 40, 72}).to(dt), b = randn({72, 56}).to(dt), bias = randn({56}).to(dt);
    const Tensor a64 = a.to(kFloat64), b64 = b.to(kFloat64), bias64 = bias.to(kFloat64);
    check(matmul(a.to(kGpu), b.to(kGpu)), matmul(a64, b64), 72);
    check(matmul(a.to(kGpu), b.t().contiguous().to(kGpu).t()), matmul(a64, b64), 72);  // b transposed
    check(bmm(a.transpose(1, 2).contiguous().to(kGpu).transpose(1, 2), b.expand({3, 72, 56}).to(kGpu)),
          bmm(a64, b64.expand({3, 72, 56})), 72);
    check(linear(a.to(kGpu), b.t().to(kGpu), bias.to(kGpu)), linear(a64, b64.t(), bias64), 72);
    check(mm(a.select(0, 1).to(kGpu), b.to(kGpu)), mm(a64.select(0, 1), b64), 72);
    check(matmul(a.select(0, 0).select(0, 3).to(kGpu), b.to(kGpu)), matmul(a64.select(0, 0).select(0, 3), b64), 72);
  }
}

// linear's backward runs on the device too (products and the bias's column sums are GEMMs):
// the gradients equal the CPU's within the products' rounding.
TEST(Cuda, LinearGradientsMatchTheCpu) {
  SKIP_WITHOUT_GPU();
  manual_seed(2);
  const Tensor x = randn({16, 32}), w = randn({8, 32}), b = randn({8}), g = randn({16, 8});
  auto grads = [&](Device d) {
    Tensor xd = x.to(d).requires_grad_(), wd = w.to(d).requires_grad_(), bd = b.to(d).requires_grad_();
    Tensor y = linear(xd, wd, bd);
    y.backward(g.to(d));
    return std::vector<Tensor>{xd.grad().to(Device(kCPU)), wd.grad().to(Device(kCPU)), bd.grad().to(Device(kCPU))};
  };
  const auto want = grads(Device(kCPU)), got = grads(kGpu);
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_TRUE(testing::all_close(got[i], want[i].to_vector(), {1e-5, 1e-5})) << "gradient " << i;
}

// The multi-tensor unscale against the CPU kernel, bit for bit: 70 gradients of every
// floating dtype (two launches for float32), one non-dense, with and without an inf, and
// an inv_scale of exactly 1 writing nothing (a NaN's payload survives).
TEST(Cuda, UnscaleKernelMatchesTheCpuKernel) {
  SKIP_WITHOUT_GPU();
  for (bool with_inf : {false, true}) {
    for (float inv : {0.125f, 1.0f / 3.0f, 1.0f}) {
      SCOPED_TRACE(std::string(with_inf ? "with inf, " : "finite, ") + "inv_scale " + std::to_string(inv));
      manual_seed(3);
      std::vector<Tensor> cpu_grads, gpu_grads;
      for (int i = 0; i < 70; ++i) {
        const DType dt = i % 7 == 1 ? kBFloat16 : i % 7 == 2 ? kFloat16 : i % 7 == 3 ? kFloat64 : kFloat32;
        Tensor t = mul(randn({1 + 37 * i}), 1000.0).to(dt).detach();
        if (i == 6) t = randn({9, 12}).to(dt).slice(1, 0, 12, 2).detach();  // not dense
        cpu_grads.push_back(t.clone());
        gpu_grads.push_back(t.to(kGpu));
      }
      if (with_inf) {
        static_cast<float*>(cpu_grads[40].raw_data())[3] = -std::numeric_limits<float>::infinity();
        gpu_grads[40] = cpu_grads[40].to(kGpu);
        if (inv == 1.0f) {  // (a NaN times a scale is any NaN on a GPU, so only where nothing is written)
          static_cast<float*>(cpu_grads[0].raw_data())[0] = std::bit_cast<float>(0x7fc01234u);
          gpu_grads[0] = cpu_grads[0].to(kGpu);
        }
      }
      const Tensor found_cpu = zeros({}), inv_cpu = full({}, inv);
      const Tensor found_gpu = zeros({}, TensorOptions(kGpu)), inv_gpu = full({}, inv, TensorOptions(kGpu));
      cpu::amp_non_finite_check_and_unscale_(cpu_grads, found_cpu, inv_cpu);
      backend::kernels_for(kGpu).amp_non_finite_check_and_unscale_(gpu_grads, found_gpu, inv_gpu);
      EXPECT_EQ(found_gpu.item<float>(), found_cpu.item<float>());
      EXPECT_EQ(found_cpu.item<float>(), with_inf ? 1.0f : 0.0f);
      for (size_t i = 0; i < cpu_grads.size(); ++i)
        EXPECT_TRUE(same_bits(gpu_grads[i], cpu_grads[i])) << "gradient " << i;
    }
  }
}

// Pointwise ops on the device against the same ops on the CPU: the arithmetic (+ - * /,
// comparisons, where, relu, clamp) gives the same bits (same compute type, IEEE rounding);
// the math functions may differ by a few float32 ulps (CUDA's libm is not glibc's).
TEST(Cuda, PointwiseOpsMatchTheCpu) {
  SKIP_WITHOUT_GPU();
  manual_seed(4);
  const Tensor a32 = randn({6, 1, 5}), b32 = randn({4, 5}).t().contiguous().t();  // broadcast, transposed
  for (DType dt : {kFloat32, kBFloat16, kFloat16, kFloat64}) {
    SCOPED_TRACE(dtype_name(dt));
    const Tensor a = a32.to(dt), b = b32.to(dt), ga = a.to(kGpu), gb = b.to(kGpu);
    EXPECT_TRUE(same_bits(add(ga, gb, 0.5), add(a, b, 0.5)));
    EXPECT_TRUE(same_bits(sub(ga, gb), sub(a, b)));
    EXPECT_TRUE(same_bits(mul(ga, gb), mul(a, b)));
    EXPECT_TRUE(same_bits(div(ga, gb), div(a, b)));
    EXPECT_TRUE(same_bits(mul(ga, 3.0), mul(a, 3.0)));
    EXPECT_TRUE(same_bits(maximum(ga, gb), maximum(a, b)));
    EXPECT_TRUE(same_bits(relu(ga), relu(a)));
    EXPECT_TRUE(same_bits(clamp(ga, -0.5, 0.25), clamp(a, -0.5, 0.25)));
    EXPECT_TRUE(same_bits(where(gt(ga, gb), ga, gb), where(gt(a, b), a, b)));
    EXPECT_TRUE(same_bits(lt(ga, 0.1), lt(a, 0.1)));
    EXPECT_TRUE(same_bits(neg(ga), neg(a)));
    const testing::Tol tol = dt == kFloat32 || dt == kFloat64 ? testing::Tol{1e-6, 1e-6}
                                                              : testing::Tol{traits(dt).epsilon, traits(dt).epsilon};
    for (auto f : {+[](const Tensor& t) { return exp(t); }, +[](const Tensor& t) { return tanh(t); },
                   +[](const Tensor& t) { return sigmoid(t); }, +[](const Tensor& t) { return silu(t); },
                   +[](const Tensor& t) { return gelu(t); }, +[](const Tensor& t) { return gelu(t, "tanh"); },
                   +[](const Tensor& t) { return log1p(abs(t)); }, +[](const Tensor& t) { return sqrt(abs(t)); },
                   +[](const Tensor& t) { return pow(abs(t), 1.5); }, +[](const Tensor& t) { return softplus(t); }})
      EXPECT_TRUE(testing::all_close(f(ga).to(Device(kCPU)), f(a), tol));
  }
}

TEST(Cuda, SumsMatchFloat64) {
  SKIP_WITHOUT_GPU();
  manual_seed(6);
  const Tensor x = randn({7, 300, 5});
  for (DType dt : {kFloat32, kBFloat16, kFloat64}) {
    SCOPED_TRACE(dtype_name(dt));
    const Tensor xd = x.to(dt), g = xd.to(kGpu), x64 = xd.to(kFloat64);
    const double eps = dt == kFloat64 ? 1e-12 : dt == kFloat32 ? 1e-5 : traits(dt).epsilon;
    EXPECT_TRUE(testing::all_close(sum(g).to(Device(kCPU)), sum(x64).to(dt), {eps * 50, eps}));
    EXPECT_TRUE(testing::all_close(sum(g, {1}).to(Device(kCPU)), sum(x64, {1}).to(dt), {eps * 20, eps}));
    EXPECT_TRUE(
        testing::all_close(mean(g.transpose(0, 2), {0, 2}).to(Device(kCPU)), mean(x64, {0, 2}).to(dt), {eps, eps}));
  }
  const Tensor ints = arange(1000.0).to(kInt64).to(kGpu);
  EXPECT_EQ(sum(ints).item<int64_t>(), 499500);
}

// A small network's backward on the device: products, pointwise backward formulas,
// broadcast reductions (sum_to_size) and the engine's in-place gradient sums.
TEST(Cuda, BackwardMatchesTheCpu) {
  SKIP_WITHOUT_GPU();
  manual_seed(8);
  const Tensor x = randn({32, 20}), w1 = randn({16, 20}), b1 = randn({16}), w2 = randn({4, 16}), s = randn({1, 4});
  auto grads = [&](Device d) {
    std::vector<Tensor> p{w1.to(d).requires_grad_(), b1.to(d).requires_grad_(), w2.to(d).requires_grad_(),
                          s.to(d).requires_grad_()};
    const Tensor h = tanh(linear(x.to(d), p[0], p[1]));
    const Tensor y = mul(sigmoid(matmul(h, p[2].t())), p[3]) + relu(h).sum() * 0.01;  // p[3] broadcast; h used twice
    sum(mul(log_softmax(y, 1), softmax(gelu(y), 0))).backward();
    std::vector<Tensor> g;
    for (const Tensor& t : p) g.push_back(t.grad().to(Device(kCPU)));
    return g;
  };
  const auto want = grads(Device(kCPU)), got = grads(kGpu);
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_TRUE(testing::all_close(got[i], want[i].to_vector(), {1e-4, 1e-4})) << "parameter " << i;
}

// cross_entropy and nll_loss on the device against the CPU: weights, ignore_index, label
// smoothing, every reduction, a class dim in the middle (N, C, d); gradients too.
TEST(Cuda, ClassLossesMatchTheCpu) {
  SKIP_WITHOUT_GPU();
  manual_seed(9);
  const Tensor x = randn({4, 5, 3}), w = rand({5});
  const Tensor target = tensor(std::vector<int64_t>{0, 4, 2, 1, -100, 3, 2, 2, 0, 4, 1, -100}, {4, 3});
  for (Reduction red : {Reduction::Mean, Reduction::Sum, Reduction::None}) {
    for (double smoothing : {0.0, 0.1}) {
      SCOPED_TRACE("reduction " + std::to_string(static_cast<int>(red)) + " smoothing " + std::to_string(smoothing));
      auto run = [&](Device d) {
        Tensor xd = x.to(d).requires_grad_();
        const Tensor loss = cross_entropy(xd, target.to(d), w.to(d), -100, red, smoothing);
        sum(mul(loss, loss)).backward();
        return std::pair<Tensor, Tensor>{loss.to(Device(kCPU)), xd.grad().to(Device(kCPU))};
      };
      const auto [want, want_g] = run(Device(kCPU));
      const auto [got, got_g] = run(kGpu);
      EXPECT_TRUE(testing::all_close(got, want.to_vector(), {1e-5, 1e-5}));
      EXPECT_TRUE(testing::all_close(got_g, want_g.to_vector(), {1e-5, 1e-5}));
    }
    const Tensor lp = log_softmax(x, 1);
    EXPECT_TRUE(testing::all_close(nll_loss(lp.to(kGpu), target.to(kGpu), w.to(kGpu), -100, red).to(Device(kCPU)),
                                   nll_loss(lp, target, w, -100, red).to_vector(), {1e-6, 1e-6}));
  }
}

// The class losses keep their targets and weights on the device (no host round trip):
// int64 and int32 targets, contiguous or not; ignore_index (outside the classes, inside
// them, and on every row: mean is then 0 / 0 = NaN); weights in float32, float64 and bf16;
// label smoothing; every reduction; float32, float64 and bf16 input, an unbatched (C)
// input; values and gradients against the CPU, for cross_entropy and nll_loss.
TEST(Cuda, ClassLossTargetsAndWeightsStayOnTheDevice) {
  SKIP_WITHOUT_GPU();
  manual_seed(21);
  const int64_t N = 6, C = 7, D = 5;
  const Tensor x = randn({N, C, D});
  // The targets in variant v on device d: 0 int64, 1 int32, 2 int64 transposed, 3 int32 transposed.
  auto targets = [&](const Tensor& t, int v, Device d) {
    Tensor out = t.to(v % 2 ? kInt32 : kInt64).to(d);
    if (v >= 2) out = out.t().contiguous().t();
    EXPECT_EQ(out.is_contiguous(), v < 2);
    return out;
  };
  const Tensor w32 = rand({C}), w64 = rand({C}).to(kFloat64), w16 = rand({C}).to(kBFloat16);
  struct Case {
    DType dt;
    Tensor w;
    int64_t ignore;
  };
  const std::vector<Case> cases = {{kFloat32, Tensor(), -100}, {kFloat32, w32, -100},  {kFloat64, w64, -100},
                                   {kFloat32, w16, 2},         {kBFloat16, w32, -100}, {kFloat32, Tensor(), 3}};
  for (const Case& c : cases) {
    std::vector<int64_t> tv(static_cast<size_t>(N * D));  // every fourth target ignored
    for (size_t i = 0; i < tv.size(); ++i) tv[i] = i % 4 == 3 ? c.ignore : static_cast<int64_t>(i * 5) % C;
    const Tensor t64 = tensor(tv, {N, D});
    const Tensor all_ignored = full({N, D}, static_cast<double>(c.ignore), TensorOptions(kInt64));
    const double tol = c.dt == kBFloat16 ? 0x1p-6 : c.dt == kFloat64 ? 1e-12 : 1e-5;
    for (int v = 0; v < 4; ++v) {
      for (Reduction red : {Reduction::Mean, Reduction::Sum, Reduction::None}) {
        for (double smoothing : {0.0, 0.2, -1.0}) {  // -1: nll_loss
          const bool ce = smoothing >= 0;
          SCOPED_TRACE(std::string(ce ? "cross_entropy" : "nll_loss") + " " + std::string(dtype_name(c.dt)) +
                       " variant " + std::to_string(v) + " weight " +
                       (c.w.defined() ? std::string(dtype_name(c.w.dtype())) : "none") + " ignore " +
                       std::to_string(c.ignore) + " reduction " + std::to_string(static_cast<int>(red)) +
                       " smoothing " + std::to_string(smoothing));
          for (const Tensor* t : {&t64, &all_ignored}) {
            auto run = [&](Device d) {
              Tensor xd = (ce ? x : log_softmax(x, 1)).to(c.dt).to(d).clone().requires_grad_();
              const Tensor td = targets(*t, v, d), wd = c.w.defined() ? c.w.to(d) : Tensor();
              const Tensor loss =
                  ce ? cross_entropy(xd, td, wd, c.ignore, red, smoothing) : nll_loss(xd, td, wd, c.ignore, red);
              sum(mul(loss, full(loss.sizes(), 1.5, TensorOptions(d).dtype(loss.dtype())))).backward();
              return std::vector<Tensor>{loss.to(Device(kCPU)), xd.grad().to(Device(kCPU))};
            };
            const auto want = run(Device(kCPU)), got = run(kGpu);
            EXPECT_TRUE(testing::all_close(got[0], want[0], {tol, tol})) << "loss";
            EXPECT_TRUE(testing::all_close(got[1], want[1], {tol, tol})) << "gradient";
            if (t == &all_ignored && red == Reduction::Mean) EXPECT_TRUE(std::isnan(got[0].item<double>()));
          }
        }
      }
    }
  }
  // An unbatched (C) input with a 0-d target.
  const Tensor x1 = randn({C});
  for (Reduction red : {Reduction::Mean, Reduction::Sum, Reduction::None}) {
    const Tensor t1 = full({}, 4.0, TensorOptions().dtype(kInt32));
    Tensor xg = x1.to(kGpu).requires_grad_(), xc = x1.clone().requires_grad_();
    const Tensor lg = cross_entropy(xg, t1.to(kGpu), w32.to(kGpu), -100, red, 0.1);
    const Tensor lc = cross_entropy(xc, t1, w32, -100, red, 0.1);
    sum(lg).backward();
    sum(lc).backward();
    EXPECT_TRUE(testing::all_close(lg.to(Device(kCPU)), lc, {1e-5, 1e-5}));
    EXPECT_TRUE(testing::all_close(xg.grad().to(Device(kCPU)), xc.grad(), {1e-5, 1e-5}));
  }
}

// An out-of-range target on the device: the forward's kernel records it without a host
// sync and counts its row as ignored (loss 0); the next CUDA class-loss call raises the
// CPU's error (op, target and class count), and the call after that runs again. The
// record is the class losses' own: an embedding call does not raise it, nor they
// embedding's.
TEST(Cuda, ClassLossesReportAnOutOfRangeTargetAtTheNextCall) {
  SKIP_WITHOUT_GPU();
  manual_seed(5);
  const Tensor x = randn({3, 10});
  const Tensor good = tensor(std::vector<int64_t>{1, 9, 3}), bad = tensor(std::vector<int64_t>{1, 12, 3});
  for (bool ce : {true, false}) {
    const std::string name = ce ? "cross_entropy" : "nll_loss";
    SCOPED_TRACE(name);
    auto call = [&](const Tensor& xin, const Tensor& t, Reduction red) {
      return ce ? cross_entropy(xin, t, Tensor(), -100, red) : nll_loss(xin, t, Tensor(), -100, red);
    };
    const Tensor xg = x.to(kGpu);
    const Tensor partial = call(xg, bad.to(kGpu), Reduction::None);  // no error yet, no sync
    cuda::synchronize();
    const Tensor want = call(x, good, Reduction::None);
    const std::vector<double> got_rows = partial.to(Device(kCPU)).to_vector(), want_rows = want.to_vector();
    EXPECT_NEAR(got_rows[0], want_rows[0], 1e-5);
    EXPECT_EQ(got_rows[1], 0.0);  // the bad row counts as ignored
    EXPECT_NEAR(got_rows[2], want_rows[2], 1e-5);
    try {
      (void)call(xg, good.to(kGpu), Reduction::Mean);
      ADD_FAILURE() << "the recorded bad target was not reported";
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("[" + name + "] target 12 is out of bounds for 10 classes"), std::string::npos) << msg;
      EXPECT_NE(msg.find("earlier call"), std::string::npos) << msg;
    }
    EXPECT_TRUE(testing::all_close(call(xg, good.to(kGpu), Reduction::Mean).to(Device(kCPU)),
                                   call(x, good, Reduction::Mean), {1e-5, 1e-5}));  // reported once, then cleared
    // int32, negative, and a mean that leaves the bad row out of the divisor
    const Tensor m = call(xg, tensor(std::vector<int32_t>{-1, 9, 3}).to(kGpu), Reduction::Mean);
    cuda::synchronize();
    const std::vector<double> rows = want.to_vector();
    EXPECT_NEAR(m.to(Device(kCPU)).item<double>(), (rows[1] + rows[2]) / 2, 1e-5);
    const Tensor w = randn({5, 3}).to(kGpu);
    (void)embedding(w, tensor(std::vector<int64_t>{0, 4}).to(kGpu));  // not the class losses' record
    try {
      (void)call(xg, good.to(kGpu), Reduction::Sum);
      ADD_FAILURE() << "the recorded bad target was not reported";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("target -1 is out of bounds for 10 classes"), std::string::npos) << e.what();
    }
    (void)embedding(w, tensor(std::vector<int64_t>{7}).to(kGpu));
    cuda::synchronize();
    EXPECT_NO_THROW((void)call(xg, good.to(kGpu), Reduction::Sum));
    EXPECT_THROW((void)embedding(w, tensor(std::vector<int64_t>{0}).to(kGpu)), Error);
  }
}

// layer_norm on the device against the CPU: values and all three gradients, bf16 input
// with float32 affine parameters (autocast's mix) and float32.
TEST(Cuda, LayerNormMatchesTheCpu) {
  SKIP_WITHOUT_GPU();
  manual_seed(14);
  for (DType dt : {kFloat32, kBFloat16}) {
    SCOPED_TRACE(dtype_name(dt));
    const Tensor x = randn({6, 7, 40}).to(dt), w = randn({40}), b = randn({40}), g = randn({6, 7, 40}).to(dt);
    auto run = [&](Device d) {
      Tensor xd = x.to(d).requires_grad_(), wd = w.to(d).requires_grad_(), bd = b.to(d).requires_grad_();
      const Tensor y = layer_norm(xd, {40}, wd, bd, 1e-5);
      y.backward(g.to(d));
      return std::vector<Tensor>{y.to(Device(kCPU)), xd.grad().to(Device(kCPU)), wd.grad().to(Device(kCPU)),
                                 bd.grad().to(Device(kCPU))};
    };
    const auto want = run(Device(kCPU)), got = run(kGpu);
    const double tol = dt == kFloat32 ? 1e-5 : 0x1p-7;
    for (size_t i = 0; i < want.size(); ++i)
      EXPECT_TRUE(testing::all_close(got[i], want[i].to_vector(), {tol, tol})) << "output " << i;
  }
}

// embedding on the device against the CPU, bit for bit: the gather, and the backward's sums
// (each index's rows added in position order, 16-bit tables in float32 rounded once, as the
// CPU does), with many repeated indices, long runs of one index, rows no index names, int32
// and transposed indices, and rows wider than a block.
TEST(Cuda, EmbeddingMatchesTheCpuBitForBit) {
  SKIP_WITHOUT_GPU();
  manual_seed(15);
  struct Case {
    int64_t V, D;
    Tensor idx;
  };
  const std::vector<Case> cases = {
      {50, 37, randint(0, 40, {12, 25})},           // repeats; rows 40..49 get no gradient
      {7, 300, randint(0, 7, {5000})},              // long runs, rows wider than 256 threads
      {9, 5, randint(0, 9, {6, 4}).t()},            // transposed indices
      {9, 5, randint(0, 9, {30}).to(kInt32)},       // int32 indices
      {4, 3, full({}, 2.0, kInt64)},                // one 0-d index
      {4, 3, tensor(std::vector<int64_t>{}, {0})},  // no indices: a zero gradient
  };
  for (DType dt : {kFloat32, kBFloat16, kFloat16, kFloat64}) {
    for (size_t c = 0; c < cases.size(); ++c) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " case " + std::to_string(c));
      const Case& cs = cases[c];
      const Tensor w = randn({cs.V, cs.D}).to(dt);
      Shape gs = cs.idx.sizes();
      gs.push_back(cs.D);
      const Tensor g = randn(gs).to(dt);
      auto run = [&](Device d) {
        Tensor wd = w.to(d).detach().requires_grad_();
        const Tensor y = embedding(wd, cs.idx.to(d));
        y.backward(g.to(d));
        EXPECT_EQ(wd.grad().device(), d);
        return std::pair<Tensor, Tensor>{y.to(Device(kCPU)), wd.grad().to(Device(kCPU))};
      };
      const auto [want, want_g] = run(Device(kCPU));
      const auto [got, got_g] = run(kGpu);
      EXPECT_TRUE(same_bits(got, want)) << "forward";
      EXPECT_TRUE(same_bits(got_g, want_g)) << "gradient";
    }
  }
}

// An out-of-range index on the device: the kernel records it without a host sync, the next
// CUDA embedding call raises the CPU's error (op, index and row count), and the calls after
// that run again.
TEST(Cuda, EmbeddingReportsAnOutOfRangeIndexAtTheNextCall) {
  SKIP_WITHOUT_GPU();
  const Tensor w = randn({5, 3}).to(kGpu);
  const Tensor good = tensor(std::vector<int64_t>{0, 4, 2}).to(kGpu);
  (void)embedding(w, tensor(std::vector<int64_t>{1, 7, 3}).to(kGpu));
  cuda::synchronize();
  try {
    (void)embedding(w, good);
    ADD_FAILURE() << "the recorded bad index was not reported";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("embedding"), std::string::npos) << msg;
    EXPECT_NE(msg.find("index 7 is out of range for 5 rows"), std::string::npos) << msg;
  }
  const Tensor y = embedding(w, good);  // reported once, then cleared
  EXPECT_TRUE(same_bits(y, embedding(w.to(Device(kCPU)), good.to(Device(kCPU)))));
  (void)embedding(w, tensor(std::vector<int32_t>{-1}).to(kGpu));
  cuda::synchronize();
  EXPECT_THROW((void)embedding(w, good), Error);
}

// dropout's mask on the device is the CPU's bit for bit for the same key (the same
// counter-based hash), for sizes past one grid's stride; and the op, seeded alike, gives the
// CPU's outputs and gradients bit for bit in every floating dtype and layout. p = 0 is the
// identity, p = 1 zeros everything (inf and NaN too).
TEST(Cuda, DropoutMatchesTheCpuBitForBit) {
  SKIP_WITHOUT_GPU();
  for (int64_t n : {int64_t{1}, int64_t{1000}, (int64_t{1} << 25) + 3}) {
    for (double p : {0.0, 0.1, 0.5, 0.999}) {
      const uint64_t key = 0x1234567890ABCDEFull + static_cast<uint64_t>(n);
      const Tensor want = empty({n}, kUInt8), got = empty({n}, TensorOptions(kUInt8).device(kGpu));
      cpu::dropout_mask(want, key, p);
      backend::kernels_for(kGpu).dropout_mask(got, key, p);
      EXPECT_TRUE(same_bits(got, want)) << "n " << n << " p " << p;
    }
  }
  manual_seed(16);
  for (DType dt : {kFloat32, kBFloat16, kFloat16, kFloat64}) {
    for (bool transposed : {false, true}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + (transposed ? " transposed" : ""));
      Tensor x = randn({37, 53}).to(dt);
      if (transposed) x = x.t();
      const Tensor g = randn(x.sizes()).to(dt);
      for (double p : {0.0, 0.3, 1.0}) {
        auto run = [&](Device d) {
          manual_seed(17);
          Tensor xd = x.to(d).detach().requires_grad_();
          const Tensor y = dropout(xd, p, true);
          y.backward(g.to(d));
          return std::pair<Tensor, Tensor>{y.to(Device(kCPU)), xd.grad().to(Device(kCPU))};
        };
        const auto [want, want_g] = run(Device(kCPU));
        const auto [got, got_g] = run(kGpu);
        EXPECT_TRUE(same_bits(got.contiguous(), want.contiguous())) << "p " << p;
        EXPECT_TRUE(same_bits(got_g.contiguous(), want_g.contiguous())) << "p " << p;
        if (p == 0) EXPECT_TRUE(same_bits(got.contiguous(), x.contiguous()));
      }
    }
  }
  const Tensor special = tensor(std::vector<float>{INFINITY, NAN, -1.0f, 2.0f}).to(kGpu);
  EXPECT_TRUE(same_bits(dropout(special, 1.0, true), zeros({4})));
}

// scaled_dot_product_attention on the device against the CPU's fused kernel (float32
// scores there and here; 16-bit probabilities rounded once here): values and the three
// gradients, causal and not, a custom scale, bool and float masks, strided views, float64
// and a broadcast key batch (the composite on the device), dropout seeded alike (the same
// mask on both devices), and autocast (16-bit compute, float32 leaf gradients).
TEST(Cuda, AttentionMatchesTheCpu) {
  SKIP_WITHOUT_GPU();
  manual_seed(18);
  struct Case {
    std::string name;
    Shape q, k, v;
    bool causal;
    std::optional<double> scale;
    int mask;  // 0: none, 1: bool, 2: float
    double dropout;
  };
  const std::vector<Case> cases = {
      {"causal", {2, 3, 17, 16}, {2, 3, 23, 16}, {2, 3, 23, 8}, true, std::nullopt, 0, 0},
      {"non-causal", {2, 3, 17, 16}, {2, 3, 23, 16}, {2, 3, 23, 8}, false, std::nullopt, 0, 0},
      {"2-d, scale 0.3", {9, 8}, {9, 8}, {9, 5}, true, 0.3, 0, 0},
      {"more queries than keys", {2, 40, 32}, {2, 7, 32}, {2, 7, 32}, true, std::nullopt, 0, 0},
      {"longer rows", {1, 2, 130, 64}, {1, 2, 300, 64}, {1, 2, 300, 64}, false, std::nullopt, 0, 0},
      {"bool mask", {2, 6, 8}, {2, 9, 8}, {2, 9, 4}, false, std::nullopt, 1, 0},
      {"float mask", {2, 6, 8}, {2, 9, 8}, {2, 9, 4}, false, std::nullopt, 2, 0},
      {"broadcast key batch", {3, 5, 8}, {1, 6, 8}, {1, 6, 4}, true, std::nullopt, 0, 0},
      {"dropout", {2, 6, 8}, {2, 9, 8}, {2, 9, 4}, false, std::nullopt, 0, 0.25},
  };
  for (DType dt : {kFloat32, kBFloat16, kFloat16, kFloat64}) {
    // two roundings apart at most (this path rounds the probabilities to 16 bits, the CPU's kernel not)
    const double tol = dt == kFloat32 ? 1e-4 : dt == kFloat64 ? 1e-10 : dt == kBFloat16 ? 0x1p-5 : 0x1p-8;
    const double gtol = dt == kFloat32 ? 1e-4 : dt == kFloat64 ? 1e-10 : dt == kBFloat16 ? 6e-2 : 1e-2;
    for (const Case& cs : cases) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " " + cs.name);
      const Tensor q = randn(cs.q).to(dt), k = randn(cs.k).to(dt), v = randn(cs.v).to(dt);
      Shape os = cs.q;
      os.back() = cs.v.back();
      const Tensor g = randn(os).to(dt);
      const int64_t L = cs.q[cs.q.size() - 2], S = cs.k[cs.k.size() - 2];
      Tensor mask;
      if (cs.mask == 1) mask = gt(rand({L, S}), full({}, 0.3));
      if (cs.mask == 1) mask.narrow(1, 0, 1).fill_(1.0);  // every row may attend somewhere
      if (cs.mask == 2) mask = randn({L, S}).to(dt);
      auto run = [&](Device d) {
        manual_seed(19);
        Tensor qd = q.to(d).detach().requires_grad_(), kd = k.to(d).detach().requires_grad_(),
               vd = v.to(d).detach().requires_grad_();
        const Tensor y = scaled_dot_product_attention(qd, kd, vd, mask.defined() ? mask.to(d) : Tensor(), cs.dropout,
                                                      cs.causal, cs.scale);
        y.backward(g.to(d));
        return std::vector<Tensor>{y.to(Device(kCPU)), qd.grad().to(Device(kCPU)), kd.grad().to(Device(kCPU)),
                                   vd.grad().to(Device(kCPU))};
      };
      const auto want = run(Device(kCPU)), got = run(kGpu);
      for (size_t i = 0; i < want.size(); ++i) {
        EXPECT_EQ(got[i].dtype(), want[i].dtype()) << "output " << i;
        const double t = i == 0 ? tol : gtol;
        EXPECT_TRUE(testing::all_close(got[i], want[i].to_vector(), {t, t})) << "output " << i;
      }
    }
  }
  // Autocast (lower precision): float32 inputs compute in bf16 and give a bf16 result, as
  // the CPU's bf16 computation; the leaves' gradients stay float32.
  const Tensor q = randn({2, 4, 12, 16}), k = randn({2, 4, 12, 16}), v = randn({2, 4, 12, 16});
  const Tensor want =
      scaled_dot_product_attention(q.to(kBFloat16), k.to(kBFloat16), v.to(kBFloat16), Tensor(), 0.0, true);
  Tensor qd = q.to(kGpu).requires_grad_();
  Tensor got;
  {
    amp::AutocastGuard autocast(kCUDA, kBFloat16);
    got = scaled_dot_product_attention(qd, k.to(kGpu), v.to(kGpu), Tensor(), 0.0, true);
  }
  EXPECT_EQ(got.dtype(), kBFloat16);
  EXPECT_TRUE(testing::all_close(got, want.to_vector(), {0x1p-5, 0x1p-5}));
  got.sum().backward();
  EXPECT_EQ(qd.grad().dtype(), kFloat32);
}

// conv2d (cuDNN) against the CPU (oneDNN; direct loops for float64): forward and the three
// gradients, every dtype, stride / padding / dilation / groups, with and without bias,
// contiguous and channels-last inputs (whose output and input gradient stay channels-last).
// The two backends sum in different orders (and the device adds the bias after rounding
// the 16-bit convolution), so the comparison allows a few ulps of the dtype relative to
// the largest value.
TEST(Cuda, Conv2dMatchesTheCpu) {
  SKIP_WITHOUT_GPU();
  if (!testing::kBuiltWithCudnn) GTEST_SKIP() << "built without cuDNN";
  struct Case {
    const char* desc;
    Shape x, w, stride, padding, dilation;
    int64_t groups;
    bool bias, channels_last;
  };
  const std::vector<Case> cases = {
      {"3x3 pad 1", {2, 3, 9, 8}, {4, 3, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 1, true, false},
      {"no bias, no padding", {2, 3, 9, 8}, {4, 3, 3, 3}, {1, 1}, {0, 0}, {1, 1}, 1, false, false},
      {"strided, floor drops columns", {2, 3, 11, 10}, {5, 3, 3, 2}, {2, 3}, {1, 0}, {1, 1}, 1, true, false},
      {"dilated", {2, 2, 10, 9}, {3, 2, 3, 3}, {1, 1}, {2, 2}, {2, 3}, 1, true, false},
      {"grouped", {2, 4, 7, 7}, {6, 2, 3, 3}, {1, 2}, {1, 1}, {1, 1}, 2, true, false},
      {"depthwise", {2, 8, 6, 6}, {8, 1, 5, 5}, {2, 2}, {2, 2}, {1, 1}, 8, true, false},
      {"1x1", {3, 16, 5, 4}, {8, 16, 1, 1}, {1, 1}, {0, 0}, {1, 1}, 1, true, false},
      {"channels-last 3x3", {2, 16, 12, 12}, {32, 16, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 1, true, true},
      {"channels-last strided grouped", {2, 8, 9, 9}, {8, 4, 3, 3}, {2, 2}, {1, 1}, {1, 1}, 2, true, true},
      {"channels-last dilated no bias", {2, 4, 10, 9}, {6, 4, 3, 2}, {1, 2}, {2, 1}, {2, 2}, 1, false, true},
  };
  manual_seed(21);
  for (DType dt : {kFloat32, kBFloat16, kFloat16, kFloat64}) {
    for (const Case& k : cases) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " " + k.desc);
      Tensor x = randn(k.x).to(dt), w = randn(k.w).to(dt), b = randn({k.w[0]}).to(dt);
      if (k.channels_last) x = x.contiguous(MemoryFormat::ChannelsLast);
      auto run = [&](Device d) {
        Tensor xd = x.to(d).detach().requires_grad_(), wd = w.to(d).detach().requires_grad_();
        Tensor bd = k.bias ? b.to(d).detach().requires_grad_() : Tensor();
        const Tensor y = conv2d(xd, wd, bd, k.stride, k.padding, k.dilation, k.groups);
        manual_seed(5);
        const Tensor g = randn(y.sizes()).to(dt);
        // autograd::grad: the gradients as the formulas return them (a leaf's .grad is
        // stored contiguous by the engine).
        std::vector<Tensor> out{y};
        for (const Tensor& t :
             autograd::grad(y, k.bias ? std::vector<Tensor>{xd, wd, bd} : std::vector<Tensor>{xd, wd}, g.to(d)))
          out.push_back(t);
        return out;
      };
      const auto want = run(Device(kCPU)), got = run(kGpu);
      ASSERT_EQ(got.size(), want.size());
      EXPECT_EQ(got[0].is_contiguous(MemoryFormat::ChannelsLast) && !got[0].is_contiguous(), k.channels_last);
      EXPECT_EQ(got[1].is_contiguous(MemoryFormat::ChannelsLast) && !got[1].is_contiguous(), k.channels_last);
      const double tol = dt == kFloat64 ? 1e-12 : dt == kFloat32 ? 1e-5 : dt == kBFloat16 ? 0x1p-6 : 0x1p-9;
      for (size_t i = 0; i < want.size(); ++i) {
        EXPECT_EQ(got[i].dtype(), want[i].dtype()) << "output " << i;
        const Tensor wi = want[i].to(kFloat64);
        double scale = 1.0;
        for (double v : wi.to_vector()) scale = std::max(scale, std::abs(v));
        EXPECT_TRUE(testing::all_close(got[i].to(Device(kCPU)).to(kFloat64), wi, {tol * scale, tol}))
            << "output " << i << " (0: y, 1: grad input, 2: grad weight, 3: grad bias)";
      }
    }
  }
#if defined(TC_WITH_CUDNN)
  EXPECT_GT(gpu::conv2d_cache_size(), 0u);
#endif
}

// Under autocast a float32 conv2d runs in bfloat16 on the device as on the CPU, and the
// float32 weight and bias get float32 gradients (the 16-bit weight gradient widened).
TEST(Cuda, Conv2dUnderAutocastGivesFloat32Gradients) {
  SKIP_WITHOUT_GPU();
  if (!testing::kBuiltWithCudnn) GTEST_SKIP() << "built without cuDNN";
  manual_seed(22);
  const Tensor x = randn({4, 8, 10, 10}), w = randn({16, 8, 3, 3}), b = randn({16});
  auto run = [&](Device d) {
    Tensor xd = x.to(d).requires_grad_(), wd = w.to(d).requires_grad_(), bd = b.to(d).requires_grad_();
    Tensor y;
    {
      amp::AutocastGuard autocast(d.type, kBFloat16);
      y = conv2d(xd, wd, bd, {1, 1}, {1, 1});
    }
    EXPECT_EQ(y.dtype(), kBFloat16);
    y.to(kFloat32).sum().backward();
    return std::vector<Tensor>{y, xd.grad(), wd.grad(), bd.grad()};
  };
  const auto want = run(Device(kCPU)), got = run(kGpu);
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(got[i].dtype(), want[i].dtype()) << "output " << i;
    const Tensor wi = want[i].to(kFloat64);
    double scale = 1.0;
    for (double v : wi.to_vector()) scale = std::max(scale, std::abs(v));
    EXPECT_TRUE(testing::all_close(got[i].to(Device(kCPU)).to(kFloat64), wi, {0x1p-6 * scale, 0x1p-6}))
        << "output " << i;
  }
}

// var on the device against the CPU: one dim, several, all, a non-contiguous input, both
// corrections, keepdim; the gradient too. Both sum in float32 (float64) in different orders.
TEST(Cuda, VarMatchesTheCpu) {
  SKIP_WITHOUT_GPU();
  manual_seed(15);
  const Tensor base = randn({6, 50, 7});
  for (DType dt : {kFloat32, kBFloat16, kFloat16, kFloat64}) {
    SCOPED_TRACE(dtype_name(dt));
    const double eps = dt == kFloat64 ? 1e-12 : dt == kFloat32 ? 1e-5 : traits(dt).epsilon;
    const Tensor x = base.to(dt);
    struct Case {
      Shape dims;
      int64_t correction;
      bool keepdim, transposed;
    };
    for (const Case& c : {Case{{1}, 1, false, false}, Case{{0, 2}, 0, true, false}, Case{{}, 1, false, false},
                          Case{{2}, 1, false, true}, Case{{0}, 0, false, true}, Case{{1}, 50, false, false}}) {
      SCOPED_TRACE("dims " + shape_str(c.dims) + " correction " + std::to_string(c.correction) +
                   (c.transposed ? " transposed" : ""));
      auto run = [&](Device d) {
        Tensor xd = x.to(d).clone().requires_grad_();
        const Tensor in = c.transposed ? xd.transpose(0, 2) : xd;
        const Tensor v = var(in, c.dims, c.correction, c.keepdim);
        v.backward(ones(v.sizes(), TensorOptions(dt).device(d)));
        return std::pair<Tensor, Tensor>{v.to(Device(kCPU)), xd.grad().to(Device(kCPU))};
      };
      const auto [want, want_g] = run(Device(kCPU));
      const auto [got, got_g] = run(kGpu);
      EXPECT_TRUE(testing::all_close(got, want, {eps, 4 * eps}));
      EXPECT_TRUE(testing::all_close(got_g, want_g, {eps, 4 * eps}));
    }
  }
  // A reduced extent of 0: NaN, as on the CPU.
  EXPECT_TRUE(std::isnan(var(zeros({3, 0}, TensorOptions(kGpu)), {1}).to(Device(kCPU)).to_vector()[2]));
}

// max/min (values and indices), argmax/argmin on the device give the CPU's bits: ties
// (first index wins), NaNs (the first NaN wins), every kernel shape (short rows, long
// contiguous rows, strided rows, over all elements in two passes), non-contiguous inputs,
// every dtype the CPU takes. Gradients too.
TEST(Cuda, MaxMinMatchTheCpu) {
  SKIP_WITHOUT_GPU();
  manual_seed(16);
  struct Input {
    Shape shape;
    bool transposed;
  };
  for (DType dt : {kFloat32, kBFloat16, kFloat16, kFloat64, kInt64, kInt32, kUInt8, kBool}) {
    for (const Input& in : {Input{{37, 300}, false}, Input{{5000, 20}, false}, Input{{20, 5000}, false},
                            Input{{8, 9}, false}, Input{{4, 30, 40}, true}, Input{{3, 1000, 100}, false}}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " " + shape_str(in.shape) + (in.transposed ? " transposed" : ""));
      // Small integers: many ties. NaNs in the float dtypes, two in some rows and columns.
      Tensor x = randint(dt == kUInt8 ? 0 : -4, 5, in.shape).to(kFloat32);
      if (is_floating(dt)) {
        Tensor flat = x.view({-1});
        const int64_t n = flat.numel();
        for (int64_t p : {int64_t{5}, n / 3, n / 3 + 7, n - 2}) flat.narrow(0, p, 1).fill_(std::nan(""));
      }
      x = x.to(dt);
      if (in.transposed) x = x.transpose(0, 2);  // (40, 30, 4), strided every way
      const Tensor gx = x.to(kGpu);
      EXPECT_TRUE(same_bits(max(gx), max(x)));
      EXPECT_TRUE(same_bits(min(gx), min(x)));
      EXPECT_TRUE(same_bits(argmax(gx), argmax(x)));
      EXPECT_TRUE(same_bits(argmin(gx, std::nullopt, true), argmin(x, std::nullopt, true)));
      for (int64_t d = 0; d < x.dim(); ++d) {
        SCOPED_TRACE("dim " + std::to_string(d));
        const auto [gv, gi] = max(gx, d);
        const auto [cv, ci] = max(x, d);
        EXPECT_TRUE(same_bits(gv, cv));
        EXPECT_TRUE(same_bits(gi, ci));
        const auto [gv2, gi2] = min(gx, d, true);
        const auto [cv2, ci2] = min(x, d, true);
        EXPECT_TRUE(same_bits(gv2, cv2));
        EXPECT_TRUE(same_bits(gi2, ci2));
        EXPECT_TRUE(same_bits(argmax(gx, d), argmax(x, d)));
        EXPECT_TRUE(same_bits(argmin(gx, d), argmin(x, d)));
      }
    }
  }
  // A 0-d input, and a dim of size 1.
  const Tensor s = full({}, 3.0);
  EXPECT_TRUE(same_bits(std::get<1>(max(s.to(kGpu), 0)), std::get<1>(max(s, 0))));
  const Tensor one = randn({4, 1, 3});
  EXPECT_TRUE(same_bits(std::get<1>(min(one.to(kGpu), 1)), std::get<1>(min(one, 1))));
  // Gradients: along a dim to the winner; over all elements split evenly over the ties.
  for (DType dt : {kFloat32, kBFloat16, kFloat16, kFloat64}) {
    SCOPED_TRACE(dtype_name(dt));
    const Tensor x = randint(-4, 5, {6, 40}).to(dt);
    const Tensor g = randn({6}).to(dt);
    auto run = [&](Device d) {
      Tensor xd = x.to(d).clone().requires_grad_(), xa = x.to(d).clone().requires_grad_();
      std::get<0>(max(xd.t(), 0)).backward(g.to(d));  // a strided input, its grad contiguous
      mul(min(xa), 3.0).backward();                   // several elements tie for the min
      return std::pair<Tensor, Tensor>{xd.grad().to(Device(kCPU)), xa.grad().to(Device(kCPU))};
    };
    const auto [want_dim, want_all] = run(Device(kCPU));
    const auto [got_dim, got_all] = run(kGpu);
    EXPECT_TRUE(same_bits(got_dim, want_dim));
    EXPECT_TRUE(same_bits(got_all, want_all));
  }
}

// mse_loss and binary_cross_entropy_with_logits on the device against the CPU: every
// reduction, a broadcast target (mse), weight and pos_weight (bce), non-contiguous inputs,
// gradients to input and target; an empty mean is NaN.
TEST(Cuda, ElementwiseLossesMatchTheCpu) {
  SKIP_WITHOUT_GPU();
  manual_seed(17);
  const Tensor a = randn({9, 31}), b = randn({1, 31}), t = rand({31, 9}).t(), w = rand({31}), pw = rand({31});
  for (DType dt : {kFloat32, kBFloat16, kFloat16, kFloat64}) {
    const double eps = dt == kFloat64 ? 1e-12 : dt == kFloat32 ? 2e-6 : traits(dt).epsilon;
    for (Reduction red : {Reduction::Mean, Reduction::Sum, Reduction::None}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " reduction " + std::to_string(static_cast<int>(red)));
      auto run = [&](Device d, bool bce) {
        Tensor x = a.to(dt).to(d).clone().requires_grad_();
        Tensor y = (bce ? t : b).to(dt).to(d).clone().requires_grad_();
        const Tensor xin = x.t().contiguous().t();  // a transposed layout
        const Tensor loss =
            bce ? binary_cross_entropy_with_logits(xin, y, w.to(d), pw.to(d), red) : mse_loss(xin, y, red);
        sum(mul(loss, loss)).backward();
        return std::vector<Tensor>{loss.to(Device(kCPU)), x.grad().to(Device(kCPU)), y.grad().to(Device(kCPU))};
      };
      for (bool bce : {false, true}) {
        SCOPED_TRACE(bce ? "binary_cross_entropy_with_logits" : "mse_loss");
        const auto want = run(Device(kCPU), bce), got = run(kGpu, bce);
        for (size_t i = 0; i < want.size(); ++i)
          EXPECT_TRUE(testing::all_close(got[i], want[i], {4 * eps, 4 * eps})) << "output " << i;
      }
    }
  }
  EXPECT_TRUE(
      std::isnan(mse_loss(zeros({0, 3}, TensorOptions(kGpu)), zeros({0, 3}, TensorOptions(kGpu))).item<double>()));
  EXPECT_EQ(
      mse_loss(zeros({0, 3}, TensorOptions(kGpu)), zeros({0, 3}, TensorOptions(kGpu)), Reduction::Sum).item<double>(),
      0.0);
}

// The tolerance of a pooling or batch_norm result in dt against the CPU's (which may
// accumulate in another order or, for 16-bit, round intermediate results differently).
testing::Tol device_tol(DType dt) {
  switch (dt) {
    case kFloat64:
      return {1e-12, 1e-12};
    case kFloat32:
      return {1e-5, 1e-5};
    case kBFloat16:
      return {0x1p-6, 0x1p-6};
    default:
      return {0x1p-9, 0x1p-9};
  }
}

// The pooling ops on the device against the CPU: values, input gradients (overlapping
// windows: several outputs' gradients land on one input) and layouts, every dtype, odd
// sizes, padding, dilation, ceil_mode, count_include_pad, channels-last input, adaptive
// windows that overlap and that repeat (output larger than input). 16-bit results are
// checked against the CPU's float64 of the same inputs (the device computes in float32 and
// rounds once; ties in a 16-bit max window then take the same first maximum).
TEST(Cuda, PoolingMatchesTheCpu) {
  SKIP_WITHOUT_GPU();
  manual_seed(15);
  struct Case {
    Shape k, s, p, d;
    bool ceil;
  };
  const std::vector<Case> cases = {
      {{2, 2}, {}, {0, 0}, {1, 1}, false},     {{3, 3}, {2, 2}, {1, 1}, {1, 1}, false},
      {{3, 3}, {2, 2}, {1, 1}, {1, 1}, true},  {{3, 2}, {1, 2}, {1, 0}, {1, 1}, true},
      {{3, 3}, {1, 1}, {1, 1}, {2, 2}, false}, {{2, 3}, {3, 2}, {1, 1}, {2, 1}, true},
      {{5, 4}, {2, 3}, {2, 2}, {1, 1}, true},
  };
  for (DType dt : testing::kAllFloat)
    for (bool cl : {false, true})
      for (size_t ci = 0; ci < cases.size(); ++ci) {
        const Case& c = cases[ci];
        SCOPED_TRACE(std::string(dtype_name(dt)) + (cl ? " channels-last" : "") + " case " + std::to_string(ci));
        const Tensor x0 = randn({2, 3, 11, 9}).to(dt);
        const Tensor x = cl ? x0.contiguous(MemoryFormat::ChannelsLast) : x0;
        const Shape adaptive_out = ci == 6 ? Shape{13, 10} : Shape{c.k[0] + 2, c.k[1] * 2 + 1};
        const DType ref_dt = dt == kFloat32 || dt == kFloat64 ? dt : kFloat64;
        // forward output and input gradient, computed in `compute`
        auto run = [&](Device dev, DType compute, int op, bool include_pad) {
          Tensor xd = x.to(compute).to(dev).requires_grad_();
          Tensor y = op == 0   ? max_pool2d(xd, c.k, c.s, c.p, c.d, c.ceil)
                     : op == 1 ? avg_pool2d(xd, c.k, c.s, c.p, c.ceil, include_pad)
                               : adaptive_avg_pool2d(xd, adaptive_out);
          const Tensor g = randn(y.sizes()).to(dt).to(compute);
          const Tensor gx = autograd::grad(y, {xd}, g.to(dev))[0];  // in the layout the op gives it
          return std::vector<Tensor>{y.to(Device(kCPU)), gx.to(Device(kCPU))};
        };
        for (int op = 0; op < 3; ++op)
          for (bool include_pad : {true, false}) {
            if (op != 1 && !include_pad) continue;
            if (op == 1 && (c.d[0] != 1 || c.d[1] != 1)) continue;  // avg_pool2d has no dilation
            SCOPED_TRACE("op " + std::to_string(op) + (include_pad ? " include_pad" : ""));
            manual_seed(100 + ci);
            const auto want = run(Device(kCPU), ref_dt, op, include_pad);
            manual_seed(100 + ci);
            const auto got = run(kGpu, dt, op, include_pad);
            for (size_t i = 0; i < want.size(); ++i) {
              EXPECT_EQ(got[i].sizes(), want[i].sizes()) << "output " << i;
              EXPECT_EQ(got[i].dtype(), dt) << "output " << i;
              EXPECT_EQ(got[i].is_contiguous(MemoryFormat::ChannelsLast), cl) << "output " << i;
              if (!cl) EXPECT_TRUE(got[i].is_contiguous()) << "output " << i;
              EXPECT_TRUE(testing::all_close(got[i].to(kFloat64), want[i].to(kFloat64), device_tol(dt)))
                  << "output " << i;
            }
          }
      }
}

// Max pooling on the device: the first maximum of a window wins (so ties place their
// gradient as the CPU's direct float64 kernel does), NaN propagates, a strided input is
// read in place, and the gather backward gives the same bits on every run.
TEST(Cuda, MaxPoolTiesNanAndDeterminism) {
  SKIP_WITHOUT_GPU();
  manual_seed(16);
  std::vector<double> v(3 * 4 * 13 * 10);
  std::mt19937 rng(16);
  for (double& e : v) e = static_cast<double>(rng() % 4);  // many ties
  v[17] = std::nan("");
  const Tensor x = tensor(v, {3, 4, 13, 10});
  auto run = [&](const Tensor& in, Device dev) {
    Tensor xd = in.to(dev).requires_grad_();
    const Tensor y = max_pool2d(xd, {3, 3}, {1, 2}, {1, 1}, {1, 1}, true);
    y.backward(ones(y.sizes(), kFloat64).to(dev));
    return std::pair<Tensor, Tensor>{y.to(Device(kCPU)), xd.grad().to(Device(kCPU))};
  };
  const auto [want_y, want_g] = run(x, Device(kCPU));
  const auto [got_y, got_g] = run(x, kGpu);
  EXPECT_TRUE(same_bits(got_y, want_y));
  EXPECT_TRUE(same_bits(got_g, want_g));
  const auto [again_y, again_g] = run(x, kGpu);
  EXPECT_TRUE(same_bits(again_g, got_g));
  // a strided (transposed, then narrowed) float32 input against its contiguous copy
  const Tensor big = randn({3, 4, 16, 12});
  const Tensor strided = big.transpose(2, 3).narrow(2, 1, 10);
  const Tensor on_dev = big.to(kGpu).transpose(2, 3).narrow(2, 1, 10);
  EXPECT_TRUE(same_bits(max_pool2d(on_dev, {2, 3}, {2, 2}), max_pool2d(strided.contiguous(), {2, 3}, {2, 2})));
}

// batch_norm on the device against the CPU: training (batch statistics, running
// statistics moved twice) and eval (running statistics), affine or not, fp32 parameters
// with 16-bit input, 2-d, 4-d odd and channels-last inputs; output and all gradients.
TEST(Cuda, BatchNormMatchesTheCpu) {
  SKIP_WITHOUT_GPU();
  manual_seed(17);
  for (DType dt : testing::kAllFloat)
    for (const Shape& shape : {Shape{4, 5, 7, 3}, Shape{33, 6}, Shape{3, 4, 129}})
      for (bool cl : {false, true})
        for (bool affine : {true, false})
          for (bool training : {true, false}) {
            if (cl && shape.size() != 4) continue;
            SCOPED_TRACE(std::string(dtype_name(dt)) + " " + shape_str(shape) + (cl ? " channels-last" : "") +
                         (affine ? " affine" : "") + (training ? " training" : " eval"));
            const int64_t C = shape[1];
            const DType pdt = dt == kFloat64 ? kFloat64 : kFloat32;
            Tensor x = (randn(shape) * 2.0 + 0.5).to(dt);
            if (cl) x = x.contiguous(MemoryFormat::ChannelsLast);
            const Tensor w = (rand({C}) + 0.5).to(pdt), b = randn({C}).to(pdt), g = randn(shape).to(dt);
            const Tensor rm0 = randn({C}).to(pdt), rv0 = (rand({C}) + 0.5).to(pdt);
            auto run = [&](Device dev) {
              Tensor rm = rm0.to(dev).clone(), rv = rv0.to(dev).clone();
              Tensor xd = x.to(dev).requires_grad_();
              Tensor wd = w.to(dev).requires_grad_(), bd = b.to(dev).requires_grad_();
              const Tensor wa = affine ? wd : Tensor(), ba = affine ? bd : Tensor();
              if (training) batch_norm(x.to(dev) * 0.5, rm, rv, wa, ba, true, 0.3, 1e-5);  // a first update
              const Tensor y = batch_norm(xd, rm, rv, wa, ba, training, 0.3, 1e-5);
              y.backward(g.to(dev));
              std::vector<Tensor> r{y, xd.grad(), rm, rv};
              if (affine) r.insert(r.end(), {wd.grad(), bd.grad()});
              for (Tensor& t : r) t = t.to(Device(kCPU));
              return r;
            };
            const auto want = run(Device(kCPU)), got = run(kGpu);
            ASSERT_EQ(got.size(), want.size());
            for (size_t i = 0; i < want.size(); ++i) {
              EXPECT_EQ(got[i].dtype(), want[i].dtype()) << "output " << i;
              const testing::Tol tol = i >= 2 ? device_tol(pdt) : device_tol(dt);
              EXPECT_TRUE(testing::all_close(got[i].to(kFloat64), want[i].to(kFloat64), tol)) << "output " << i;
            }
          }
  // without running statistics (batch statistics in eval mode too), and the same bits twice
  const Tensor x = randn({8, 3, 5, 5}).to(kGpu);
  const Tensor a = batch_norm(x, Tensor(), Tensor(), Tensor(), Tensor(), false);
  EXPECT_TRUE(same_bits(batch_norm(x, Tensor(), Tensor(), Tensor(), Tensor(), false), a.to(Device(kCPU))));
  const Tensor big = randn({16, 4, 33, 31}).to(kGpu), gbig = randn({16, 4, 33, 31}).to(kGpu), w = rand({4}).to(kGpu);
  auto grads = [&] {
    Tensor xd = big.detach().requires_grad_(), wd = w.detach().requires_grad_();
    const auto gs = autograd::grad(batch_norm(xd, Tensor(), Tensor(), wd, Tensor(), true), {xd, wd}, gbig);
    return std::pair<Tensor, Tensor>{gs[0].to(Device(kCPU)), gs[1].to(Device(kCPU))};
  };
  const auto [gx1, gw1] = grads();
  const auto [gx2, gw2] = grads();
  EXPECT_TRUE(same_bits(gx2, gx1));
  EXPECT_TRUE(same_bits(gw2, gw1));
  EXPECT_TRUE(testing::all_close(a.to(Device(kCPU)),
                                 batch_norm(x.to(Device(kCPU)), Tensor(), Tensor(), Tensor(), Tensor(), false),
                                 device_tol(kFloat32)));
}

}  // namespace
}  // namespace tc
