// Independent work on several threads at once. Each thread trains its own small model
// (autocast, a GradScaler, AdamW, a prefetching DataLoader, its own Profile) while another
// thread draws random numbers and reads the memory counters. Run concurrently, every
// training thread must end bit-identical to the same work run alone, and each Profile must
// hold exactly its own thread's records. The ThreadSanitizer build (./run.sh test-tsan)
// runs this for data races in the state the threads share underneath: the allocator and
// its counters, the oneDNN plan and matmul caches, the cast policy, the generator, the
// intra-op thread teams of several calling threads.
#include <atomic>
#include <map>
#include <thread>

#include "common/testing.h"
#include "tensorcast/amp/autocast.h"
#include "tensorcast/amp/grad_scaler.h"
#include "tensorcast/data/data_loader.h"
#include "tensorcast/nn/nn.h"
#include "tensorcast/optim/adamw.h"
#include "tensorcast/profiler.h"

namespace tc {
namespace {

using testing::uniform;

struct Outcome {
  StateDict weights;
  std::map<std::string, int64_t> calls;  // the thread's Profile: record name -> calls
  int64_t skipped = 0;
  double final_loss = 0;
};

// Everything is seeded locally (testing::uniform, the loader's own seed), so the result
// does not depend on what other threads do with the global generator.
Outcome train(DType dt, uint64_t seed) {
  constexpr int64_t kIn = 16, kHidden = 32, kOut = 4;
  nn::Sequential model(nn::Linear(kIn, kHidden), nn::ReLU(), nn::Linear(kHidden, kOut));
  model->load_state_dict({{"0.weight", uniform({kHidden, kIn}, kFloat32, -0.25, 0.25, seed)},
                          {"0.bias", uniform({kHidden}, kFloat32, -0.1, 0.1, seed + 1)},
                          {"2.weight", uniform({kOut, kHidden}, kFloat32, -0.2, 0.2, seed + 2)},
                          {"2.bias", uniform({kOut}, kFloat32, -0.1, 0.1, seed + 3)}});
  const Tensor x = uniform({256, kIn}, kFloat32, -1.0, 1.0, seed + 4);
  const Tensor y = argmax(matmul(x, uniform({kIn, kOut}, kFloat32, -1.0, 1.0, seed + 5)), 1);
  data::DataLoader loader(data::TensorDataset(x, y), data::DataLoaderOptions(32).shuffle(true).seed(seed).prefetch(2));
  optim::AdamW optimizer(model->parameters(), optim::AdamWOptions(1e-2));
  // fp16 with a scale that overflows at first, so the threads also skip steps and back off.
  amp::GradScaler scaler(amp::GradScalerOptions().enabled(dt == kFloat16).init_scale(0x1p40).growth_interval(4));

  Outcome out;
  profiler::Profile profile;
  for (int epoch = 0; epoch < 3; ++epoch)
    for (auto& batch : loader) {
      optimizer.zero_grad();
      Tensor loss;
      {
        amp::AutocastGuard autocast(kCPU, dt == kFloat32 ? kBFloat16 : dt, /*enabled=*/dt != kFloat32);
        loss = nn::functional::cross_entropy(model->forward(batch.data), batch.target);
      }
      scaler.scale(loss).backward();
      scaler.step(optimizer);
      scaler.update();
      out.final_loss = loss.item_double();
    }
  profile.stop();
  for (const profiler::OpStat& s : profile.key_averages()) out.calls[s.name] = s.calls;
  out.weights = model->state_dict();
  out.skipped = scaler.steps_skipped();
  return out;
}

void expect_same(const Outcome& got, const Outcome& alone, const char* what) {
  SCOPED_TRACE(what);
  ASSERT_EQ(got.weights.size(), alone.weights.size());
  for (const auto& [name, w] : alone.weights) EXPECT_TRUE(testing::equal(got.weights.at(name), w)) << name;
  EXPECT_EQ(got.calls, alone.calls);
  EXPECT_EQ(got.skipped, alone.skipped);
  EXPECT_EQ(got.final_loss, alone.final_loss);
}

TEST(ThreadSafety, ConcurrentTrainingRunsMatchTheSameRunsAlone) {
  const Outcome fp16_alone = train(kFloat16, 10), bf16_alone = train(kBFloat16, 20), fp32_alone = train(kFloat32, 30);
  // The runs did something: fp16 skipped its overflowing first steps, every run's profile
  // saw the layers' ops, and every run moved its weights.
  EXPECT_GT(fp16_alone.skipped, 0);
  EXPECT_EQ(bf16_alone.skipped, 0);
  EXPECT_GT(fp16_alone.calls.size(), 5u);
  for (const auto& [run, seed] : {std::pair{&fp16_alone, 10}, {&bf16_alone, 20}, {&fp32_alone, 30}})
    EXPECT_FALSE(testing::equal(run->weights.at("0.weight"), uniform({32, 16}, kFloat32, -0.25, 0.25, seed)));

  Outcome fp16, bf16, fp32;
  std::atomic<bool> done{false};
  int64_t noise_draws = 0;
  std::thread noise([&] {  // the global generator and the allocator counters, meanwhile
    while (!done.load()) {
      manual_seed(static_cast<uint64_t>(noise_draws));
      (void)randn({64}).sum().item_double();
      (void)memory_stats();
      ++noise_draws;
    }
  });
  std::thread a([&] { fp16 = train(kFloat16, 10); });
  std::thread b([&] { bf16 = train(kBFloat16, 20); });
  fp32 = train(kFloat32, 30);  // and the main thread
  a.join();
  b.join();
  done.store(true);
  noise.join();

  expect_same(fp16, fp16_alone, "fp16 + GradScaler");
  expect_same(bf16, bf16_alone, "bf16");
  expect_same(fp32, fp32_alone, "fp32");
  EXPECT_GT(noise_draws, 0);
}

}  // namespace
}  // namespace tc
