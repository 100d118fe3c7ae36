// The meta device: tensors with shapes, dtypes and strides but no storage. Ops compute
// their results' metadata, autograd records and runs, optimizers step, and the allocator
// counts the bytes a CPU run would allocate without allocating them. (Every op of the
// table on meta: OpDbMeta in test_op_db.cpp.)
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/testing.h"
#include "tensorcast/tensorcast.h"

namespace tc {
namespace {

const Device kMetaDevice(kMeta);

TEST(Meta, FactoriesMakeShapesWithoutStorageAndTheAllocatorCountsThem) {
  reset_peak_memory_stats(kMetaDevice);
  const int64_t before = memory_stats(kMetaDevice).current_bytes;
  {
    const Tensor a = empty({1024, 1024}, TensorOptions(kFloat32).device(kMetaDevice));
    const Tensor b = zeros({1024, 512}, TensorOptions(kBFloat16).device(kMetaDevice));
    EXPECT_EQ(a.device(), kMetaDevice);
    EXPECT_EQ(a.sizes(), (Shape{1024, 1024}));
    EXPECT_EQ(b.dtype(), kBFloat16);
    EXPECT_EQ(memory_stats(kMetaDevice).current_bytes - before, 1024 * 1024 * 4 + 1024 * 512 * 2);
    const Tensor c = matmul(a, b.to(kFloat32));
    EXPECT_EQ(c.sizes(), (Shape{1024, 512}));
    EXPECT_EQ(memory_stats(kMetaDevice).peak_bytes - before, 1024 * 1024 * 4 + 1024 * 512 * (2 + 4 + 4));
  }
  EXPECT_EQ(memory_stats(kMetaDevice).current_bytes, before);  // freed with the last handle
}

TEST(Meta, ValuesCannotBeRead) {
  const Tensor x = ones({2, 3}).to(kMetaDevice);
  EXPECT_TRUE(testing::throws_with([&] { (void)x.sum().item<float>(); }, {"[to]", "meta tensor", "no values"}));
  EXPECT_TRUE(testing::throws_with([&] { (void)x.to(Device(kCPU)); }, {"[to]", "no values to copy to cpu"}));
  EXPECT_TRUE(testing::throws_with([&] { (void)x.to_vector(); }, {"no values"}));
}

TEST(Meta, MixingDevicesIsRefusedByTheOps) {
  const Tensor x = ones({2, 3}).to(kMetaDevice), y = ones({3, 2});
  EXPECT_TRUE(testing::throws_with([&] { (void)matmul(x, y); }, {"[matmul]", "cpu", "meta"}));
}

// A training step of a small network under bf16 autocast with an AdamW step and float32
// master weights: the same shapes, gradients and optimizer state as on the CPU, and the
// same peak of counted bytes (both devices count what the ops ask for).
TEST(Meta, ATrainingStepAllocatesWhatTheCpuStepAllocates) {
  auto step = [](Device device) {
    manual_seed(3);
    nn::Sequential net(nn::Linear(64, 256), nn::GELU(), nn::Linear(256, 10));
    net->to(device);
    optim::AdamW opt(net->parameters(), optim::AdamWOptions(1e-3));
    const Tensor x = ones({32, 64}).to(device);
    const Tensor target = zeros({32}, TensorOptions(kInt64)).to(device);
    reset_peak_memory_stats(device);
    const int64_t base = memory_stats(device).current_bytes;
    {
      amp::AutocastGuard autocast(kCPU, kBFloat16);
      const Tensor loss = cross_entropy(net->forward(x), target);
      EXPECT_EQ(loss.device(), device);
      loss.backward();
    }
    opt.step();
    opt.zero_grad();
    std::vector<Shape> grads;
    for (const Tensor& p : net->parameters()) grads.push_back(p.sizes());
    return std::pair<int64_t, std::vector<Shape>>{memory_stats(device).peak_bytes - base, grads};
  };
  const auto [cpu_peak, cpu_shapes] = step(Device(kCPU));
  const auto [meta_peak, meta_shapes] = step(kMetaDevice);
  EXPECT_EQ(meta_shapes, cpu_shapes);
  EXPECT_GT(cpu_peak, 0);
  EXPECT_NEAR(static_cast<double>(meta_peak), static_cast<double>(cpu_peak), 0.05 * static_cast<double>(cpu_peak))
      << "meta " << meta_peak << " cpu " << cpu_peak;
}

}  // namespace
}  // namespace tc
