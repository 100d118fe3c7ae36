// Tests for tc::profiler: which records a known sequence of ops produces (forward ops,
// backward formulas, casts, optimizer), exact call counts and allocated bytes, nesting
// (self = total - children), and that nothing is recorded outside a Profile.
#include <map>
#include <string>

#include "common/testing.h"
#include "tensorcast/gemm16.h"

namespace tc {
namespace {

std::map<std::string, profiler::OpStat> by_name(const profiler::Profile& p) {
  std::map<std::string, profiler::OpStat> m;
  for (const profiler::OpStat& s : p.key_averages()) m[s.name] = s;
  return m;
}

TEST(Profiler, CountsCallsAndAllocatedBytesOfForwardAndBackward) {
  Tensor a = randn({8, 16}).requires_grad_();
  Tensor b = randn({16, 4}).requires_grad_();
  profiler::Profile prof;
  EXPECT_TRUE(profiler::is_recording());
  Tensor y = mm(a, b);          // 8x4 fp32: 128 bytes
  Tensor loss = relu(y).sum();  // relu 128 bytes, sum 4 bytes
  loss.backward();
  prof.stop();
  EXPECT_FALSE(profiler::is_recording());
  auto m = by_name(prof);
  ASSERT_TRUE(m.count("mm") && m.count("relu") && m.count("sum"));
  EXPECT_EQ(m["mm"].calls, 1);
  EXPECT_EQ(m["mm"].self_alloc_bytes, 8 * 4 * 4);
  EXPECT_EQ(m["relu"].self_alloc_bytes, 8 * 4 * 4);
  EXPECT_EQ(m["sum"].self_alloc_bytes, 4);
  EXPECT_EQ(m["mm backward"].calls, 1);
  EXPECT_EQ(m["relu backward"].calls, 1);
  EXPECT_EQ(m["sum backward"].calls, 1);
  EXPECT_EQ(m["AccumulateGrad"].calls, 2);
  EXPECT_EQ(m["backward (engine)"].calls, 1);
  // The engine's record encloses every backward formula.
  EXPECT_GE(m["backward (engine)"].total_ms, m["mm backward"].total_ms + m["relu backward"].total_ms);
  for (const auto& [name, s] : m) {
    EXPECT_GE(s.total_ms, s.self_ms) << name;
    EXPECT_GE(s.self_ms, 0.0) << name;
  }
  EXPECT_GE(prof.wall_ms(), m["backward (engine)"].total_ms);
}

TEST(Profiler, NestedRecordsSplitSelfFromTotal) {
  Tensor a = randn({64, 64});
  profiler::Profile prof;
  {
    profiler::RecordFunction outer("outer");
    for (int i = 0; i < 3; ++i) (void)mm(a, a);
  }
  prof.stop();
  auto m = by_name(prof);
  EXPECT_EQ(m["outer"].calls, 1);
  EXPECT_EQ(m["mm"].calls, 3);
  EXPECT_GE(m["outer"].total_ms, m["mm"].total_ms);
  EXPECT_NEAR(m["outer"].self_ms, m["outer"].total_ms - m["mm"].total_ms, 1e-9);
  EXPECT_EQ(m["outer"].self_alloc_bytes, 0);  // the outputs are mm's
  EXPECT_EQ(m["mm"].self_alloc_bytes, 3 * 64 * 64 * 4);
  const std::string table = prof.table();
  EXPECT_NE(table.find("outer"), std::string::npos);
  EXPECT_NE(table.find("(outside any record)"), std::string::npos);
}

TEST(Profiler, AutocastCastsAreRecordsInsideTheOp) {
  Tensor a = randn({8, 16});
  Tensor w = randn({4, 16});
  const Gemm16 saved = get_cpu_gemm16();
  // Each 16-bit GEMM kernel explicitly (kAuto picks per CPU and shape; tensorcast/gemm16.h).
  for (Gemm16 mode : {Gemm16::kNative, Gemm16::kFloat32}) {
    set_cpu_gemm16(mode);
    profiler::Profile prof;
    {
      amp::AutocastGuard autocast(kCPU, kBFloat16);
      Tensor y = linear(a, w, Tensor());
      EXPECT_EQ(y.dtype(), kBFloat16);
    }
    prof.stop();
    auto m = by_name(prof);
    EXPECT_EQ(m["linear"].calls, 1);
    EXPECT_GE(m["linear"].total_ms, m["to"].total_ms);
    EXPECT_EQ(m["to"].calls, 2);  // input and weight to bf16
    EXPECT_EQ(m["to"].self_alloc_bytes, (8 * 16 + 4 * 16) * 2);
    if (cpu_gemm16_path(kBFloat16) == Gemm16::kNative) {
      EXPECT_EQ(m["linear"].self_alloc_bytes, 8 * 4 * 2);  // the bf16 output
    } else {
      // The float32 kernel: linear's kernel also widens both bf16 operands and multiplies
      // into a float32 result it rounds into the bf16 output.
      EXPECT_EQ(m["linear"].self_alloc_bytes, 8 * 4 * 2 + (8 * 16 + 4 * 16 + 8 * 4) * 4);
    }
  }
  set_cpu_gemm16(saved);
}

TEST(Profiler, RecordsOptimizerStepAndNothingOutsideAProfile) {
  Tensor w = randn({32}).requires_grad_();
  optim::AdamW opt({w}, optim::AdamWOptions(1e-3));
  (void)(w * 2.0).sum();  // before: not recorded anywhere
  profiler::RecordFunction ignored("not recorded");
  EXPECT_FALSE(profiler::is_recording());
  profiler::Profile prof;
  opt.zero_grad();
  (w * w).sum().backward();
  opt.step();
  prof.stop();
  (void)(w * 3.0).sum();  // after: not recorded
  auto m = by_name(prof);
  EXPECT_EQ(m.count("not recorded"), 0u);
  EXPECT_EQ(m["optimizer.step"].calls, 1);
  EXPECT_EQ(m["optimizer.zero_grad"].calls, 1);
  EXPECT_EQ(m["mul"].calls, 1);  // only the recorded w * w
  EXPECT_EQ(m["sum"].calls, 1);
}

TEST(Profiler, ProfilesDoNotNest) {
  profiler::Profile outer;
  TC_EXPECT_ERROR(profiler::Profile inner, "profiles do not nest");
  outer.stop();
  profiler::Profile again;  // fine once the first stopped
  EXPECT_TRUE(profiler::is_recording());
}

}  // namespace
}  // namespace tc
