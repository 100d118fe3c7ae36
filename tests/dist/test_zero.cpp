// ZeroRedundancyOptimizer under mpirun (tests/CMakeLists.txt runs it with -np 2, 3 and 4,
// and across two network namespaces): stages 1 and 2 give bitwise the parameters of
// DistributedDataParallel, with fp32 and bf16 communication, fp32, bf16 and mixed
// parameters, a GradScaler that skips a step one rank overflowed; the optimizer state
// and the stage-2 gradients are about 1/p of DDP's; clipping across shards.
//
// Every rank runs every test in the same order (collectives pair up across ranks).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>

#include "dist/mpi_test_main.h"
#include "tensorcast/amp/autocast.h"
#include "tensorcast/amp/grad_scaler.h"
#include "tensorcast/autograd.h"
#include "tensorcast/dist/zero.h"
#include "tensorcast/error.h"
#include "tensorcast/factories.h"
#include "tensorcast/nn/nn.h"
#include "tensorcast/nn/utils.h"
#include "tensorcast/ops.h"
#include "tensorcast/optim/adamw.h"
#include "tensorcast/optim/sgd.h"

namespace tc {
namespace {

int P() { return dist::world_size(); }
int R() { return dist::rank(); }

constexpr int64_t kBatch = 24;  // divisible by 2, 3 and 4

// Sizes that no world size divides, so chunks cut parameters at odd places.
std::shared_ptr<nn::SequentialImpl> make_model() {
  manual_seed(42);
  return nn::Sequential(nn::Linear(64, 97), nn::ReLU(), nn::Linear(97, 33), nn::ReLU(), nn::Linear(33, 10)).ptr();
}

enum class Params { Fp32, Bf16, Mixed };  // Mixed: bf16 but the last layer fp32

struct Config {
  int stage = 0;  // 0: DDP alone
  DType comm = kFloat32;
  Params params = Params::Fp32;
  bool sgd = false;
  int overflow_step = -1;  // the last rank's gradients become inf at this step
  double clip = 0;         // > 0: clip the gradient norm to it
  optim::WeightUpdate update = optim::WeightUpdate::MasterFloat32;
  bool accumulate = false;                    // two micro-batches a step, the first under no_sync
  std::vector<std::filesystem::path> shards;  // save_shard to shards[rank] at the end
};

struct Result {
  int steps = 0;
  StateDict model, optimizer, scaler;  // to resume from
  std::vector<std::vector<double>> params;
  std::vector<double> norms;
  dist::ShardMemory memory;
  int64_t shard_numel = 0;
  int64_t skipped = 0;
  double scale = 0;
};

// `steps` steps in all; from a Result, the steps after its own.
Result train(const Config& run, int steps = 6, const Result* from = nullptr) {
  auto m = make_model();
  if (run.params != Params::Fp32) m->to(kBFloat16);
  if (run.params == Params::Mixed) (*m)[4]->to(kFloat32);
  // 4 KiB buckets: several buckets, each cut into p chunks.
  dist::DistributedDataParallel ddp(m,
                                    dist::DistributedDataParallelOptions().bucket_cap_bytes(4096).comm_dtype(run.comm));
  std::unique_ptr<optim::Optimizer> opt;
  if (run.sgd)
    opt = std::make_unique<optim::SGD>(m->parameters(), optim::SGDOptions(0.05).momentum(0.9));
  else
    opt = std::make_unique<optim::AdamW>(m->parameters(), optim::AdamWOptions(1e-2));
  opt->set_weight_update(run.update);
  std::unique_ptr<dist::ZeroRedundancyOptimizer> zero;
  if (run.stage > 0)
    zero = std::make_unique<dist::ZeroRedundancyOptimizer>(ddp, *opt, dist::ZeroOptions().stage(run.stage));
  amp::GradScaler scaler(amp::GradScalerOptions().init_scale(1024.0));
  dist::sync_grad_scaler(scaler);
  if (from) {
    m->load_state_dict(from->model);
    if (zero)
      zero->load_state_dict(from->optimizer);
    else
      opt->load_state_dict(from->optimizer);
    scaler.load_state_dict(from->scaler);
  }
  Result out;
  const int64_t per = kBatch / P();
  for (int step = from ? from->steps : 0; step < steps; ++step) {
    manual_seed(1000 + static_cast<uint64_t>(step));
    const Tensor x = randn({kBatch, 64}).narrow(0, R() * per, per).contiguous();
    const Tensor y = randint(0, 10, {kBatch}).narrow(0, R() * per, per).contiguous();
    opt->zero_grad();
    {
      amp::AutocastGuard autocast(kCPU, kBFloat16, run.params != Params::Fp32);
      if (run.accumulate) {
        auto no_sync = ddp.no_sync();
        scaler.scale(cross_entropy(m->forward(x * 0.5), y)).backward();
      }
      scaler.scale(cross_entropy(m->forward(x), y)).backward();
    }
    if (step == run.overflow_step && R() == P() - 1) {
      // After the reduction, on one rank only: its own check must stop every rank.
      for (const auto& g : opt->param_groups())
        for (const Tensor& p : g.params)
          if (p.grad().defined()) Tensor(p.grad()).fill_(std::numeric_limits<double>::infinity());
    }
    if (run.clip > 0) {
      scaler.unscale_(*opt);
      out.norms.push_back(zero ? zero->clip_grad_norm_(run.clip)
                               : nn::utils::clip_grad_norm_(m->parameters(), run.clip));
    }
    if (step == steps - 1) out.memory = zero ? zero->memory() : dist::replicated_memory(ddp, *opt);
    scaler.step(*opt);
    scaler.update();
  }
  for (const Tensor& p : m->parameters()) out.params.push_back(p.to(kFloat64).to_vector());
  out.steps = steps;
  out.model = m->state_dict();
  out.optimizer = zero ? zero->state_dict() : opt->state_dict();
  if (!run.shards.empty()) {
    zero->save_shard(run.shards[static_cast<size_t>(R())], {{"step", std::to_string(steps)}});
    dist::barrier();  // every file is on disk
  }
  out.scaler = scaler.state_dict();
  out.shard_numel = zero ? zero->shard_numel() : 0;
  out.skipped = scaler.steps_skipped();
  out.scale = scaler.get_scale();
  return out;
}

const char* params_name(Params p) { return p == Params::Fp32 ? "fp32" : p == Params::Bf16 ? "bf16" : "mixed"; }

// The acceptance test: bitwise DDP's parameters after every combination.
TEST(Zero, BitwiseEqualToDistributedDataParallel) {
  for (bool sgd : {false, true})
    for (Params params : {Params::Fp32, Params::Bf16, Params::Mixed})
      for (DType comm : {kFloat32, kBFloat16}) {
        if (sgd && params != Params::Fp32) continue;
        Config run{0, comm, params, sgd};
        const Result ddp = train(run);
        for (int stage : {1, 2}) {
          run.stage = stage;
          const Result zero = train(run);
          EXPECT_EQ(zero.params, ddp.params) << "stage " << stage << ", " << params_name(params) << " parameters, "
                                             << dtype_name(comm) << " communication, " << (sgd ? "SGD" : "AdamW");
        }
      }
}

// 16-bit parameters without float32 masters, and gradients accumulated under no_sync.
TEST(Zero, BitwiseEqualWithPureUpdatesAndAccumulation) {
  for (auto update : {optim::WeightUpdate::Pure, optim::WeightUpdate::PureKahan}) {
    Config run{0, kFloat32, Params::Bf16};
    run.update = update;
    const Result ddp = train(run);
    for (int stage : {1, 2}) {
      run.stage = stage;
      EXPECT_EQ(train(run).params, ddp.params) << "stage " << stage << ", " << optim::weight_update_name(update);
    }
  }
  Config run;
  run.accumulate = true;
  const Result ddp = train(run);
  for (int stage : {1, 2}) {
    run.stage = stage;
    EXPECT_EQ(train(run).params, ddp.params) << "stage " << stage << ", accumulated under no_sync";
  }
}

TEST(Zero, OneRanksOverflowSkipsTheStepEverywhereAsDdp) {
  Config run;
  run.overflow_step = 2;
  const Result ddp = train(run);
  EXPECT_EQ(ddp.skipped, 1);
  for (int stage : {1, 2}) {
    run.stage = stage;
    const Result zero = train(run);
    EXPECT_EQ(zero.skipped, 1) << "stage " << stage;
    EXPECT_EQ(zero.scale, ddp.scale) << "stage " << stage;
    EXPECT_EQ(zero.params, ddp.params) << "stage " << stage;
  }
}

// Optimizer state about 1/p of DDP's (AdamW: two fp32 moments per element, plus one step
// count per piece); stage 2 also holds about 1/p of the gradients.
TEST(Zero, ShardsHoldAboutOnePthOfTheState) {
  const Result ddp = train(Config{}, 2);
  int64_t total_numel = 0;
  for (const auto& p : ddp.params) total_numel += static_cast<int64_t>(p.size());
  for (int stage : {1, 2}) {
    const Result zero = train(Config{stage}, 2);
    Tensor numel = full({}, static_cast<double>(zero.shard_numel), kFloat64);
    dist::all_reduce(numel);
    EXPECT_EQ(numel.item<double>(), static_cast<double>(total_numel)) << "the shards cover the model once";
    const double state_ratio = static_cast<double>(zero.memory.optimizer_state) * P() / ddp.memory.optimizer_state;
    const double grad_ratio = static_cast<double>(zero.memory.gradients) * P() / ddp.memory.gradients;
    if (R() == 0)
      std::printf(
          "p = %d, stage %d: optimizer state %lld B (DDP %lld B, ratio x p %.3f); gradients %lld B (DDP %lld B)\n", P(),
          stage, static_cast<long long>(zero.memory.optimizer_state),
          static_cast<long long>(ddp.memory.optimizer_state), state_ratio,
          static_cast<long long>(zero.memory.gradients), static_cast<long long>(ddp.memory.gradients));
    EXPECT_NEAR(state_ratio, 1.0, 0.05) << "stage " << stage;
    EXPECT_EQ(zero.memory.parameters, ddp.memory.parameters);
    if (stage == 2)
      EXPECT_NEAR(grad_ratio, 1.0, 0.05);
    else
      EXPECT_GT(zero.memory.gradients, ddp.memory.gradients / 2);  // the full buckets stay
  }
}

// The norm across shards is the norm DDP's replicated gradients give (added in another
// order: to float64 rounding), and clipping by it keeps the runs within float32 rounding.
TEST(Zero, ClipGradNormAcrossShardsIsTheWholeNorm) {
  Config run;
  run.clip = 0.5;
  const Result ddp = train(run);
  for (int stage : {1, 2}) {
    run.stage = stage;
    const Result zero = train(run);
    ASSERT_EQ(zero.norms.size(), ddp.norms.size());
    for (size_t k = 0; k < ddp.norms.size(); ++k) EXPECT_NEAR(zero.norms[k], ddp.norms[k], 1e-12 * ddp.norms[k]);
    EXPECT_GT(ddp.norms[0], run.clip);  // it did clip
    double worst = 0;
    for (size_t t = 0; t < ddp.params.size(); ++t)
      for (size_t i = 0; i < ddp.params[t].size(); ++i)
        worst = std::max(worst, std::fabs(zero.params[t][i] - ddp.params[t][i]));
    EXPECT_LE(worst, 1e-5) << "stage " << stage;
  }
}

void expect_same_state(const StateDict& got, const StateDict& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (const auto& [key, t] : want) {
    const auto it = got.find(key);
    ASSERT_NE(it, got.end()) << what << ": " << key;
    EXPECT_EQ(it->second.dtype(), t.dtype()) << what << ": " << key;
    EXPECT_EQ(it->second.sizes(), t.sizes()) << what << ": " << key;
    EXPECT_EQ(it->second.to(kFloat64).to_vector(), t.to(kFloat64).to_vector()) << what << ": " << key;
  }
}

// The consolidated state is bitwise DDP's optimizer state, in its layout; loaded by a
// ZeRO run (of this or any world size: the layout does not depend on it) or by a plain
// DDP run, the continuation is bitwise DDP's.
TEST(Zero, ConsolidatedStateIsDdpsAndResumesAnywhere) {
  for (Params params : {Params::Fp32, Params::Mixed}) {
    Config run{0, kFloat32, params};
    const Result ddp3 = train(run, 3), ddp6 = train(run, 6);
    for (int stage : {1, 2}) {
      run.stage = stage;
      const std::string what = "stage " + std::to_string(stage) + ", " + params_name(params) + " parameters";
      const Result zero3 = train(run, 3);
      expect_same_state(zero3.optimizer, ddp3.optimizer, what);
      EXPECT_EQ(train(run, 6, &ddp3).params, ddp6.params) << what << ", resumed from DDP's state";
      EXPECT_EQ(train(run, 6, &zero3).params, ddp6.params) << what << ", resumed from its own state";
      Config plain = run;
      plain.stage = 0;
      EXPECT_EQ(train(plain, 6, &zero3).params, ddp6.params) << what << ", DDP resumed from ZeRO's state";
    }
  }
}

// A directory every rank names the same (rank 0's pid), removed at the end.
struct SharedDir {
  std::filesystem::path path;
  SharedDir() {
    Tensor pid = full({}, static_cast<double>(getpid()), kInt64);
    dist::broadcast(pid, 0);
    path = std::filesystem::temp_directory_path() / ("tc_zero_test_" + std::to_string(pid.item<int64_t>()));
    std::filesystem::create_directories(path);
    dist::barrier();
  }
  ~SharedDir() {
    dist::barrier();
    if (R() == 0) std::filesystem::remove_all(path);
  }
  std::vector<std::filesystem::path> files(const std::string& stem, int n) const {
    std::vector<std::filesystem::path> out;
    for (int r = 0; r < n; ++r) out.push_back(path / (stem + std::to_string(r) + ".safetensors"));
    return out;
  }
};

// What each rank saves alone loads back: by the same layout (its own file), by another
// bucket layout (every file, sliced again) and by one unsharded optimizer; each gives the
// consolidated state bitwise. Files of another step, rank order or world size are refused.
TEST(Zero, ShardFilesLoadAsTheConsolidatedState) {
  SharedDir dir;
  Config run{2, kFloat32, Params::Mixed};
  run.shards = dir.files("shard", P());
  const Result saved = train(run, 3);
  for (int64_t cap : {int64_t{4096}, dist::kOneBucket}) {
    auto m = make_model();
    m->to(kBFloat16);
    (*m)[4]->to(kFloat32);
    dist::DistributedDataParallel ddp(m, dist::DistributedDataParallelOptions().bucket_cap_bytes(cap));
    optim::AdamW opt(m->parameters(), optim::AdamWOptions(1e-2));
    dist::ZeroRedundancyOptimizer zero(ddp, opt, dist::ZeroOptions().stage(1));
    zero.load_shards(run.shards, {{"step", "3"}});
    expect_same_state(zero.state_dict(), saved.optimizer, cap == dist::kOneBucket ? "one bucket" : "same buckets");
  }
  auto m = make_model();
  optim::AdamW unsharded(m->parameters(), optim::AdamWOptions(1e-2));
  expect_same_state(dist::read_shards(run.shards, unsharded), saved.optimizer, "one process");

  auto message = [&](const std::vector<std::filesystem::path>& paths, const io::Metadata& expect) {
    try {
      dist::read_shards(paths, unsharded, expect);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message(run.shards, {{"step", "4"}}).find("its 'step' is 3, expected 4"), std::string::npos);
  if (P() > 1) {
    std::vector<std::filesystem::path> reversed(run.shards.rbegin(), run.shards.rend());
    EXPECT_NE(message(reversed, {}).find("(the shard of rank 0): written by rank " + std::to_string(P() - 1)),
              std::string::npos);
    std::vector<std::filesystem::path> fewer(run.shards.begin(), run.shards.end() - 1);
    EXPECT_NE(message(fewer, {}).find("written by a run of " + std::to_string(P()) + " processes"), std::string::npos);
  }
  EXPECT_NE(message({dir.path / "missing.safetensors"}, {}).find("missing.safetensors"), std::string::npos);
}

TEST(Zero, RefusesWhatItCannotShard) {
  auto m = make_model();
  dist::DistributedDataParallel ddp(m);
  optim::SGD opt(m->parameters(), optim::SGDOptions(0.1));
  auto message = [&](auto&& make) {
    try {
      make();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message([&] {
              dist::ZeroRedundancyOptimizer z(ddp, opt, dist::ZeroOptions().stage(3));
            }).find("stage must be 1 or 2, got 3"),
            std::string::npos);
  Tensor stranger = zeros({3}).requires_grad_();
  optim::SGD foreign(std::vector<Tensor>{stranger}, optim::SGDOptions(0.1));
  EXPECT_NE(message([&] { dist::ZeroRedundancyOptimizer z(ddp, foreign); }).find("not parameters of the"),
            std::string::npos);
  optim::AdamW stepped(m->parameters(), optim::AdamWOptions(1e-3));
  for (const Tensor& p : m->parameters()) p.set_grad(zeros(p.sizes()));
  stepped.step();
  EXPECT_NE(message([&] { dist::ZeroRedundancyOptimizer z(ddp, stepped); }).find("already holds state"),
            std::string::npos);
  dist::DistributedDataParallel ddp2(m);
  {
    dist::ZeroRedundancyOptimizer z(ddp, opt);
    EXPECT_NE(message([&] { dist::ZeroRedundancyOptimizer again(ddp, opt); }).find("already sharded"),
              std::string::npos);
    // A state dict of another model: the entry is named, and nothing is loaded.
    optim::AdamW adam(m->parameters(), optim::AdamWOptions(1e-3));
    dist::ZeroRedundancyOptimizer z2(ddp2, adam);
    StateDict other = stepped.state_dict();
    StateDict malformed = stepped.state_dict();
    malformed["param_groups.x.params"] = zeros({1}, kInt64);
    EXPECT_NE(message([&] { z2.load_state_dict(malformed); }).find("'param_groups.x.params' does not name"),
              std::string::npos);
    other["state.0.exp_avg"] = zeros({5, 5});
    EXPECT_NE(message([&] { z2.load_state_dict(other); }).find("'state.0.exp_avg' has shape (5, 5), but parameter 0"),
              std::string::npos);
  }
}

}  // namespace
}  // namespace tc

int main(int argc, char** argv) { return tc::testing::run_tests_on_every_rank(argc, argv); }
