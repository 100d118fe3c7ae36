// tc::dist under mpirun (tests/dist/CMakeLists.txt runs it with -np 2 and -np 3): the
// collectives against values computed here in float64, DistributedDataParallel against
// one process on the whole batch, buckets, overlap, no_sync, unused parameters, 16-bit
// communication, and the GradScaler's agreement across ranks.
//
// Every rank runs every test in the same order (collectives pair up across ranks); a
// failed expectation on one rank does not skip collectives, so the others do not hang.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <limits>

#include "dist/mpi_test_main.h"
#include "tensorcast/amp/autocast.h"
#include "tensorcast/amp/grad_scaler.h"
#include "tensorcast/autograd.h"
#include "tensorcast/dist/ddp.h"
#include "tensorcast/factories.h"
#include "tensorcast/nn/nn.h"
#include "tensorcast/ops.h"
#include "tensorcast/optim/adamw.h"
#include "tensorcast/optim/sgd.h"

namespace tc {
namespace {

using dist::ReduceOp;

int P() { return dist::world_size(); }
int R() { return dist::rank(); }

// Rank r's value at index i, and the float64 sum over ranks of it.
double value(int r, int64_t i) { return 0.25 * (r + 1) + 0.5 * static_cast<double>(i % 7) - 1.0; }
double sum_over_ranks(int64_t i) {
  double s = 0;
  for (int r = 0; r < P(); ++r) s += value(r, i);
  return s;
}

Tensor rank_tensor(int64_t n, DType dt) {
  std::vector<double> v;
  for (int64_t i = 0; i < n; ++i) v.push_back(value(R(), i));
  return tensor(v, {n}, kFloat64).to(dt);
}

TEST(Dist, WorldIsTheLauncher) {
  EXPECT_TRUE(dist::launched_by_mpi());
  EXPECT_GE(P(), 2);
  EXPECT_GE(R(), 0);
  EXPECT_LT(R(), P());
}

TEST(Dist, AllReduceEveryDtypeAndOp) {
  const int64_t n = 1000;
  for (DType dt : {kFloat32, kFloat64, kBFloat16, kFloat16}) {
    for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Max, ReduceOp::Min}) {
      Tensor t = rank_tensor(n, dt);
      dist::all_reduce(t, op);
      std::vector<double> got = t.to_vector();
      for (int64_t i = 0; i < n; ++i) {
        double want = 0;
        if (op == ReduceOp::Sum || op == ReduceOp::Avg) {
          want = sum_over_ranks(i) / (op == ReduceOp::Avg ? P() : 1);
        } else {
          want = value(op == ReduceOp::Max ? P() - 1 : 0, i);  // value grows with the rank
        }
        // The inputs are exact in every dtype (multiples of 1/4 below 8); the result is the
        // float64 value rounded once to the dtype.
        const double rounded = tensor(std::vector<double>{want}, {1}, kFloat64).to(dt).to_vector()[0];
        ASSERT_EQ(got[static_cast<size_t>(i)], rounded) << dtype_name(dt) << " op " << int(op) << " i " << i;
      }
    }
  }
  for (DType dt : {kInt32, kInt64, kUInt8}) {
    Tensor t = full({5}, static_cast<double>(R() + 1), dt);
    dist::all_reduce(t, ReduceOp::Sum);
    EXPECT_EQ(t.to_vector()[0], P() * (P() + 1) / 2.0);
    Tensor m = full({5}, static_cast<double>(R() + 1), dt);
    dist::all_reduce(m, ReduceOp::Max);
    EXPECT_EQ(m.to_vector()[4], static_cast<double>(P()));
  }
  Tensor b = full({3}, R() == 1 ? 1.0 : 0.0, kBool);
  dist::all_reduce(b, ReduceOp::Max);
  EXPECT_EQ(b.to_vector(), (std::vector<double>{1, 1, 1}));
}

TEST(Dist, AllReduceStridedTensorWritesBack) {
  Tensor base = zeros({4, 6});
  Tensor col = base.narrow(1, 2, 1);  // a column: not contiguous
  col.fill_(static_cast<double>(R() + 1));
  dist::all_reduce(col, ReduceOp::Sum);
  EXPECT_EQ(base.to_vector()[2], P() * (P() + 1) / 2.0);
  EXPECT_EQ(base.to_vector()[3], 0.0);  // the rest untouched
}

TEST(Dist, AllReduceErrorsNameTheProblem) {
  Tensor i = full({2}, 1.0, kInt32);
  try {
    dist::all_reduce(i, ReduceOp::Avg);
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("ReduceOp::Avg needs a floating tensor, got int32"), std::string::npos)
        << e.what();
  }
}

TEST(Dist, BroadcastAllGatherBarrier) {
  Tensor t = full({3, 2}, static_cast<double>(R() * 10 + 1));
  dist::broadcast(t, P() - 1);
  EXPECT_EQ(t.to_vector(), std::vector<double>(6, (P() - 1) * 10 + 1));
  std::vector<Tensor> parts = dist::all_gather(full({2}, static_cast<double>(R()), kInt64));
  ASSERT_EQ(parts.size(), static_cast<size_t>(P()));
  for (int r = 0; r < P(); ++r) EXPECT_EQ(parts[static_cast<size_t>(r)].to_vector(), std::vector<double>(2, r));
  dist::barrier();
}

// bf16 on the wire with fp32 accumulation: within one rounding of each input and one of
// the sum, and identical on every rank.
TEST(Dist, SixteenBitAllReduceAccumulatesInFloat32) {
  manual_seed(100 + static_cast<uint64_t>(R()));
  const int64_t n = 4099;  // not a multiple of the world size: padding
  Tensor x32 = randn({n});
  Tensor x = x32.to(kBFloat16);
  std::vector<Tensor> all = dist::all_gather(x32);
  dist::all_reduce_ordered_async(x, ReduceOp::Sum)->wait();
  std::vector<double> got = x.to_vector();
  double worst = 0;
  for (int64_t i = 0; i < n; ++i) {
    double exact = 0, abs_sum = 0;
    for (const Tensor& a : all) {
      const double v = a.to_vector()[static_cast<size_t>(i)];
      exact += v;
      abs_sum += std::fabs(v);
    }
    const double err = std::fabs(got[static_cast<size_t>(i)] - exact);
    ASSERT_LE(err, std::ldexp(abs_sum, -7)) << "element " << i;
    worst = std::max(worst, err / abs_sum);
  }
  std::vector<Tensor> results = dist::all_gather(x);
  for (const Tensor& r : results) EXPECT_EQ(r.to_vector(), got);
  if (R() == 0)
    std::printf("bf16 wire, fp32 accumulation: worst |err| / sum|x_i| = %.3g (bound 2^-7 = %.3g)\n", worst,
                std::ldexp(1.0, -7));
}

// The two halves of the ordered all-reduce on their own: the reduce-scatter leaves on rank
// r its chunk of the float64 sum's fp32 rounding order (bitwise the all-reduce's values
// there, zeros past the end), and the chunk gather puts every rank's chunk in rank order.
TEST(Dist, OrderedReduceScatterIsTheAllReducesChunk) {
  const int64_t n = 1001;  // no world size divides it
  const int64_t chunk = dist::ordered_chunk(n);
  EXPECT_EQ(chunk, (n + P() - 1) / P());
  for (DType dt : {kFloat32, kBFloat16}) {
    const Tensor x = rank_tensor(n, dt);
    Tensor reduced = x.clone();
    dist::all_reduce_ordered_async(reduced, ReduceOp::Avg)->wait();
    Tensor mine = empty({chunk}, dt);
    dist::reduce_scatter_ordered_async(x, mine, ReduceOp::Avg)->wait();
    const std::vector<double> got = mine.to_vector(), all = reduced.to_vector();
    for (int64_t i = 0; i < chunk; ++i) {
      const int64_t at = R() * chunk + i;
      const double want = at < n ? all[static_cast<size_t>(at)] : 0.0;
      ASSERT_EQ(got[static_cast<size_t>(i)], want) << dtype_name(dt) << " element " << at;
      if (at < n) {  // and within one rounding of the exact mean
        ASSERT_NEAR(got[static_cast<size_t>(i)], sum_over_ranks(at) / P(), dt == kFloat32 ? 1e-6 : 1e-2);
      }
    }
    Tensor gathered = empty({chunk * P()}, dt);
    dist::all_gather_chunks_async(mine, gathered)->wait();
    const std::vector<double> g = gathered.to_vector();
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(g[static_cast<size_t>(i)], all[static_cast<size_t>(i)]) << i;
  }
  Tensor wrong = empty({chunk + 1});
  EXPECT_THROW(dist::reduce_scatter_ordered_async(rank_tensor(n, kFloat32), wrong), Error);
}

// ---- DistributedDataParallel

constexpr int64_t kBatch = 24;  // divisible by 2 and 3

// The CLI's mlp and cnn (apps/tensorcast/models.h), on (B, 1, 28, 28) inputs.
std::shared_ptr<nn::Module> make_mlp() {
  manual_seed(42);
  return nn::Sequential(nn::Flatten(), nn::Linear(784, 512), nn::ReLU(), nn::Linear(512, 512), nn::ReLU(),
                        nn::Linear(512, 10))
      .ptr();
}
std::shared_ptr<nn::Module> make_cnn() {
  manual_seed(43);
  return nn::Sequential(nn::Conv2d(nn::Conv2dOptions(1, 32, 3).padding(1)), nn::ReLU(), nn::MaxPool2d(2),
                        nn::Conv2d(nn::Conv2dOptions(32, 64, 3).padding(1)), nn::ReLU(), nn::MaxPool2d(2),
                        nn::Flatten(), nn::Linear(3136, 128), nn::ReLU(), nn::Linear(128, 10))
      .ptr();
}
Tensor forward(nn::Module& m, const Tensor& x) { return dynamic_cast<nn::SequentialImpl&>(m).forward(x); }

struct Batch {
  Tensor x, y;
};
// The whole batch of step s (the same on every rank), and this rank's share of it.
Batch full_batch(int step, bool /*cnn*/) {
  manual_seed(1000 + static_cast<uint64_t>(step));
  Tensor x = randn({kBatch, 1, 28, 28});
  Tensor y = randint(0, 10, {kBatch});
  return {x, y};
}
Batch shard(const Batch& b) {
  const int64_t per = kBatch / P();
  return {b.x.narrow(0, R() * per, per).contiguous(), b.y.narrow(0, R() * per, per).contiguous()};
}

std::vector<Tensor> params_of(nn::Module& m) { return m.parameters(); }

double max_rel_diff(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  double worst = 0;
  for (size_t k = 0; k < a.size(); ++k) {
    std::vector<double> va = a[k].to_vector(), vb = b[k].to_vector();
    double scale = 0, diff = 0;
    for (size_t i = 0; i < va.size(); ++i) {
      scale = std::max(scale, std::fabs(vb[i]));
      diff = std::max(diff, std::fabs(va[i] - vb[i]));
    }
    worst = std::max(worst, diff / std::max(scale, 1e-30));
  }
  return worst;
}

// How the global batch of each step is computed.
enum class Mode {
  Whole,        // this process alone, the whole batch at once
  Accumulated,  // this process alone, the world's shards one after another (loss / p each)
  DataParallel  // DDP: this rank's shard, gradients averaged across ranks
};

// 20 optimizer steps (AdamW, or SGD) on the same batches. Returns the parameters.
std::vector<Tensor> train20(bool cnn, bool bf16, Mode mode, bool sgd = false) {
  auto m = cnn ? make_cnn() : make_mlp();
  std::unique_ptr<dist::DistributedDataParallel> ddp;
  if (mode == Mode::DataParallel) ddp = std::make_unique<dist::DistributedDataParallel>(m);
  std::unique_ptr<optim::Optimizer> opt;
  if (sgd)
    opt = std::make_unique<optim::SGD>(params_of(*m), optim::SGDOptions(0.05));
  else
    opt = std::make_unique<optim::AdamW>(params_of(*m), optim::AdamWOptions(1e-3));
  auto loss_of = [&](const Batch& b) {
    amp::AutocastGuard autocast(kCPU, kBFloat16, bf16);
    return cross_entropy(forward(*m, b.x), b.y);
  };
  const int64_t per = kBatch / P();
  for (int step = 0; step < 20; ++step) {
    const Batch whole = full_batch(step, cnn);
    opt->zero_grad();
    if (mode == Mode::Whole) loss_of(whole).backward();
    if (mode == Mode::DataParallel) loss_of(shard(whole)).backward();
    if (mode == Mode::Accumulated) {
      for (int r = 0; r < P(); ++r) {
        const Batch part{whole.x.narrow(0, r * per, per).contiguous(), whole.y.narrow(0, r * per, per).contiguous()};
        loss_of(part).backward();
      }
      // The average as DDP takes it: the sum in rank order, times 1/p in fp32.
      const float inv = 1.0f / static_cast<float>(P());
      for (const Tensor& p : m->parameters()) {
        float* g = p.grad().data_ptr<float>();
        for (int64_t i = 0; i < p.numel(); ++i) g[i] *= inv;
      }
    }
    opt->step();
  }
  return params_of(*m);
}

// The data-parallel arithmetic is exact: p ranks on B/p each give bitwise the parameters
// of one process that accumulates the same p shards and averages them (the buckets are
// summed in rank order, in fp32), for any p. Against one process on the whole batch the
// kernels themselves differ: oneDNN blocks a convolution over a batch of 8 differently
// from one of 24 (logits differ by up to 6e-8, measured; 12 and 24 agree bitwise), and
// ReLU/max-pool decisions and Adam's normalized first steps amplify last-bit differences.
// So the whole-batch comparison is asserted with SGD, where the split is linear: for the
// mlp always, for the cnn where its shards are bitwise equal in the forward (p = 2).
TEST(DDP, MatchesOneProcessFp32) {
  for (bool cnn : {false, true}) {
    const char* name = cnn ? "cnn" : "mlp";
    const auto ddp = train20(cnn, false, Mode::DataParallel);
    const double accumulated = max_rel_diff(ddp, train20(cnn, false, Mode::Accumulated));
    const double whole = max_rel_diff(ddp, train20(cnn, false, Mode::Whole));
    const double sgd_whole =
        max_rel_diff(train20(cnn, false, Mode::DataParallel, true), train20(cnn, false, Mode::Whole, true));
    if (R() == 0)
      std::printf(
          "fp32, 20 steps, %s: DDP vs one process accumulating the shards %.3g (AdamW); vs one process on the "
          "whole batch %.3g (AdamW), %.3g (SGD)\n",
          name, accumulated, whole, sgd_whole);
    EXPECT_EQ(accumulated, 0.0) << name;
    if (!cnn || P() == 2) EXPECT_LE(sgd_whole, 1e-5) << name;
  }
}

// In bf16 autocast too the data-parallel run is bitwise the one-process accumulation of
// the same shards. Against the whole batch, each rank's partial weight gradient is rounded
// to bf16 on its own, which Adam amplifies as above: reported, with bf16's own distance
// from fp32 for scale.
TEST(DDP, MatchesOneProcessBf16Autocast) {
  for (bool cnn : {false, true}) {
    const char* name = cnn ? "cnn" : "mlp";
    const auto ddp = train20(cnn, true, Mode::DataParallel);
    const double accumulated = max_rel_diff(ddp, train20(cnn, true, Mode::Accumulated));
    const auto whole16 = train20(cnn, true, Mode::Whole);
    const double whole = max_rel_diff(ddp, whole16);
    const double precision = max_rel_diff(whole16, train20(cnn, false, Mode::Whole));
    if (R() == 0)
      std::printf(
          "bf16 autocast, 20 AdamW steps, %s: DDP vs one process accumulating the shards %.3g; vs the whole "
          "batch %.3g; bf16 vs fp32 on the whole batch %.3g\n",
          name, accumulated, whole, precision);
    EXPECT_EQ(accumulated, 0.0) << name;
    EXPECT_LE(whole, precision) << name;
  }
}

TEST(DDP, ConstructorBroadcastsRankZerosParameters) {
  manual_seed(7 + static_cast<uint64_t>(R()));  // different on every rank
  auto m = nn::Sequential(nn::Linear(5, 3)).ptr();
  dist::DistributedDataParallel ddp(m);
  for (const Tensor& p : m->parameters()) {
    std::vector<Tensor> all = dist::all_gather(p);
    for (const Tensor& a : all) EXPECT_EQ(a.to_vector(), all[0].to_vector());
  }
}

// Gradients after one backward, for a bucket size.
std::vector<Tensor> synced_grads(int64_t cap, dist::SyncStats* stats = nullptr) {
  auto m = make_mlp();
  dist::DistributedDataParallel ddp(m, dist::DistributedDataParallelOptions().bucket_cap_bytes(cap));
  const Batch b = shard(full_batch(0, false));
  cross_entropy(forward(*m, b.x), b.y).backward();
  if (stats) *stats = ddp.last_sync();
  std::vector<Tensor> g;
  for (const Tensor& p : m->parameters()) g.push_back(p.grad().clone());
  return g;
}

TEST(DDP, BucketSizesGiveTheSameGradients) {
  dist::SyncStats small, big, one;
  const auto g_small = synced_grads(1024, &small);
  const auto g_big = synced_grads(int64_t{25} << 20, &big);
  const auto g_one = synced_grads(dist::kOneBucket, &one);
  EXPECT_GT(small.buckets, 4);
  EXPECT_EQ(one.buckets, 1);
  // Buckets are summed element by element in rank order: the bucketing cannot matter.
  EXPECT_EQ(max_rel_diff(g_small, g_one), 0.0);
  EXPECT_EQ(max_rel_diff(g_big, g_one), 0.0);
  EXPECT_EQ(small.bytes, one.bytes);
}

TEST(DDP, FirstBucketIsReducedWhileBackwardRuns) {
  // Wide enough that backward takes milliseconds, far above a wake-up of the
  // communication thread.
  manual_seed(9);
  auto m =
      nn::Sequential(nn::Linear(512, 1024), nn::ReLU(), nn::Linear(1024, 1024), nn::ReLU(), nn::Linear(1024, 10)).ptr();
  dist::DistributedDataParallel ddp(m, dist::DistributedDataParallelOptions().bucket_cap_bytes(1024));
  manual_seed(10 + static_cast<uint64_t>(R()));
  cross_entropy(forward(*m, randn({64, 512})), randint(0, 10, {64})).backward();
  const dist::SyncStats s = ddp.last_sync();
  if (R() == 0)
    std::printf("1 KiB buckets: %lld buckets, first started %.3f ms before backward ended; hidden %.3f of %.3f ms\n",
                static_cast<long long>(s.buckets), 1e3 * (s.backward_end - s.first_start), 1e3 * s.hidden_seconds,
                1e3 * s.comm_seconds);
  EXPECT_LT(s.first_launch, s.backward_end);
  EXPECT_LT(s.first_start, s.backward_end);
  EXPECT_GT(s.hidden_seconds, 0.0);
}

TEST(DDP, NoSyncAccumulatesThenReducesTheSum) {
  auto m = make_mlp();
  dist::DistributedDataParallel ddp(m);
  const Batch a = shard(full_batch(1, false)), b = shard(full_batch(2, false));
  {
    auto guard = ddp.no_sync();
    cross_entropy(forward(*m, a.x), a.y).backward();
  }
  // Local only: differs across ranks (different shards).
  cross_entropy(forward(*m, b.x), b.y).backward();
  // Reference: the local gradients of both micro-batches, averaged by hand.
  auto ref = make_mlp();
  cross_entropy(forward(*ref, a.x), a.y).backward();
  cross_entropy(forward(*ref, b.x), b.y).backward();
  std::vector<Tensor> want;
  for (const Tensor& p : ref->parameters()) {
    Tensor g = p.grad().clone();
    dist::all_reduce(g, ReduceOp::Avg);
    want.push_back(g);
  }
  std::vector<Tensor> got;
  for (const Tensor& p : m->parameters()) got.push_back(p.grad());
  EXPECT_LE(max_rel_diff(got, want), 1e-6);
}

struct TwoHeads : nn::Module {
  nn::Linear used{nullptr}, unused{nullptr};
  TwoHeads() : nn::Module("TwoHeads") {
    manual_seed(5);
    used = register_module("used", nn::Linear(4, 2));
    unused = register_module("unused", nn::Linear(4, 2));
  }
};

TEST(DDP, UnusedParameterIsAnErrorNamingIt) {
  auto m = std::make_shared<TwoHeads>();
  dist::DistributedDataParallel ddp(m);
  try {
    sum(m->used->forward(ones({3, 4}))).backward();
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("unused.weight"), std::string::npos) << msg;
    EXPECT_NE(msg.find("find_unused_parameters(true)"), std::string::npos) << msg;
  }
  dist::barrier();  // still in step: the used bucket was reduced on every rank
}

TEST(DDP, UnusedParameterCountsAsZeroWhenAllowed) {
  auto m = std::make_shared<TwoHeads>();
  dist::DistributedDataParallel ddp(m, dist::DistributedDataParallelOptions().find_unused_parameters(true));
  // Only rank 0 uses the second head: its gradient is rank 0's divided by the world size.
  Tensor y = sum(m->used->forward(ones({3, 4})));
  if (R() == 0) y = y + sum(m->unused->forward(ones({3, 4})));
  y.backward();
  ASSERT_TRUE(m->unused->weight.grad().defined());
  for (double v : m->unused->weight.grad().to_vector()) EXPECT_DOUBLE_EQ(v, 3.0 / P());
  for (double v : m->used->weight.grad().to_vector()) EXPECT_DOUBLE_EQ(v, 3.0);
}

TEST(DDP, Bf16CommunicationIsWithinItsBound) {
  auto m32 = make_mlp(), m16 = make_mlp();
  dist::DistributedDataParallel d32(m32);
  dist::DistributedDataParallel d16(m16, dist::DistributedDataParallelOptions().comm_dtype(kBFloat16));
  const Batch b = shard(full_batch(3, false));
  cross_entropy(forward(*m32, b.x), b.y).backward();
  cross_entropy(forward(*m16, b.x), b.y).backward();
  EXPECT_EQ(d16.last_sync().bytes * 2, d32.last_sync().bytes);
  std::vector<Tensor> g32, g16;
  for (const Tensor& p : m32->parameters()) g32.push_back(p.grad());
  for (const Tensor& p : m16->parameters()) g16.push_back(p.grad());
  const double rel = max_rel_diff(g16, g32);
  if (R() == 0) std::printf("bf16 communication: max relative gradient difference %.3g\n", rel);
  EXPECT_LE(rel, std::ldexp(1.0, -7));
  EXPECT_GT(rel, 0.0);  // it did go through bf16
}

// ---- GradScaler across ranks

TEST(DDP, OverflowOnOneRankSkipsTheStepEverywhere) {
  auto m = make_mlp();
  dist::DistributedDataParallel ddp(m);
  optim::AdamW opt(m->parameters(), optim::AdamWOptions(1e-3));
  amp::GradScaler scaler;
  dist::sync_grad_scaler(scaler);
  std::vector<double> before;
  for (int step = 0; step < 3; ++step) {
    opt.zero_grad();
    const Batch b = shard(full_batch(step, false));
    scaler.scale(cross_entropy(forward(*m, b.x), b.y)).backward();
    if (step == 1) {
      before = m->parameters()[0].to_vector();
      if (R() == P() - 1) {
        Tensor g = m->parameters()[2].grad();
        g.fill_(std::numeric_limits<double>::infinity());
      }
    }
    const bool stepped = scaler.step(opt);
    scaler.update();
    EXPECT_EQ(stepped, step != 1) << "step " << step;
    if (step == 1) {
      EXPECT_EQ(m->parameters()[0].to_vector(), before);
      EXPECT_EQ(scaler.get_scale(), 32768.0);
      ASSERT_TRUE(scaler.last_step().first_nonfinite.has_value());
      if (R() != P() - 1) EXPECT_NE(scaler.last_step().first_nonfinite->find("another rank"), std::string::npos);
    }
  }
  EXPECT_EQ(scaler.get_scale(), 32768.0);
  EXPECT_EQ(scaler.steps_skipped(), 1);
  for (const Tensor& p : m->parameters()) {
    std::vector<Tensor> all = dist::all_gather(p);
    for (const Tensor& a : all) EXPECT_EQ(a.to_vector(), all[0].to_vector());
  }
  // The scaler's state is the same everywhere.
  std::vector<Tensor> scales = dist::all_gather(full({}, scaler.get_scale(), kFloat64));
  std::vector<Tensor> trackers = dist::all_gather(full({}, double(scaler.get_growth_tracker()), kFloat64));
  for (int r = 0; r < P(); ++r) {
    EXPECT_EQ(scales[static_cast<size_t>(r)].item<double>(), scaler.get_scale());
    EXPECT_EQ(trackers[static_cast<size_t>(r)].item<double>(), double(scaler.get_growth_tracker()));
  }
}

}  // namespace
}  // namespace tc

int main(int argc, char** argv) { return tc::testing::run_tests_on_every_rank(argc, argv); }
