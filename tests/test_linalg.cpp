// Tests for matmul, mm, bmm and linear beyond the op table (test_op_db.cpp checks forward
// against a float64 triple loop, NumPy 1-d and batch-broadcast rules, strided operands,
// empty shapes and gradcheck in every dtype): larger products against the triple loop,
// operands read without copies, the one-rounding 16-bit paths, backward against float64
// reference formulas, error messages, the primitive cache and concurrent use.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <thread>
#include <vector>

#include "backend/cpu/loops/activation.h"
#include "backend/cpu/loops/gemv.h"
#include "backend/cpu/onednn/matmul.h"
#include "backend/cpu/x86/matmul_amx.h"
#include "backend/cpu/x86/weight_grad.h"
#include "common/references.h"
#include "common/testing.h"
#include "tensorcast/allocator.h"
#include "tensorcast/gemm16.h"
#include "tensorcast/parallel.h"
#include "tensorcast/profiler.h"

namespace tc {
namespace {

using testing::all_close;
using testing::kFloatingTypes;
using testing::Tol;
using testing::tol_for;
using testing::uniform;

// ---- float64 reference -----------------------------------------------------------------

// Products are checked against testing::ref::matmul (common/references.h): a plain triple
// loop in double over the tensors' values (no tc op involved).
using Ref = testing::ref::ShapedValues;

double max_abs(const Tensor& t) {
  double m = 0;
  for (double v : t.to_vector()) m = std::max(m, std::fabs(v));
  return m;
}

// Error bound for a product with inner size k: float32 accumulation (k roundings of terms
// up to max|a| max|b|), plus one rounding of the output to a 16-bit dtype.
Tol product_tol(DType dt, int64_t k, double amax, double bmax) {
  const double acc = 2.0 * static_cast<double>(std::max<int64_t>(k, 1)) * 0x1p-23 * amax * bmax;
  switch (dt) {
    case DType::Float64:
      return {1e-12 * std::max<int64_t>(k, 1) * amax * bmax, 1e-14};
    case DType::Float32:
      return {acc, 0x1p-23};
    case DType::BFloat16:
      return {acc, 0x1p-8};  // half an ulp, relative
    case DType::Float16:
      return {acc, 0x1p-11};
    default:
      return {0, 0};
  }
}

::testing::AssertionResult matches_ref(const Tensor& out, const Ref& ref, DType dt, int64_t k, double amax,
                                       double bmax) {
  if (out.dtype() != dt) return ::testing::AssertionFailure() << "dtype " << dtype_name(out.dtype());
  if (out.sizes() != ref.shape)
    return ::testing::AssertionFailure() << "shape " << shape_str(out.sizes()) << " != " << shape_str(ref.shape);
  return all_close(out, ref.values, product_tol(dt, k, amax, bmax));
}

const std::vector<DType> kAllTypes = {kFloat32, kBFloat16, kFloat16, kFloat64};

class LinalgTyped : public ::testing::TestWithParam<DType> {};
INSTANTIATE_TEST_SUITE_P(DTypes, LinalgTyped, ::testing::ValuesIn(kAllTypes),
                         [](const auto& info) { return std::string(traits(info.param).short_name); });

// ---- forward -----------------------------------------------------------------------------

TEST_P(LinalgTyped, MmMatchesReference) {
  const DType dt = GetParam();
  for (auto [n, k, m] : {std::tuple<int64_t, int64_t, int64_t>{1, 1, 1}, {3, 5, 7}, {37, 129, 23}, {64, 512, 96}}) {
    Tensor a = uniform({n, k}, dt, -2, 2, 1), b = uniform({k, m}, dt, -2, 2, 2);
    EXPECT_TRUE(matches_ref(mm(a, b), testing::ref::matmul(a, b), dt, k, 2, 2)) << n << "x" << k << "x" << m;
    EXPECT_TRUE(matches_ref(matmul(a, b), testing::ref::matmul(a, b), dt, k, 2, 2)) << n << "x" << k << "x" << m;
  }
}

TEST_P(LinalgTyped, TransposedAndStridedInputs) {
  const DType dt = GetParam();
  const int64_t n = 19, k = 70, m = 33;
  Tensor at = uniform({k, n}, dt, -1, 1, 3).t();                        // column-major a
  Tensor bt = uniform({m, k}, dt, -1, 1, 4).t();                        // column-major b
  Tensor as = uniform({n, 2 * k}, dt, -1, 1, 5).slice(1, 0, 2 * k, 2);  // every other column
  Tensor bs = uniform({k + 3, m}, dt, -1, 1, 6).narrow(0, 2, k);        // an offset window
  ASSERT_FALSE(at.is_contiguous());
  ASSERT_FALSE(as.is_contiguous());
  for (const Tensor& a : {at, as})
    for (const Tensor& b : {bt, bs}) EXPECT_TRUE(matches_ref(mm(a, b), testing::ref::matmul(a, b), dt, k, 1, 1));
}

// Sets the 16-bit GEMM mode for a scope.
class Gemm16Mode {
 public:
  explicit Gemm16Mode(Gemm16 m) : saved_(get_cpu_gemm16()) { set_cpu_gemm16(m); }
  ~Gemm16Mode() { set_cpu_gemm16(saved_); }

 private:
  Gemm16 saved_;
};

TEST(Linalg, TransposedInputsAreNotCopied) {
  // The only storage a forward product allocates is its output (oneDNN reads the strides).
  // The float32 path of a 16-bit product widens its operands instead (next tests).
  for (DType dt : {kFloat32, kBFloat16}) {
    if (!cpu::native_matmul(dt)) {
      std::cout << "[ note ] " << dtype_name(dt) << ": no native matmul on this CPU, not checked\n";
      continue;
    }
    Gemm16Mode native(Gemm16::kNative);
    Tensor a = uniform({64, 32}, dt).t(), b = uniform({48, 64}, dt).t();
    Tensor x = uniform({2, 3, 48}, dt).transpose(0, 1), w = uniform({16, 48}, dt), bias = uniform({16}, dt);
    (void)mm(a, b);  // warm the primitive cache
    const int64_t before = memory_stats().allocation_count;
    Tensor c = mm(a, b);
    EXPECT_EQ(memory_stats().allocation_count - before, 1) << dtype_name(dt);
    Tensor bt = uniform({5, 64, 32}, dt).transpose(1, 2);  // batched, transposed
    const int64_t before_b = memory_stats().allocation_count;
    Tensor d = matmul(bt, b);
    EXPECT_EQ(memory_stats().allocation_count - before_b, 1) << dtype_name(dt);
    Tensor xl = uniform({6, 48}, dt);
    const int64_t before_l = memory_stats().allocation_count;
    Tensor y = linear(x, w, bias);  // weight read transposed, bias fused, (2, 3) rows flattened
    EXPECT_EQ(memory_stats().allocation_count - before_l, 2) << dtype_name(dt);  // x needs a copy to flatten
    const int64_t before_l2 = memory_stats().allocation_count;
    Tensor y2 = linear(xl, w, bias);
    EXPECT_EQ(memory_stats().allocation_count - before_l2, 1) << dtype_name(dt);
    EXPECT_TRUE(matches_ref(d, testing::ref::matmul(bt, b), dt, 32, 2, 2));
  }
}

TEST(Linalg, Float32PathIsTheFloat32ProductRoundedOnce) {
  // The float32 path widens the operands in their own layouts and runs the float32
  // kernel: bit-identical to widening by hand, for plain, transposed, batched and biased
  // products, with a 16-bit or a float32 result (the weight gradients of linear).
  Gemm16Mode wide(Gemm16::kFloat32);
  for (DType dt : {kBFloat16, kFloat16}) {
    EXPECT_EQ(cpu_gemm16_path(dt), Gemm16::kFloat32);
    auto f = [](const Tensor& t) { return t.to(kFloat32); };
    Tensor a = uniform({33, 70}, dt, -2, 2, 27), b = uniform({70, 45}, dt, -2, 2, 28);
    Tensor bias = uniform({45}, dt, -1, 1, 29);
    EXPECT_TRUE(testing::equal(mm(a, b), mm(f(a), f(b)).to(dt))) << dtype_name(dt);
    EXPECT_TRUE(testing::equal(mm(b.t(), a.t()), mm(f(b).t(), f(a).t()).to(dt))) << dtype_name(dt);
    EXPECT_TRUE(testing::equal(linear(a, b.t(), bias), linear(f(a), f(b).t(), f(bias)).to(dt))) << dtype_name(dt);
    Tensor x = uniform({4, 9, 33}, dt, -2, 2, 30), y = uniform({4, 33, 7}, dt, -2, 2, 31);
    EXPECT_TRUE(testing::equal(matmul(x, y), matmul(f(x), f(y)).to(dt))) << dtype_name(dt);
    Tensor c32 = empty({70, 45});  // a^T-shaped operand into float32 accumulators, no rounding
    cpu::matmul_into(a.t(), a.narrow(1, 0, 45), Tensor(), c32, "matmul");
    EXPECT_TRUE(testing::equal(c32, mm(f(a).t(), f(a).narrow(1, 0, 45)))) << dtype_name(dt);
  }
}

TEST(Linalg, BothGemm16PathsMatchTheReference) {
  for (DType dt : {kBFloat16, kFloat16}) {
    for (Gemm16 m : {Gemm16::kNative, Gemm16::kFloat32}) {
      Gemm16Mode mode(m);
      const int64_t k = 300;
      Tensor a = uniform({40, k}, dt, -1, 1, 41), b = uniform({k, 50}, dt, -1, 1, 42);
      EXPECT_TRUE(matches_ref(mm(a, b), testing::ref::matmul(a, b), dt, k, 1, 1))
          << dtype_name(dt) << " " << gemm16_name(m) << " (runs " << gemm16_name(cpu_gemm16_path(dt)) << ")";
    }
  }
}

TEST(Linalg, AutoKeepsMatrixVectorProductsOnTheNativeKernel) {
  // kAuto on the float32 path widens only products with enough multiply-adds per converted
  // element: 8 rows times a weight stay native (bit-identical to kNative; fewer rows take
  // the matrix-vector kernel on every path), a 256-row product widens (bit-identical to
  // kFloat32).
  Gemm16Mode automatic(Gemm16::kAuto);
  if (!cpu::native_matmul(kBFloat16) || cpu_gemm16_path(kBFloat16) != Gemm16::kFloat32)
    GTEST_SKIP() << "kAuto runs bfloat16 natively on this CPU: nothing to choose per shape";
  auto with = [](Gemm16 m, const Tensor& a, const Tensor& b) {
    Gemm16Mode mode(m);
    return mm(a, b);
  };
  const Tensor w = uniform({512, 256}, kBFloat16, -1, 1, 51);
  static_assert(cpu::kGemvMaxRows < 8);
  const Tensor row = uniform({8, 512}, kBFloat16, -1, 1, 52), rows = uniform({256, 512}, kBFloat16, -1, 1, 53);
  EXPECT_TRUE(testing::equal(mm(row, w), with(Gemm16::kNative, row, w)));
  EXPECT_TRUE(testing::equal(mm(rows, w), with(Gemm16::kFloat32, rows, w)));
  EXPECT_FALSE(testing::equal(with(Gemm16::kNative, rows, w), with(Gemm16::kFloat32, rows, w)))
      << "the two kernels round alike here: this test shows nothing";
}

TEST(Linalg, Gemm16Setting) {
  const Gemm16 saved = get_cpu_gemm16();
  for (Gemm16 m : {Gemm16::kAuto, Gemm16::kNative, Gemm16::kFloat32}) {
    set_cpu_gemm16(m);
    EXPECT_EQ(get_cpu_gemm16(), m);
    for (DType dt : {kBFloat16, kFloat16}) {
      const Gemm16 path = cpu_gemm16_path(dt);
      EXPECT_NE(path, Gemm16::kAuto);
      if (!cpu::native_matmul(dt)) EXPECT_EQ(path, Gemm16::kFloat32) << dtype_name(dt);  // nothing else can run
      if (m != Gemm16::kAuto && cpu::native_matmul(dt)) EXPECT_EQ(path, m);
    }
  }
  set_cpu_gemm16(saved);
  EXPECT_EQ(gemm16_name(Gemm16::kAuto), "auto");
  EXPECT_EQ(gemm16_name(Gemm16::kNative), "native");
  EXPECT_EQ(gemm16_name(Gemm16::kFloat32), "float32");
  TC_EXPECT_ERROR(set_cpu_gemm16(static_cast<Gemm16>(7)), "[set_cpu_gemm16] unknown mode 7");
  TC_EXPECT_ERROR(cpu_gemm16_path(kFloat32), "expected bfloat16 or float16, got float32");
  Gemm16Mode automatic(Gemm16::kAuto);
  std::cout << "[ note ] auto picks " << gemm16_name(cpu_gemm16_path(kBFloat16)) << " for bfloat16, "
            << gemm16_name(cpu_gemm16_path(kFloat16)) << " for float16 on this CPU\n";
}

TEST(Linalg, NativeSupportIsReported) {
  EXPECT_TRUE(cpu::native_matmul(kFloat32));
  EXPECT_FALSE(cpu::native_matmul(kFloat64));
  if (cpu_features().avx512_bf16) EXPECT_TRUE(cpu::native_matmul(kBFloat16));
  if (!cpu_features().avx512f) EXPECT_FALSE(cpu::native_matmul(kBFloat16));  // oneDNN 2.6: bf16 needs AVX-512
  if (!cpu_features().avx512_fp16) EXPECT_FALSE(cpu::native_matmul(kFloat16));
}

TEST(Linalg, Bf16IsOneRoundingOfFloat32Accumulation) {
  // Large K: a bf16 accumulator would be off by far more than one output rounding.
  const int64_t k = 4096;
  Tensor a = uniform({8, k}, kBFloat16, 0, 1, 30), b = uniform({k, 8}, kBFloat16, 0, 1, 31);
  Ref r = testing::ref::matmul(a, b);
  for (Gemm16 m : {Gemm16::kNative, Gemm16::kFloat32}) {
    Gemm16Mode mode(m);
    EXPECT_TRUE(all_close(mm(a, b), r.values, {2.0 * k * 0x1p-23, 0x1p-8})) << gemm16_name(m);
  }
}

TEST(Linalg, LargeProductOfATransposedSixteenBitMatrix) {
  // A weight gradient's shape, g^T x with 2^19 outputs: on AMX the product reads a row-major
  // copy of g^T (onednn/matmul.cpp), elsewhere the view; both the float64 product's values,
  // in the 16-bit dtype and in float32 (an autocast weight's gradient).
  for (DType dt : {kBFloat16, kFloat16}) {
    if (!cpu::native_matmul(dt)) continue;
    Gemm16Mode native(Gemm16::kNative);
    const int64_t k = 48;
    const Tensor g = uniform({k, 1024}, dt, -1, 1, 40), x = uniform({k, 512}, dt, -1, 1, 41);
    const Ref r = testing::ref::matmul(g.t(), x);
    EXPECT_TRUE(matches_ref(mm(g.t(), x), r, dt, k, 1, 1)) << dtype_name(dt);
    const Tensor c32 = empty({1024, 512}, kFloat32);
    cpu::matmul_into(g.t(), x, Tensor(), c32, "matmul");
    EXPECT_TRUE(matches_ref(c32, r, kFloat32, k, 1, 1)) << dtype_name(dt);
  }
}

// ---- weight gradients on AMX (backend/cpu/x86/weight_grad.cpp) --------------------------------

// g^T x with float32 c, as linear's backward asks for an autocast weight's gradient.
Tensor weight_grad(const Tensor& g, const Tensor& x) {
  const Tensor c = empty({g.size(1), x.size(1)}, kFloat32);
  cpu::matmul_into(g.t(), x, Tensor(), c, "matmul");
  return c;
}

TEST(WeightGrad, MatchesTheFloat64Product) {
  if (!cpu_features().amx_bf16) GTEST_SKIP() << "no AMX-BF16";
  // Sums of whole and partial 32-term chunks; c split by rows (m >= n) and by columns, in
  // odd and even numbers of 32 x 32 blocks; g and x with rows longer than their columns; a
  // c of more than 2^18 outputs, in parts of 256 rows (the last of 32) by 512 columns (the
  // last of 32).
  struct Case {
    int64_t k, m, n, g_row, x_row;
  };
  for (const Case& cs : {Case{512, 32, 32, 32, 32}, Case{1000, 96, 64, 96, 64}, Case{2049, 64, 160, 100, 200},
                         Case{520, 256, 32, 300, 40}, Case{2048, 768, 256, 768, 256}, Case{520, 800, 544, 820, 560}}) {
    const std::string what = "k " + std::to_string(cs.k) + " m " + std::to_string(cs.m) + " n " + std::to_string(cs.n);
    // Rows past k hold values too: a kernel that read them would be off by far more than
    // float32 accumulation.
    const Tensor gw = uniform({cs.k + 64, cs.g_row}, kBFloat16, -1, 1, 81);
    const Tensor xw = uniform({cs.k + 64, cs.x_row}, kBFloat16, -1, 1, 82);
    const Tensor g = gw.narrow(0, 0, cs.k).narrow(1, 0, cs.m), x = xw.narrow(0, 0, cs.k).narrow(1, 0, cs.n);
    const Tensor c = empty({cs.m, cs.n}, kFloat32);
    ASSERT_TRUE(cpu::weight_grad_into(g.t(), x, c)) << what;
    EXPECT_TRUE(matches_ref(c, testing::ref::matmul(g.t(), x), kFloat32, cs.k, 1, 1)) << what;
    // With g's column sums (a bias's gradient) from the same pass: the same c, bit for bit.
    const Tensor c2 = empty({cs.m, cs.n}, kFloat32), sums = empty({cs.m}, kFloat32);
    ASSERT_TRUE(cpu::weight_grad_into(g.t(), x, c2, sums)) << what;
    EXPECT_TRUE(testing::equal(c2, c)) << what;
    EXPECT_TRUE(matches_ref(sums.view({cs.m, 1}), testing::ref::matmul(g.t(), ones({cs.k, 1}, kBFloat16)), kFloat32,
                            cs.k, 1, 1))
        << what;
  }
}

TEST(WeightGrad, ResultsDoNotDependOnTheThreadCount) {
  if (!cpu_features().amx_bf16) GTEST_SKIP() << "no AMX-BF16";
  const int saved = get_num_threads();
  // split by rows, by columns, in parts
  for (auto [m, n] : {std::pair<int64_t, int64_t>{192, 64}, {64, 192}, {800, 544}}) {
    const Tensor g = uniform({1500, m}, kBFloat16, -1, 1, 83), x = uniform({1500, n}, kBFloat16, -1, 1, 84);
    auto sums = [&] {
      const Tensor c = empty({m, n}, kFloat32), s = empty({m}, kFloat32);
      EXPECT_TRUE(cpu::weight_grad_into(g.t(), x, c, s));
      return s;
    };
    set_num_threads(1);
    const Tensor one = weight_grad(g, x), one_sums = sums();
    for (int t : {2, 3}) {
      set_num_threads(t);
      EXPECT_TRUE(testing::equal(weight_grad(g, x), one)) << m << " x " << n << ", " << t << " threads";
      EXPECT_TRUE(testing::equal(sums(), one_sums)) << m << " x " << n << ", " << t << " threads";
    }
  }
  set_num_threads(saved);
}

TEST(WeightGrad, OtherProductsAreLeftToOneDnn) {
  const Tensor g = uniform({1024, 64}, kBFloat16), x = uniform({1024, 64}, kBFloat16);
  const Tensor c = empty({64, 64}, kFloat32);
  if (!cpu_features().amx_bf16) {
    EXPECT_FALSE(cpu::weight_grad_into(g.t(), x, c));
    return;
  }
  EXPECT_TRUE(cpu::weight_grad_into(g.t(), x, c));
  EXPECT_FALSE(cpu::weight_grad_into(g.narrow(0, 0, 511).t(), x.narrow(0, 0, 511), c));       // a short sum
  EXPECT_FALSE(cpu::weight_grad_into(g.narrow(1, 0, 48).t(), x, empty({48, 64}, kFloat32)));  // 48 rows
  EXPECT_FALSE(cpu::weight_grad_into(g.t(), x, empty({64, 64}, kBFloat16)));                  // a 16-bit c
  EXPECT_FALSE(cpu::weight_grad_into(g.t().contiguous(), x, c));                              // g^T row-major
  EXPECT_FALSE(cpu::weight_grad_into(g.t(), uniform({1024, 64}, kFloat16), c));
  EXPECT_FALSE(cpu::weight_grad_into(g.t(), x, c, empty({32}, kFloat32)));  // sums of the wrong size
  EXPECT_TRUE(cpu::weight_grad_into(uniform({1024, 1024}, kBFloat16).t(), uniform({1024, 512}, kBFloat16),
                                    empty({1024, 512}, kFloat32)));  // 2^19 outputs: in parts
  cpu::set_weight_grad_amx(false);
  EXPECT_FALSE(cpu::weight_grad_into(g.t(), x, c));
  cpu::set_weight_grad_amx(true);
}

TEST(WeightGrad, LinearBackwardUnderAutocastMatchesTheFloat64Product) {
  // 1024 tokens into Linear(64, 96): the float32 weight's gradient g^T x comes from the
  // bfloat16 product of the gradient and the input, and the bias's from g's column sums, on
  // AMX in one pass where it has the tiles.
  const Tensor x = uniform({4, 256, 64}, kFloat32, -1, 1, 85);
  const Tensor w = uniform({96, 64}, kFloat32, -1, 1, 86).requires_grad_(), b = zeros({96}).requires_grad_();
  const Tensor g = uniform({4, 256, 96}, kBFloat16, -1, 1, 87);
  {
    amp::AutocastGuard autocast(kCPU, kBFloat16);
    linear(x, w, b).backward(g);
  }
  const Tensor g2 = g.reshape({1024, 96}), x2 = x.to(kBFloat16).reshape({1024, 64});
  EXPECT_TRUE(matches_ref(w.grad(), testing::ref::matmul(g2.t(), x2), kFloat32, 1024, 1, 1));
  EXPECT_TRUE(matches_ref(b.grad().view({96, 1}), testing::ref::matmul(g2.t(), ones({1024, 1}, kBFloat16)), kFloat32,
                          1024, 1, 1));
}

// ---- products by a weight on AMX (backend/cpu/x86/matmul_amx.cpp) -----------------------------

// c = a @ b (+ bias) (* mul) through matmul_into as linear's forward (b = w^T: transposed)
// and its input's gradient (b = w) ask for it, against float64: the float32 sum plus the
// bias, times the multiplier, rounded once to c's dtype.
struct AmxCase {
  int64_t m, k, n;
  bool transposed, bias, mul;
  DType out;
};

::testing::AssertionResult amx_product_matches(const AmxCase& cs, uint64_t seed) {
  // a and w inside wider tensors, c and mul too: rows longer than their columns, and values
  // past the columns that a kernel reading them would add.
  const Tensor a = uniform({cs.m, cs.k + 32}, kBFloat16, -1, 1, seed).narrow(1, 0, cs.k);
  const Tensor w = cs.transposed ? uniform({cs.n, cs.k + 64}, kBFloat16, -1, 1, seed + 1).narrow(1, 0, cs.k)
                                 : uniform({cs.k, cs.n + 64}, kBFloat16, -1, 1, seed + 1).narrow(1, 0, cs.n);
  const Tensor b = cs.transposed ? w.t() : w;
  const Tensor bias = cs.bias ? uniform({cs.n}, kBFloat16, -1, 1, seed + 2) : Tensor();
  const Tensor mul = cs.mul ? uniform({cs.m, cs.n + 32}, cs.out, -1, 1, seed + 3).narrow(1, 0, cs.n) : Tensor();
  const Tensor c_wide = full({cs.m, cs.n + 32}, 7.0, cs.out), c = c_wide.narrow(1, 0, cs.n);
  if (!cpu::matmul_amx_into(a, b, bias, c, mul)) return ::testing::AssertionFailure() << "not taken";
  Ref r = testing::ref::matmul(a, b);
  const std::vector<double> bv = cs.bias ? bias.to_vector() : std::vector<double>();
  const std::vector<double> mv = cs.mul ? mul.contiguous().to_vector() : std::vector<double>();
  for (int64_t i = 0; i < cs.m; ++i)
    for (int64_t j = 0; j < cs.n; ++j) {
      double& v = r.values[static_cast<size_t>(i * cs.n + j)];
      if (cs.bias) v += bv[static_cast<size_t>(j)];
      if (cs.mul) v *= mv[static_cast<size_t>(i * cs.n + j)];
    }
  // The columns past n keep their 7s.
  if (!testing::equal(c_wide.narrow(1, cs.n, 32), full({cs.m, 32}, 7.0, cs.out)))
    return ::testing::AssertionFailure() << "wrote past n";
  return matches_ref(c, r, cs.out, cs.k, 1, cs.bias ? 2 : 1);
}

// x w^T for an fp32 weight under autocast: both operands rounded to bfloat16.
Ref expected_linear(const Tensor& x, const Tensor& w) {
  return testing::ref::matmul(x.to(kBFloat16), w.detach().to(kBFloat16).t());
}

TEST(MatmulAmx, MatchesTheFloat64Product) {
  if (!cpu_features().amx_bf16) GTEST_SKIP() << "no AMX-BF16";
  // One block and many; sums of 1, 2, 3 and 128 chunks (the epilogue spread over them in
  // whole and partial shares); 4096-term sums whose b tiles take two passes over c's rows
  // (128 columns and 32).
  for (const AmxCase& cs :
       {AmxCase{2048, 32, 32, true, true, false, kBFloat16}, AmxCase{2048, 96, 160, true, true, false, kBFloat16},
        AmxCase{2048, 64, 96, false, false, false, kFloat32}, AmxCase{1024, 4096, 160, true, false, false, kBFloat16},
        AmxCase{2048, 256, 64, false, false, true, kBFloat16}, AmxCase{1024, 1024, 64, false, true, true, kFloat32},
        AmxCase{2048, 256, 256, true, true, false, kBFloat16}}) {
    EXPECT_TRUE(amx_product_matches(cs, 91))
        << cs.m << " x " << cs.k << " x " << cs.n << (cs.transposed ? " w^T" : " w") << (cs.bias ? " bias" : "")
        << (cs.mul ? " mul" : "") << " into " << dtype_name(cs.out);
  }
}

TEST(MatmulAmx, ResultsDoNotDependOnTheThreadCount) {
  if (!cpu_features().amx_bf16) GTEST_SKIP() << "no AMX-BF16";
  const int saved = get_num_threads();
  const Tensor a = uniform({2048, 96}, kBFloat16, -1, 1, 92), w = uniform({64, 96}, kBFloat16, -1, 1, 93);
  const Tensor bias = uniform({64}, kBFloat16, -1, 1, 94);
  auto product = [&] {
    const Tensor c = empty({2048, 64}, kBFloat16);
    EXPECT_TRUE(cpu::matmul_amx_into(a, w.t(), bias, c, Tensor()));
    return c;
  };
  set_num_threads(1);
  const Tensor one = product();
  for (int t : {2, 3}) {
    set_num_threads(t);
    EXPECT_TRUE(testing::equal(product(), one)) << t << " threads";
  }
  set_num_threads(saved);
}

TEST(MatmulAmx, AnActivationInTheEpilogueIsTheSeparatePassBitForBit) {
  // GELU (both forms) looked up as the kernel writes c: the bits of the product then
  // activation_value over it. c's values about -7 to 7, NaN in row 0 and infinities in rows
  // 1 and 2 (from x's first column); 2048 rows (the kernel packs b) and 512 rows (kept tiles, on
  // the third product).
  std::vector<double> xv = uniform({2048, 64}, kBFloat16, -1.5, 1.5, 321).to_vector();
  xv[0] = std::nan("");
  xv[64] = INFINITY;
  xv[128] = -INFINITY;
  const Tensor x = tensor(xv, {2048, 64}, kBFloat16);
  const Tensor w0 = uniform({96, 64}, kBFloat16, -0.5, 0.5, 322), b = uniform({96}, kBFloat16, -1, 1, 323);
  for (int64_t rows : {2048, 512})
    for (cpu::Activation act : {cpu::Activation::kGelu, cpu::Activation::kGeluTanh}) {
      const Tensor w = w0.clone();  // new memory: no tiles kept from before
      for (int pass = 0; pass < 3; ++pass) {
        SCOPED_TRACE(std::to_string(rows) + " rows, " + (act == cpu::Activation::kGelu ? "erf" : "tanh") +
                     ", product " + std::to_string(pass));
        const Tensor xr = x.narrow(0, 0, rows);
        const Tensor want = empty({rows, 96}, kBFloat16), got = empty({rows, 96}, kBFloat16);
        cpu::set_matmul_amx(false);
        EXPECT_FALSE(cpu::matmul_into(xr, w.t(), b, want, "test", cpu::Activation::kNone, Tensor(), act));
        cpu::activation_value(want, want, act);
        cpu::set_matmul_amx(true);
        const bool applied = cpu::matmul_into(xr, w.t(), b, got, "test", cpu::Activation::kNone, Tensor(), act);
        if (!applied) cpu::activation_value(got, got, act);
        // Taken by the kernel where the CPU has AMX: 2048 rows always, 512 once w's tiles are
        // kept (packed on its second sight).
        EXPECT_EQ(applied, cpu_features().amx_bf16 && (rows == 2048 || pass >= 1));
        // oneDNN's product and the kernel's may round differently: compare the activation of
        // the kernel's own product instead where it applied the table.
        if (applied) {
          const Tensor plain = empty({rows, 96}, kBFloat16);
          EXPECT_TRUE(cpu::matmul_into(xr, w.t(), b, plain, "test"));
          cpu::activation_value(plain, plain, act);
          EXPECT_TRUE(testing::bits_equal(got, plain));
        } else {
          EXPECT_TRUE(testing::bits_equal(got, want));
        }
        EXPECT_TRUE(std::isnan(got.to_vector()[0]));
      }
    }
  // Not with float32 c (nothing to look up in), nor with another epilogue.
  EXPECT_FALSE(cpu::matmul_into(x, w0.t(), b, empty({2048, 96}, kFloat32), "test", cpu::Activation::kNone, Tensor(),
                                cpu::Activation::kGelu));
}

TEST(MatmulAmx, OtherProductsAreLeftToOneDnn) {
  const Tensor a = uniform({2048, 64}, kBFloat16), w = uniform({32, 64}, kBFloat16);
  const Tensor c = empty({2048, 32}, kBFloat16);
  if (!cpu_features().amx_bf16) {
    EXPECT_FALSE(cpu::matmul_amx_into(a, w.t(), Tensor(), c, Tensor()));
    return;
  }
  // Each weight written before every product (as by an optimizer step): none has kept tiles.
  auto product = [](const Tensor& a, const Tensor& b, const Tensor& bias, const Tensor& c, const Tensor& mul) {
    increment_version(b);
    return cpu::matmul_amx_into(a, b, bias, c, mul);
  };
  EXPECT_TRUE(product(a, w.t(), Tensor(), c, Tensor()));
  // 1024 rows: only with a long sum
  EXPECT_FALSE(product(a.narrow(0, 0, 1024), w.t(), Tensor(), c.narrow(0, 0, 1024), Tensor()));
  const Tensor a_long = uniform({1024, 1024}, kBFloat16), w_long = uniform({32, 1024}, kBFloat16);
  EXPECT_TRUE(product(a_long, w_long.t(), Tensor(), empty({1024, 32}, kBFloat16), Tensor()));
  EXPECT_FALSE(
      product(a_long.narrow(0, 0, 992), w_long.t(), Tensor(), empty({992, 32}, kBFloat16), Tensor()));  // 992 rows
  EXPECT_FALSE(product(uniform({2064, 64}, kBFloat16), w.t(), Tensor(), empty({2064, 32}, kBFloat16),
                       Tensor()));  // rows not a multiple of 32
  EXPECT_FALSE(product(a.narrow(1, 0, 48), w.narrow(1, 0, 48).t(), Tensor(), c, Tensor()));  // k 48
  EXPECT_FALSE(product(a, w.narrow(0, 0, 16).t(), Tensor(), empty({2048, 16}, kBFloat16), Tensor()));
  EXPECT_FALSE(product(a.t().contiguous().t(), w.t(), Tensor(), c, Tensor()));  // a read transposed
  EXPECT_FALSE(product(a.to(kFloat16), w.t().to(kFloat16), Tensor(), empty({2048, 32}, kFloat16), Tensor()));
  EXPECT_FALSE(product(a, w.t(), Tensor(), empty({2048, 32}, kFloat16), Tensor()));  // a float16 c
  EXPECT_FALSE(product(a, w.t(), zeros({32}), c, Tensor()));                         // a float32 bias
  EXPECT_FALSE(product(a, w.t(), Tensor(), c, empty({2048, 32}, kFloat32)));         // mul's dtype
  cpu::set_matmul_amx(false);
  EXPECT_FALSE(product(a, w.t(), Tensor(), c, Tensor()));
  cpu::set_matmul_amx(true);
}

// A weight seen twice unchanged keeps its packed tiles, which let the kernel take fewer
// rows: 512 and more, or 128 with a long sum. Written in place, it is packed again; freed,
// its tiles never serve another tensor at its address.
TEST(MatmulAmx, KeptTilesFollowTheWeight) {
  if (!cpu_features().amx_bf16) GTEST_SKIP() << "no AMX-BF16";
  auto expected = [](const Tensor& a, const Tensor& b) { return testing::ref::matmul(a, b); };
  for (const bool transposed : {true, false}) {
    SCOPED_TRACE(transposed ? "w^T" : "w");
    for (const auto& [m, k] : {std::pair<int64_t, int64_t>{128, 1024}, {512, 64}}) {
      SCOPED_TRACE(std::to_string(m) + " rows, " + std::to_string(k) + " terms");
      const Tensor a = uniform({m, k}, kBFloat16, -1, 1, 120);
      Tensor w = transposed ? uniform({96, k}, kBFloat16, -1, 1, 121) : uniform({k, 96}, kBFloat16, -1, 1, 121);
      const Tensor b = transposed ? w.t() : w;
      const Tensor c = empty({m, 96}, kBFloat16);
      EXPECT_FALSE(cpu::matmul_amx_into(a, b, Tensor(), c, Tensor()));  // seen once: too few rows to pack for
      for (int i = 0; i < 2; ++i) {
        ASSERT_TRUE(cpu::matmul_amx_into(a, b, Tensor(), c, Tensor())) << "use " << i + 2;
        EXPECT_TRUE(matches_ref(c, expected(a, b), kBFloat16, k, 1, 1)) << "use " << i + 2;
      }
      w.mul_(-0.5);  // a write through the library: a new version
      EXPECT_FALSE(cpu::matmul_amx_into(a, b, Tensor(), c, Tensor()));
      ASSERT_TRUE(cpu::matmul_amx_into(a, b, Tensor(), c, Tensor()));
      EXPECT_TRUE(matches_ref(c, expected(a, b), kBFloat16, k, 1, 1)) << "after the write";
    }
  }
  // Weights made and freed in turn (their memory handed back and reused): each product is
  // of its own weight, never of a dead one's tiles.
  const Tensor a = uniform({512, 64}, kBFloat16, -1, 1, 122);
  for (uint64_t seed = 0; seed < 4; ++seed) {
    const Tensor w = uniform({64, 64}, kBFloat16, -1, 1, 130 + seed);
    const Tensor c = empty({512, 64}, kBFloat16);
    for (int i = 0; i < 3; ++i) cpu::matmul_amx_into(a, w.t(), Tensor(), c, Tensor());
    EXPECT_TRUE(matches_ref(c, expected(a, w.t()), kBFloat16, 64, 1, 1)) << "weight " << seed;
  }
}

// An optimizer step writes the autocast cache's copy of each weight through raw pointers;
// the forward after it must not multiply by the tiles kept from the copy's old values.
TEST(MatmulAmx, AnOptimizerStepMakesKeptTilesStale) {
  if (!cpu_features().amx_bf16) GTEST_SKIP() << "no AMX-BF16";
  const bool across = amp::is_autocast_cache_across_regions(), training = amp::autocast_cache_keeps_training_copies();
  amp::set_autocast_cache_across_regions(true);
  amp::set_autocast_cache_keeps_training_copies(true);
  const Tensor w = uniform({64, 1024}, kFloat32, -1, 1, 140).requires_grad_();
  const Tensor x = uniform({128, 1024}, kFloat32, -1, 1, 141);
  optim::SGD opt({w}, optim::SGDOptions(0.5));
  auto forward = [&] {
    NoGradGuard no_grad;
    amp::AutocastGuard autocast(kCPU, kBFloat16);
    return linear(x, w, Tensor());
  };
  for (int step = 0; step < 3; ++step) {
    for (int i = 0; i < 3; ++i) {  // the second and third on kept tiles
      const Tensor y = forward();
      EXPECT_TRUE(matches_ref(y, expected_linear(x, w), kBFloat16, 1024, 1, 1)) << "step " << step << ", pass " << i;
    }
    {
      amp::AutocastGuard autocast(kCPU, kBFloat16);
      linear(x, w, Tensor()).to(kFloat32).pow(2.0).mean().backward();
    }
    opt.step();
    opt.zero_grad();
  }
  amp::set_autocast_cache_across_regions(across);
  amp::set_autocast_cache_keeps_training_copies(training);
  amp::clear_autocast_cache();
}

TEST(MatmulAmx, LinearUnderAutocastMatchesTheFloat64Product) {
  // 2048 tokens through Linear(96, 64) in bfloat16: the forward x w^T + b and the input's
  // gradient g w, on AMX where it has the tiles, against float64.
  const Tensor x = uniform({8, 256, 96}, kFloat32, -1, 1, 95).requires_grad_();
  const Tensor w = uniform({64, 96}, kFloat32, -1, 1, 96).requires_grad_(), b = uniform({64}, kFloat32, -1, 1, 97);
  const Tensor g = uniform({8, 256, 64}, kBFloat16, -1, 1, 98);
  Tensor y;
  {
    amp::AutocastGuard autocast(kCPU, kBFloat16);
    y = linear(x, w, b);
    y.backward(g);
  }
  const Tensor x2 = x.detach().to(kBFloat16).reshape({2048, 96}), w16 = w.detach().to(kBFloat16);
  Ref r = testing::ref::matmul(x2, w16.t());
  const std::vector<double> bv = b.to(kBFloat16).to_vector();
  for (size_t i = 0; i < r.values.size(); ++i) r.values[i] += bv[i % 64];
  EXPECT_TRUE(matches_ref(y.reshape({2048, 64}), r, kBFloat16, 96, 1, 2));
  const Ref rg = testing::ref::matmul(g.reshape({2048, 64}), w16);
  EXPECT_TRUE(matches_ref(x.grad().reshape({2048, 96}), rg, x.grad().dtype(), 64, 1, 1));
}

// ---- few-row products (the matrix-vector kernel) -------------------------------------------

// Inner sizes around its blocks: below one vector, a partial vector, whole 1024-element
// blocks with a partial one after them.
const std::vector<int64_t> kGemvInner = {1, 15, 16, 100, 2100};

TEST(Gemv, MatchesTheReferenceInEveryLayoutAndDtype) {
  for (DType dt : {kFloat32, kBFloat16, kFloat16}) {
    for (int64_t rows = 1; rows <= cpu::kGemvMaxRows; ++rows) {
      for (int64_t k : kGemvInner) {
        for (int64_t m : {1, 7, 67, 300}) {  // 300: whole column blocks of the row-major layout and a part
          const std::string what = std::string(dtype_name(dt)) + " rows " + std::to_string(rows) + " k " +
                                   std::to_string(k) + " m " + std::to_string(m);
          const uint64_t seed = static_cast<uint64_t>(rows * 1000 + k + m);
          const Tensor a = uniform({rows, k}, dt, -1, 1, seed), w = uniform({m, k}, dt, -1, 1, seed + 1);
          const Tensor bias = uniform({2 * m}, dt, -1, 1, seed + 2).slice(0, 0, 2 * m, 2);  // strided
          const std::vector<double> bv = bias.to_vector();
          // b read along k (a transposed weight, as linear) and along m (a row-major matrix)
          for (const Tensor& b : {w.t(), w.t().contiguous()}) {
            Ref r = testing::ref::matmul(a, b);
            for (size_t i = 0; i < r.values.size(); ++i) r.values[i] += bv[i % static_cast<size_t>(m)];
            const Tensor c = empty({rows, m}, dt);
            ASSERT_TRUE(cpu::gemv_into(a, b, bias, c)) << what;
            EXPECT_TRUE(matches_ref(c, r, dt, k, 1, 1)) << what << (b.is_contiguous() ? " row-major" : " transposed");
            // a strided row (a column of a transposed matrix) and a transposed output
            const Tensor ct = empty({m, rows}, dt).t();
            ASSERT_TRUE(cpu::gemv_into(a.t().contiguous().t(), b, bias, ct)) << what;
            EXPECT_TRUE(testing::equal(ct, c)) << what;
          }
        }
      }
    }
  }
}

TEST(Gemv, SixteenBitIsTheFloat32ProductOfTheWidenedOperandsRoundedOnce) {
  // Every path of the kernel (a weight widened in registers for one row, through a buffer
  // for several rows or a partial block) sums in the same order as for float32 weights.
  for (DType dt : {kBFloat16, kFloat16}) {
    auto f = [](const Tensor& t) { return t.to(kFloat32); };
    for (int64_t rows = 1; rows <= cpu::kGemvMaxRows; ++rows) {
      for (int64_t k : kGemvInner) {
        const Tensor a = uniform({rows, k}, dt, -2, 2, 61), w = uniform({131, k}, dt, -2, 2, 62);
        const Tensor bias = uniform({131}, dt, -1, 1, 63);
        EXPECT_TRUE(testing::equal(linear(a, w, bias), linear(f(a), f(w), f(bias)).to(dt))) << dtype_name(dt) << k;
        EXPECT_TRUE(testing::equal(mm(a, w.t().contiguous()), mm(f(a), f(w).t().contiguous()).to(dt)))
            << dtype_name(dt) << " row-major, k " << k;
        const Tensor c32 = empty({rows, 131});  // float32 accumulators, not rounded
        cpu::matmul_into(a, w.t(), Tensor(), c32, "matmul");
        EXPECT_TRUE(testing::equal(c32, mm(f(a), f(w).t()))) << dtype_name(dt) << k;
      }
    }
  }
}

TEST(Gemv, ResultsDoNotDependOnTheThreadCount) {
  const int saved = get_num_threads();
  for (DType dt : {kFloat32, kBFloat16}) {
    const Tensor a = uniform({3, 1000}, dt, -1, 1, 71), w = uniform({4099, 1000}, dt, -1, 1, 72);
    set_num_threads(1);
    const Tensor one = linear(a, w), one_rm = mm(a, w.t().contiguous());
    set_num_threads(std::max(2, saved));
    EXPECT_TRUE(testing::equal(linear(a, w), one)) << dtype_name(dt);
    EXPECT_TRUE(testing::equal(mm(a, w.t().contiguous()), one_rm)) << dtype_name(dt);
  }
  set_num_threads(saved);
}

TEST(Gemv, OtherProductsAreLeftToTheGemm) {
  const Tensor w = uniform({8, 32}, kFloat32);
  const Tensor c = empty({cpu::kGemvMaxRows + 1, 8});
  EXPECT_FALSE(cpu::gemv_into(uniform({cpu::kGemvMaxRows + 1, 32}, kFloat32), w.t(), Tensor(), c));
  const Tensor b = uniform({32, 16}, kFloat32).slice(1, 0, 16, 2);  // no unit stride
  EXPECT_FALSE(cpu::gemv_into(uniform({1, 32}, kFloat32), b, Tensor(), empty({1, 8})));
  const Tensor a64 = uniform({1, 32}, kFloat64);
  EXPECT_FALSE(cpu::gemv_into(a64, a64.t().contiguous().view({32, 1}), Tensor(), empty({1, 1}, kFloat64)));
  const Tensor batched = empty({2, 1, 8});  // two products
  EXPECT_FALSE(cpu::gemv_into(uniform({2, 1, 32}, kFloat32), w.t().unsqueeze(0).expand({2, 32, 8}), Tensor(), batched));
}

// ---- backward -----------------------------------------------------------------------------

// Gradients against float64 reference formulas (grad_a = G b^T, grad_b = a^T G, summed over
// broadcast batch dims), with an explicit output gradient: independent of tc::sum.
std::vector<double> ref_reduce(const Ref& full, const Shape& full_shape, const Shape& target) {
  // sums `full` (shape full_shape) down to target (right-aligned, 1 = broadcast)
  const int64_t nd = static_cast<int64_t>(full_shape.size());
  Shape tp(full_shape.size() - target.size(), 1);
  tp.insert(tp.end(), target.begin(), target.end());
  int64_t tn = 1;
  for (auto s : tp) tn *= s;
  std::vector<double> out(static_cast<size_t>(tn), 0.0);
  for (size_t i = 0; i < full.values.size(); ++i) {
    int64_t rem = static_cast<int64_t>(i), idx = 0, mul = 1;
    for (int64_t d = nd - 1; d >= 0; --d) {
      const int64_t c = rem % full_shape[d];
      rem /= full_shape[d];
      if (tp[d] != 1) idx += c * mul;
      mul *= tp[d];
    }
    out[idx] += full.values[i];
  }
  return out;
}

TEST_P(LinalgTyped, MatmulBackwardMatchesReference) {
  const DType dt = GetParam();
  struct Case {
    Shape a, b;
  };
  for (const Case& c : std::vector<Case>{{{6, 5}, {5, 4}},
                                         {{3, 6, 5}, {5, 4}},  // shared weight: folded grad
                                         {{6, 5}, {3, 5, 4}},  // shared left operand
                                         {{2, 1, 6, 5}, {3, 5, 4}},
                                         {{1, 3, 6, 5}, {2, 1, 5, 4}}}) {
    Tensor a = uniform(c.a, dt, -1, 1, 40).requires_grad_(), b = uniform(c.b, dt, -1, 1, 41).requires_grad_();
    Tensor out = matmul(a, b);
    Tensor g = uniform(out.sizes(), dt, -1, 1, 42);
    out.backward(g);
    const int64_t nd = out.dim();
    // G (..., n, m) @ b^T and a^T @ G, in float64, then summed to the operand's shape.
    Ref ga = testing::ref::matmul(g, b.detach().transpose(-1, -2).contiguous());
    Ref gb = testing::ref::matmul(a.detach().transpose(-1, -2).contiguous(), g);
    // Terms summed into one gradient element: the GEMM's inner size (m for a, n for b)
    // times the batch elements the operand was broadcast over.
    int64_t out_batch = 1;
    for (int64_t d = 0; d < nd - 2; ++d) out_batch *= out.size(d);
    const int64_t terms_a = out_batch / (a.numel() / (a.size(-1) * a.size(-2))) * out.size(-1);
    const int64_t terms_b = out_batch / (b.numel() / (b.size(-1) * b.size(-2))) * out.size(-2);
    // Terms are at most 1 in size. A 16-bit broadcast gradient rounds each batch's partial
    // product before the sum, so allow one 16-bit rounding per term.
    auto tol = [&](int64_t terms) {
      return is_reduced_float(dt) ? Tol{terms * traits(dt).epsilon, traits(dt).epsilon} : product_tol(dt, terms, 1, 1);
    };
    const Tol ta = tol(terms_a), tb = tol(terms_b);
    EXPECT_EQ(a.grad().dtype(), dt);
    EXPECT_TRUE(all_close(a.grad(), ref_reduce(ga, ga.shape, c.a), ta)) << shape_str(c.a) << " @ " << shape_str(c.b);
    EXPECT_TRUE(all_close(b.grad(), ref_reduce(gb, gb.shape, c.b), tb)) << shape_str(c.a) << " @ " << shape_str(c.b);
  }
}

TEST_P(LinalgTyped, LinearBackwardMatchesReference) {
  const DType dt = GetParam();
  Tensor x = uniform({2, 3, 8}, dt, -1, 1, 50).requires_grad_();
  Tensor w = uniform({5, 8}, dt, -1, 1, 51).requires_grad_();
  Tensor bias = uniform({5}, dt, -1, 1, 52).requires_grad_();
  Tensor y = linear(x, w, bias);
  Tensor g = uniform({2, 3, 5}, dt, -1, 1, 53);
  y.backward(g);
  Tensor g2 = g.view({6, 5}), x2 = x.detach().view({6, 8});
  Ref gx = testing::ref::matmul(g2, w.detach());
  Ref gw = testing::ref::matmul(g2.t().contiguous(), x2);
  std::vector<double> gbias(5, 0.0), gv = g.to_vector();
  for (int i = 0; i < 6; ++i)
    for (int j = 0; j < 5; ++j) gbias[j] += gv[i * 5 + j];
  EXPECT_EQ(x.grad().sizes(), x.sizes());
  EXPECT_EQ(w.grad().dtype(), dt);
  EXPECT_EQ(bias.grad().dtype(), dt);
  EXPECT_TRUE(all_close(x.grad(), gx.values, product_tol(dt, 5, 1, 1)));
  EXPECT_TRUE(all_close(w.grad(), gw.values, product_tol(dt, 6, 1, 1)));
  EXPECT_TRUE(all_close(bias.grad(), gbias, product_tol(dt, 6, 1, 1)));
  // without bias, only two inputs get gradients
  Tensor x1 = x.detach().clone().requires_grad_(), w1 = w.detach().clone().requires_grad_();
  linear(x1, w1).backward(g);
  EXPECT_TRUE(all_close(w1.grad(), gw.values, product_tol(dt, 6, 1, 1)));
}

// ---- errors -------------------------------------------------------------------------------

// The whole message must match: these are the exact texts users will search for.
void expect_exact_error(const std::function<void()>& f, const std::string& message) {
  try {
    f();
    ADD_FAILURE() << "expected tc::Error: " << message;
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), message);
  }
}

// ---- linear_activation ------------------------------------------------------------------

constexpr Activation kActivations[] = {Activation::kRelu, Activation::kGelu, Activation::kGeluTanh};

Tensor composed(const Tensor& x, const Tensor& w, const Tensor& b, Activation act) {
  const Tensor h = linear(x, w, b);
  return act == Activation::kRelu ? relu(h) : gelu(h, act == Activation::kGelu ? "none" : "tanh");
}

TEST(LinearActivation, WithoutAGraphItIsOnePass) {
  // Without a graph the activation runs in the GEMM's pass: ReLU (and float32 GELU) in
  // oneDNN's epilogue on the float32 accumulators, a 16-bit GELU looked up in place in the
  // rounded output. The profile shows linear_activation alone, allocating just its output;
  // the 16-bit results are the composition's bits (ReLU commutes with rounding; GELU reads
  // the table the gelu op reads), float32 within oneDNN's erf/tanh of tensorcast's.
  const Tensor x32 = uniform({64, 48}, kFloat32, -2, 2, 301), w32 = uniform({96, 48}, kFloat32, -0.3, 0.3, 302),
               b32 = uniform({96}, kFloat32, -1, 1, 303);
  for (Gemm16 mode : {Gemm16::kNative, Gemm16::kFloat32}) {
    if (mode == Gemm16::kNative && !cpu::native_matmul(kBFloat16)) continue;
    Gemm16Mode m(mode);
    for (const Activation act : kActivations) {
      SCOPED_TRACE(activation_name(act) + std::string(" on the ") + std::string(gemm16_name(mode)) + " kernel");
      const Tensor x = x32.to(kBFloat16), w = w32.to(kBFloat16), b = b32.to(kBFloat16);
      profiler::Profile prof;
      const Tensor y = linear_activation(x, w, b, act);
      prof.stop();
      std::map<std::string, profiler::OpStat> stats;
      for (const profiler::OpStat& st : prof.key_averages()) stats[st.name] = st;
      EXPECT_EQ(stats.count("gelu") + stats.count("relu") + stats.count("linear"), 0u);
      if (mode == Gemm16::kNative) EXPECT_EQ(stats["linear_activation"].self_alloc_bytes, 64 * 96 * 2);
      const Tensor f = composed(x.to(kFloat32), w.to(kFloat32), b.to(kFloat32), act);
      EXPECT_TRUE(all_close(linear_activation(x.to(kFloat32), w.to(kFloat32), b.to(kFloat32), act), f.to_vector(),
                            Tol{1e-6, 1e-6}));
      EXPECT_TRUE(testing::equal(y, composed(x, w, b, act)));
      // And near the float32 activation of the float32 product, rounded once: within the
      // rounding of h (h's half ulp times |act'(h)| <= 1.13) and of the result.
      const Tensor want = f.to(kBFloat16), h = linear(x, w, b).to(kFloat32);
      const std::vector<double> yv = y.to_vector(), wv = want.to_vector(), hv = h.to_vector();
      for (size_t i = 0; i < yv.size(); ++i)
        ASSERT_LE(std::fabs(yv[i] - wv[i]), 0x1p-8 * (std::fabs(wv[i]) + 1.13 * std::fabs(hv[i]))) << i;
    }
  }
}

TEST(LinearActivation, WithAGraphItIsTheComposition) {
  // Recorded, the op is activation(linear(...)): values and every gradient bit-identical.
  for (DType dt : {kFloat32, kBFloat16}) {
    for (const Activation act : kActivations) {
      SCOPED_TRACE(activation_name(act) + std::string(" ") + std::string(dtype_name(dt)));
      auto leaves = [&] {
        return std::vector<Tensor>{uniform({3, 5, 24}, dt, -2, 2, 311).requires_grad_(),
                                   uniform({40, 24}, dt, -0.5, 0.5, 312).requires_grad_(),
                                   uniform({40}, dt, -1, 1, 313).requires_grad_()};
      };
      const std::vector<Tensor> a = leaves(), b = leaves();
      const Tensor g = uniform({3, 5, 40}, dt, -1, 1, 314);
      const Tensor ya = linear_activation(a[0], a[1], a[2], act), yb = composed(b[0], b[1], b[2], act);
      EXPECT_TRUE(testing::equal(ya, yb));
      ya.backward(g);
      yb.backward(g);
      for (int i = 0; i < 3; ++i) EXPECT_TRUE(testing::equal(a[i].grad(), b[i].grad())) << "input " << i;
    }
  }
}

TEST(LinearActivation, Errors) {
  const Tensor x = zeros({2, 4}), w = zeros({3, 4});
  expect_exact_error([&] { linear_activation(x, w, Tensor(), static_cast<Activation>(7)); },
                     "[linear_activation] activation must be Activation::kRelu, kGelu or kGeluTanh, got the value 7");
  expect_exact_error(
      [&] {
        linear_activation(x, zeros({3, 5}), Tensor(), Activation::kRelu);
      },
      "[linear_activation] shapes (2, 4) and (3, 5) cannot be multiplied");
}

// ---- the multiply epilogue and mlp ---------------------------------------------------------

// Calls f(dt, mode) for float32 and each 16-bit dtype on each of its kernels this CPU has
// (native, and the float32 kernel over widened copies), with that kernel selected.
void for_each_gemm_kernel(const std::function<void(DType, Gemm16)>& f) {
  for (DType dt : {kFloat32, kBFloat16, kFloat16})
    for (Gemm16 mode : {Gemm16::kNative, Gemm16::kFloat32}) {
      if (dt == kFloat32 && mode == Gemm16::kFloat32) continue;
      if (mode == Gemm16::kNative && dt != kFloat32 && !cpu::native_matmul(dt)) continue;
      Gemm16Mode m(mode);
      SCOPED_TRACE(std::string(dtype_name(dt)) + " on the " + std::string(gemm16_name(mode)) + " kernel");
      f(dt, mode);
    }
}

TEST(MatmulEpilogue, MultiplyByATensorIsOneGemm) {
  // c = (a @ b + bias) * mul with mul in oneDNN's epilogue, against float64: applied on
  // oneDNN's float32 and native 16-bit kernels, and right whether or not it was applied.
  for_each_gemm_kernel([](DType dt, Gemm16 mode) {
    const Tensor a = uniform({64, 48}, dt, -1, 1, 401), b = uniform({48, 96}, dt, -1, 1, 402),
                 bias = uniform({96}, dt, -1, 1, 403), mul = uniform({64, 96}, dt, -2, 2, 404);
    const Tensor c = zeros({64, 96}, TensorOptions(dt));
    const bool applied = cpu::matmul_into(a, b, bias, c, "test", cpu::Activation::kNone, mul);
    if (dt == kFloat32 || mode == Gemm16::kNative) EXPECT_TRUE(applied);
    const Tensor want = mul.to(kFloat64) * linear(a.to(kFloat64), b.to(kFloat64).t(), bias.to(kFloat64));
    const Tensor got = applied ? c : c * mul;
    const double u = dt == kFloat32 ? 0x1p-23 : dt == kFloat16 ? 0x1p-11 : 0x1p-8;
    EXPECT_TRUE(all_close(got, want.to_vector(), Tol{4 * u * max_abs(want), 2 * u}));
  });
}

Tensor composed_mlp(const std::vector<Tensor>& p, Activation act) {
  return linear(composed(p[0], p[1], p[2], act), p[3], p[4]);
}

TEST(Mlp, RecordedMatchesTheFloat64Composition) {
  // The training path (one node, act' written by the forward and applied in the backward
  // GEMM's epilogue): output and all five gradients against the float64 composition, in
  // float32 and each 16-bit dtype on each of its kernels, at sizes oneDNN's GEMMs run (not
  // the matrix-vector kernel). Dropping the act' factor fails every input's gradient but w2's.
  for_each_gemm_kernel([](DType dt, Gemm16) {
    for (const Activation act : kActivations) {
      SCOPED_TRACE(activation_name(act));
      const std::vector<Tensor> init{uniform({4, 16, 24}, dt, -2, 2, 411), uniform({40, 24}, dt, -0.5, 0.5, 412),
                                     uniform({40}, dt, -1, 1, 413), uniform({16, 40}, dt, -0.5, 0.5, 414),
                                     uniform({16}, dt, -1, 1, 415)};
      std::vector<Tensor> p, q;
      for (const Tensor& t : init) {
        p.push_back(t.detach().requires_grad_());
        q.push_back(t.to(kFloat64).requires_grad_());
      }
      const Tensor g = uniform({4, 16, 16}, dt, -1, 1, 416);
      const Tensor y = mlp(p[0], p[1], p[2], p[3], p[4], act), want = composed_mlp(q, act);
      y.backward(g);
      want.backward(g.to(kFloat64));
      const double rel = dt == kFloat32 ? 1e-5 : 0x1p-6;
      EXPECT_TRUE(all_close(y, want.to_vector(), Tol{rel * max_abs(want), rel}));
      for (size_t i = 0; i < 5; ++i) {
        ASSERT_TRUE(p[i].grad().defined()) << "input " << i;
        EXPECT_EQ(p[i].grad().dtype(), dt);
        EXPECT_TRUE(all_close(p[i].grad(), q[i].grad().to_vector(), Tol{rel * max_abs(q[i].grad()), rel}))
            << "gradient of input " << i;
      }
    }
  });
}

TEST(Mlp, TrainingIsOneNodeWithoutAnActivationPass) {
  // Forward and backward show mlp and its backward only: no linear, gelu or mul records,
  // and the backward allocates exactly the five gradients and its two bias ones-rows (the
  // multiply by gelu' is the GEMM's epilogue, not a tensor of its own).
  if (!cpu::native_matmul(kBFloat16)) GTEST_SKIP() << "no native bfloat16 GEMM on this CPU";
  Gemm16Mode m(Gemm16::kNative);
  const int64_t rows = 64, in = 24, hid = 40, out = 16;
  std::vector<Tensor> p{uniform({rows, in}, kBFloat16, -2, 2, 421), uniform({hid, in}, kBFloat16, -0.5, 0.5, 422),
                        uniform({hid}, kBFloat16, -1, 1, 423), uniform({out, hid}, kBFloat16, -0.5, 0.5, 424),
                        uniform({out}, kBFloat16, -1, 1, 425)};
  for (Tensor& t : p) t.requires_grad_();
  const Tensor g = uniform({rows, out}, kBFloat16, -1, 1, 426);
  profiler::Profile prof;
  mlp(p[0], p[1], p[2], p[3], p[4], Activation::kGelu).backward(g);
  prof.stop();
  std::map<std::string, profiler::OpStat> stats;
  for (const profiler::OpStat& st : prof.key_averages()) stats[st.name] = st;
  for (const char* name : {"linear", "gelu", "gelu backward", "mul", "linear backward"})
    EXPECT_EQ(stats.count(name), 0u) << name;
  ASSERT_EQ(stats.count("mlp backward"), 1u);
  const int64_t grads = rows * in + hid * in + hid + out * hid + out, gh = rows * hid, ones_rows = 2 * rows;
  EXPECT_EQ(stats["mlp backward"].self_alloc_bytes, 2 * (grads + gh + ones_rows));
  // forward: h (overwritten by gelu'(h)), y and the output
  EXPECT_EQ(stats["mlp"].self_alloc_bytes, 2 * (2 * rows * hid + rows * out));
}

TEST(Mlp, WithoutAGraphItIsLinearActivationThenLinear) {
  for (DType dt : {kFloat32, kBFloat16})
    for (const Activation act : kActivations) {
      SCOPED_TRACE(activation_name(act) + std::string(" ") + std::string(dtype_name(dt)));
      const Tensor x = uniform({3, 20, 24}, dt, -2, 2, 431), w1 = uniform({40, 24}, dt, -0.5, 0.5, 432),
                   b1 = uniform({40}, dt, -1, 1, 433), w2 = uniform({16, 40}, dt, -0.5, 0.5, 434);
      EXPECT_TRUE(testing::equal(mlp(x, w1, b1, w2, Tensor(), act), linear(linear_activation(x, w1, b1, act), w2)));
    }
}

TEST(Mlp, Errors) {
  const Tensor x = zeros({2, 4}), w1 = zeros({3, 4}), w2 = zeros({5, 3});
  expect_exact_error([&] { mlp(x, w1, Tensor(), w2, Tensor(), static_cast<Activation>(3)); },
                     "[mlp] activation must be Activation::kRelu, kGelu or kGeluTanh, got the value 3");
  expect_exact_error(
      [&] {
        mlp(x, w1, Tensor(), zeros({5, 4}), Tensor(), Activation::kGelu);
      },
      "[mlp] expected a 2-D proj_weight (out_features, 3) for fc_weight (3, 4), got (5, 4)");
  expect_exact_error([&] { mlp(x, w1, Tensor(), w2.to(kBFloat16), Tensor(), Activation::kGelu); },
                     "[mlp] expected both inputs to have the same dtype, got float32 and bfloat16");
  expect_exact_error([&] { mlp(x, w1, Tensor(), w2, zeros({3}), Activation::kGelu); },
                     "[mlp] expected bias of shape (5,), got (3,)");
}

TEST(Linalg, ErrorMessages) {
  Tensor x = zeros({64, 784}), w = zeros({10, 784});
  expect_exact_error([&] { matmul(x, w); }, "[matmul] shapes (64, 784) and (10, 784) cannot be multiplied");
  expect_exact_error([&] { mm(x, w); }, "[mm] shapes (64, 784) and (10, 784) cannot be multiplied");
  expect_exact_error(
      [&] {
        bmm(zeros({2, 3, 4}), zeros({3, 4, 5}));
      },
      "[bmm] shapes (2, 3, 4) and (3, 4, 5) cannot be multiplied");
  expect_exact_error(
      [&] {
        bmm(zeros({2, 3, 4}), zeros({2, 5, 5}));
      },
      "[bmm] shapes (2, 3, 4) and (2, 5, 5) cannot be multiplied");
  expect_exact_error(
      [&] {
        matmul(zeros({2, 3, 4}), zeros({5, 4, 6}));
      },
      "[matmul] shapes (2, 3, 4) and (5, 4, 6) cannot be multiplied");
  expect_exact_error([&] { matmul(zeros({3}), zeros({4})); }, "[matmul] shapes (3,) and (4,) cannot be multiplied");
  expect_exact_error(
      [&] {
        linear(zeros({64, 784}), zeros({10, 785}));
      },
      "[linear] shapes (64, 784) and (10, 785) cannot be multiplied");
  expect_exact_error(
      [&] {
        matmul(x, zeros({784, 10}, kBFloat16));
      },
      "[matmul] expected both inputs to have the same dtype, got float32 and bfloat16");
  expect_exact_error(
      [&] {
        mm(zeros({2, 2}, kFloat16), zeros({2, 2}, kBFloat16));
      },
      "[mm] expected both inputs to have the same dtype, got float16 and bfloat16");
  expect_exact_error(
      [&] {
        linear(zeros({2, 2}, kBFloat16), zeros({2, 2}));
      },
      "[linear] expected both inputs to have the same dtype, got bfloat16 and float32");
  expect_exact_error(
      [&] {
        linear(zeros({2, 2}), zeros({3, 2}), zeros({3}, kBFloat16));
      },
      "[linear] expected bias to have dtype float32, got bfloat16");
  expect_exact_error(
      [&] {
        linear(zeros({2, 2}), zeros({3, 2}), zeros({2}));
      },
      "[linear] expected bias of shape (3,), got (2,)");
  expect_exact_error([&] { matmul(scalar_tensor(1.0), zeros({2})); },
                     "[matmul] both arguments to matmul need to be at least 1D, but they are 0D and 1D");
  expect_exact_error([&] { mm(zeros({2}), zeros({2, 2})); }, "[mm] expected 2-D tensors, got (2,) and (2, 2)");
  expect_exact_error(
      [&] {
        bmm(zeros({2, 2}), zeros({2, 2, 2}));
      },
      "[bmm] expected 3-D tensors, got (2, 2) and (2, 2, 2)");
  expect_exact_error(
      [&] {
        linear(scalar_tensor(1.0), zeros({2, 2}));
      },
      "[linear] expected an input with at least 1 dim, got ()");
  expect_exact_error(
      [&] {
        mm(zeros({2, 2}, kInt64), zeros({2, 2}, kInt64));
      },
      "[mm] expected floating inputs, got int64");
  expect_exact_error([&] { matmul(Tensor(), zeros({2})); }, "[matmul] got an undefined tensor");
}

// ---- cache and threads --------------------------------------------------------------------

TEST(Linalg, PrimitiveCacheReusesAndKeysByGeometry) {
  (void)cpu::native_matmul(kBFloat16);  // probing caches its own primitives first
  Tensor a = uniform({13, 17}, kFloat32), b = uniform({17, 11}, kFloat32);
  (void)mm(a, b);
  const size_t n0 = cpu::matmul_cache_size();
  (void)mm(a, b);
  (void)mm(a.clone(), b.clone());
  EXPECT_EQ(cpu::matmul_cache_size(), n0);  // same geometry: a hit
  (void)mm(uniform({17, 13}, kFloat32).t(), b);
  EXPECT_EQ(cpu::matmul_cache_size(), n0 + 1);  // transposed strides: a new primitive
  size_t bf16 = 0;                              // a bf16 primitive, or none where the float32 primitive above runs it
  {
    Gemm16Mode native(Gemm16::kNative);
    (void)mm(a.to(kBFloat16), b.to(kBFloat16));
    bf16 = cpu::matmul_cache_size() - (n0 + 1);
    // A native bf16 GEMM has its own primitive (dtype is in the key); a CPU without one
    // runs this small product on oneDNN's bf16 reference kernel (a primitive too) or widens it.
    if (cpu_gemm16_path(kBFloat16) == Gemm16::kNative) EXPECT_EQ(bf16, 1u);
    EXPECT_LE(bf16, 1u);
  }
  (void)linear(a, b.t(), zeros({11}));
  EXPECT_EQ(cpu::matmul_cache_size(), n0 + 2 + bf16);  // so is the bias
  // results stay right across clearing
  const Tensor before = mm(a, b);
  cpu::clear_matmul_cache();
  EXPECT_EQ(cpu::matmul_cache_size(), 0u);
  EXPECT_TRUE(testing::equal(mm(a, b), before));
  // each thread's bound memory objects went with the cache: the product made its primitive anew
  EXPECT_EQ(cpu::matmul_cache_size(), 1u);
  // a geometry's bound memory objects point at each call's tensors
  const Tensor a2 = uniform({13, 17}, kFloat32, -1, 1, 50), b2 = uniform({17, 11}, kFloat32, -1, 1, 51);
  EXPECT_TRUE(matches_ref(mm(a2, b2), testing::ref::matmul(a2, b2), kFloat32, 17, 1, 1));
  EXPECT_EQ(cpu::matmul_cache_size(), 1u);
}

TEST(Linalg, ConcurrentCallsAgree) {
  Tensor a = uniform({96, 80}, kBFloat16, -1, 1, 80), b = uniform({80, 72}, kBFloat16, -1, 1, 81);
  const Tensor expected = mm(a, b);
  std::vector<Tensor> results(8);
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&, t] {
      Tensor r;
      for (int i = 0; i < 20; ++i) r = mm(a, b);
      results[t] = r;
    });
  for (auto& th : threads) th.join();
  for (const Tensor& r : results) EXPECT_TRUE(testing::equal(r, expected));
}

}  // namespace
}  // namespace tc
