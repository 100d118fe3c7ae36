// Tests for DType traits and promotion, factories, the random generator, accessors,
// casts/clone/detach, printing, and the thread settings.
#include <cmath>
#include <cstring>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

#include "backend/cpu/loops/amp_kernels.h"
#include "common/testing.h"
#include "core/tensor_impl.h"
#include "tensorcast/cuda.h"
#include "tensorcast/optim/sgd.h"

namespace tc {
namespace {

using testing::all_close;
using testing::equal;

const DType kAll[kNumDTypes] = {kFloat32, kFloat16, kBFloat16,      kFloat64,     kInt64,         kInt32,
                                kUInt8,   kBool,    kFloat8_e4m3fn, kFloat8_e5m2, kFloat8_e8m0fnu};

// ------------------------------------------------------------------ dtype traits

TEST(DType, TraitsMatchPyTorch) {
  EXPECT_EQ(dtype_name(kFloat32), "float32");
  EXPECT_EQ(dtype_name(kFloat16), "float16");
  EXPECT_EQ(dtype_name(kBFloat16), "bfloat16");
  EXPECT_EQ(dtype_name(kFloat64), "float64");
  EXPECT_EQ(dtype_name(kInt64), "int64");
  EXPECT_EQ(dtype_name(kInt32), "int32");
  EXPECT_EQ(dtype_name(kUInt8), "uint8");
  EXPECT_EQ(dtype_name(kBool), "bool");
  EXPECT_EQ(dtype_name(kFloat8_e4m3fn), "float8_e4m3fn");
  EXPECT_EQ(dtype_name(kFloat8_e5m2), "float8_e5m2");
  EXPECT_EQ(dtype_name(kFloat8_e8m0fnu), "float8_e8m0fnu");
  const size_t sizes[] = {4, 2, 2, 8, 8, 4, 1, 1, 1, 1, 1};
  const bool floating[] = {true, true, true, true, false, false, false, false, true, true, true};
  for (int i = 0; i < kNumDTypes; ++i) {
    EXPECT_EQ(element_size(kAll[i]), sizes[i]) << dtype_name(kAll[i]);
    EXPECT_EQ(is_floating(kAll[i]), floating[i]) << dtype_name(kAll[i]);
  }
  // torch.finfo(...).eps and .max
  EXPECT_EQ(traits(kFloat32).epsilon, 1.1920928955078125e-07);
  EXPECT_EQ(traits(kFloat16).epsilon, 0.0009765625);
  EXPECT_EQ(traits(kBFloat16).epsilon, 0.0078125);
  EXPECT_EQ(traits(kFloat64).epsilon, 2.220446049250313e-16);
  EXPECT_EQ(traits(kFloat16).max, 65504.0);
  EXPECT_EQ(traits(kBFloat16).max, 3.3895313892515355e+38);
  EXPECT_EQ(traits(kFloat32).max, 3.4028234663852886e+38);
  EXPECT_EQ(traits(kFloat32).max, static_cast<double>(std::numeric_limits<float>::max()));
  EXPECT_EQ(traits(kBFloat16).max, static_cast<double>(float(BFloat16::from_bits(0x7f7f))));
  EXPECT_EQ(traits(kFloat16).max, static_cast<double>(float(Half::from_bits(0x7bff))));
  EXPECT_EQ(traits(kUInt8).max, 255.0);
  // torch.finfo of the 8-bit floats
  EXPECT_EQ(traits(kFloat8_e4m3fn).epsilon, 0.125);
  EXPECT_EQ(traits(kFloat8_e5m2).epsilon, 0.25);
  EXPECT_EQ(traits(kFloat8_e8m0fnu).epsilon, 1.0);
  EXPECT_EQ(traits(kFloat8_e4m3fn).max, 448.0);
  EXPECT_EQ(traits(kFloat8_e5m2).max, 57344.0);
  EXPECT_EQ(traits(kFloat8_e8m0fnu).max, 1.7014118346046923e+38);
  EXPECT_EQ(traits(kFloat8_e4m3fn).max, double(float(Float8_e4m3fn(0x7e, Float8_e4m3fn::from_bits()))));
  EXPECT_EQ(traits(kFloat8_e5m2).max, double(float(Float8_e5m2(0x7b, Float8_e5m2::from_bits()))));
  EXPECT_EQ(traits(kFloat8_e8m0fnu).max, double(float(Float8_e8m0fnu(0xfe, Float8_e8m0fnu::from_bits()))));
  EXPECT_TRUE(is_float8(kFloat8_e5m2));
  EXPECT_FALSE(is_float8(kBFloat16));
  EXPECT_FALSE(is_reduced_float(kFloat8_e4m3fn));
  EXPECT_EQ(traits(kBFloat16).accumulate, kFloat32);
  EXPECT_EQ(traits(kFloat16).accumulate, kFloat32);
  EXPECT_EQ(traits(kFloat64).accumulate, kFloat64);
  EXPECT_TRUE(is_reduced_float(kBFloat16));
  EXPECT_TRUE(is_reduced_float(kFloat16));
  EXPECT_FALSE(is_reduced_float(kFloat32));
  std::ostringstream os;
  os << kBFloat16;
  EXPECT_EQ(os.str(), "bfloat16");
}

TEST(DType, PromoteTypesAll64PairsAgainstPyTorchTable) {
  // torch.promote_types for (row, col) in the order f32 f16 bf16 f64 i64 i32 u8 bool.
  const DType F32 = kFloat32, F16 = kFloat16, BF = kBFloat16, F64 = kFloat64, I64 = kInt64, I32 = kInt32, U8 = kUInt8,
              B = kBool;
  const DType table[8][8] = {
      {F32, F32, F32, F64, F32, F32, F32, F32},  // f32
      {F32, F16, F32, F64, F16, F16, F16, F16},  // f16
      {F32, F32, BF, F64, BF, BF, BF, BF},       // bf16
      {F64, F64, F64, F64, F64, F64, F64, F64},  // f64
      {F32, F16, BF, F64, I64, I64, I64, I64},   // i64
      {F32, F16, BF, F64, I64, I32, I32, I32},   // i32
      {F32, F16, BF, F64, I64, I32, U8, U8},     // u8
      {F32, F16, BF, F64, I64, I32, U8, B},      // bool
  };
  for (int i = 0; i < 8; ++i)
    for (int j = 0; j < 8; ++j)
      EXPECT_EQ(promote_types(kAll[i], kAll[j]), table[i][j]) << dtype_name(kAll[i]) << " + " << dtype_name(kAll[j]);
  // An 8-bit float promotes with itself only; PyTorch raises for every other pair.
  for (int i = 8; i < kNumDTypes; ++i)
    for (int j = 0; j < kNumDTypes; ++j) {
      if (i == j) {
        EXPECT_EQ(promote_types(kAll[i], kAll[j]), kAll[i]);
        continue;
      }
      TC_EXPECT_ERROR(promote_types(kAll[i], kAll[j]), "promotion for 8-bit float types is not supported");
      TC_EXPECT_ERROR(promote_types(kAll[j], kAll[i]), "promotion for 8-bit float types is not supported");
    }
}

TEST(Device, ParsesTorchDeviceStrings) {
  EXPECT_EQ(Device("cpu"), Device(kCPU));
  EXPECT_EQ(Device("cuda"), Device(kCUDA, 0));
  EXPECT_EQ(Device("cuda:0"), Device(kCUDA, 0));
  EXPECT_EQ(Device("cuda:7"), Device(kCUDA, 7));
  EXPECT_EQ(Device("cuda:127"), Device(kCUDA, 127));
  std::ostringstream os;
  EXPECT_EQ(Device("meta"), Device(kMeta));
  os << Device("cuda:3") << " " << Device("cpu") << " " << Device("meta");
  EXPECT_EQ(os.str(), "cuda:3 cpu meta");
  for (const char* bad :
       {"", "gpu", "CPU", "cuda:", "cuda:-1", "cuda:128", "cuda:1x", "cuda:01a", "cpu:0", " cuda", "meta:0", "Meta"})
    TC_EXPECT_ERROR(Device{std::string_view(bad)},
                    "expected \"cpu\", \"cuda\", \"cuda:N\" (N from 0 to 127) or \"meta\"");
}

TEST(DType, DispatchFloatingRejectsIntegers) {
  TC_EXPECT_ERROR(dispatch_floating(kInt32, "myop", []<class T>() { return 0; }), "[myop]");
  EXPECT_EQ(dispatch_all(kBFloat16, "x", []<class T>() { return sizeof(T); }), 2u);
}

// ------------------------------------------------------------------ factories

TEST(Factories, EmptyZerosOnesFull) {
  Tensor e = empty({2, 3}, kBFloat16);
  EXPECT_EQ(e.sizes(), (Shape{2, 3}));
  EXPECT_EQ(e.dtype(), kBFloat16);
  EXPECT_EQ(e.strides(), (Shape{3, 1}));
  for (DType dt : kAll) {
    // E8M0 has no zero: 0 converts to its smallest value, 2^-127 (all-zero bits), as in PyTorch.
    const double zero = dt == kFloat8_e8m0fnu ? 0x1p-127 : 0.0;
    EXPECT_TRUE(equal(zeros({2, 2}, dt), tensor({zero, zero, zero, zero}).reshape({2, 2}))) << dtype_name(dt);
    EXPECT_TRUE(equal(ones({3}, dt), tensor({1.0, 1, 1}))) << dtype_name(dt);
    EXPECT_EQ(zeros({2}, dt).dtype(), dt);
  }
  EXPECT_TRUE(equal(full({2, 1}, -2.5), tensor({-2.5, -2.5}).reshape({2, 1})));
  EXPECT_TRUE(all_close(full({2}, 0.1, kBFloat16), {0.10009765625, 0.10009765625}, {0, 0}));
  EXPECT_TRUE(all_close(full({1}, 70000, kFloat16), {INFINITY}, {0, 0}));
  Tensor s = scalar_tensor(3.5, kFloat64);
  EXPECT_EQ(s.dim(), 0);
  EXPECT_EQ(s.numel(), 1);
  EXPECT_EQ(s.item<double>(), 3.5);
  EXPECT_EQ(zeros({0, 3}).numel(), 0);
  TC_EXPECT_ERROR(zeros({2, -1}), "negative size");
  Tensor r = ones({2}, TensorOptions(kFloat32).requires_grad(true));
  EXPECT_TRUE(r.requires_grad());
  EXPECT_TRUE(r.is_leaf());
  TC_EXPECT_ERROR(ones({2}, TensorOptions(kInt64).requires_grad(true)), "[requires_grad_]");
}

TEST(Factories, ShapesWhoseSizeOverflowsAreRefused) {
  // Shapes come from files too: an element count or stride past int64 is an error, never
  // undefined behaviour or a wrapped-around allocation size.
  const int64_t big = int64_t{1} << 62;
  EXPECT_EQ(shape_numel({0, big, 4}), 0);  // empty: the zero comes first, nothing overflows
  EXPECT_EQ(shape_numel({big, 4, 0}), 0);
  EXPECT_EQ(shape_numel({big, 1}), big);
  TC_EXPECT_ERROR(shape_numel({big, 4}), "shape (4611686018427387904, 4) is too large");
  TC_EXPECT_ERROR(contiguous_strides({0, big, 4}), "is too large");  // the stride of dim 0 is 2^64
  EXPECT_EQ(contiguous_strides({big, 2}), (Shape{2, 1}));            // the outermost extent is no stride
  TC_EXPECT_ERROR(empty({0, big, 4}), "is too large");
  TC_EXPECT_ERROR(empty({int64_t{1} << 40, int64_t{1} << 40}), "is too large");
}

TEST(Factories, Arange) {
  EXPECT_TRUE(equal(arange(5), tensor({0.0, 1, 2, 3, 4})));
  EXPECT_EQ(arange(5).dtype(), kFloat32);
  EXPECT_TRUE(equal(arange(2, 8, 2, kInt64), tensor({2.0, 4, 6})));
  EXPECT_EQ(arange(2, 8, 2, kInt64).dtype(), kInt64);
  // Fractional steps: size = ceil((end - start) / step).
  EXPECT_TRUE(all_close(arange(0, 1, 0.25, kFloat64), {0, 0.25, 0.5, 0.75}, {0, 0}));
  EXPECT_EQ(arange(0, 1, 0.1, kFloat64).numel(), 10);
  EXPECT_TRUE(all_close(arange(0, 1, 0.1, kFloat64), {0, .1, .2, .3, .4, .5, .6, .7, .8, .9}, {1e-15, 0}));
  EXPECT_EQ(arange(1, 2.5, 0.5).numel(), 3);
  EXPECT_EQ(arange(0, 1.01, 0.5).numel(), 3);
  // Negative step counts down and excludes end.
  EXPECT_TRUE(equal(arange(5, 0, -1.5, kFloat64), tensor({5.0, 3.5, 2.0, 0.5})));
  EXPECT_TRUE(equal(arange(3, 0, -1, kInt32), tensor({3.0, 2, 1})));
  EXPECT_EQ(arange(3, 3, 1).numel(), 0);
  TC_EXPECT_ERROR(arange(0, 5, 0), "[arange] step must be nonzero");
  TC_EXPECT_ERROR(arange(0, 5, -1), "[arange]");
  TC_EXPECT_ERROR(arange(5, 0, 1), "[arange]");
  TC_EXPECT_ERROR(arange(0, INFINITY, 1), "[arange]");
  TC_EXPECT_ERROR(arange(NAN, 1, 1), "[arange]");
}

TEST(Factories, RandRangeAndDeterminism) {
  manual_seed(42);
  Tensor a = rand({1000});
  manual_seed(42);
  Tensor b = rand({1000});
  EXPECT_TRUE(equal(a, b));
  Tensor c = rand({1000});
  EXPECT_FALSE(equal(a, c));
  std::vector<double> v = a.to_vector();
  double mean = 0;
  for (double x : v) {
    ASSERT_GE(x, 0.0);
    ASSERT_LT(x, 1.0);
    mean += x;
  }
  mean /= v.size();
  EXPECT_NEAR(mean, 0.5, 0.05);  // std of mean = 0.29/sqrt(1000) ~ 0.009
  for (DType dt : {kBFloat16, kFloat16, kFloat64}) {
    Tensor r = rand({100000}, dt);
    EXPECT_EQ(r.dtype(), dt);
    double lo = 1, hi = 0;
    for (double x : r.to_vector()) {
      lo = std::min(lo, x);
      hi = std::max(hi, x);
    }
    EXPECT_GE(lo, 0.0) << dtype_name(dt);
    EXPECT_LT(hi, 1.0) << dtype_name(dt);  // rounding to 16 bits must not reach 1.0
    EXPECT_GT(hi, 0.98) << dtype_name(dt);
  }
  TC_EXPECT_ERROR(rand({2}, kInt64), "[rand]");
  Tensor rl = rand_like(zeros({3, 2}, kFloat16));
  EXPECT_EQ(rl.sizes(), (Shape{3, 2}));
  EXPECT_EQ(rl.dtype(), kFloat16);
}

TEST(Factories, RandnStatistics) {
  manual_seed(7);
  for (DType dt : {kFloat32, kFloat64, kBFloat16}) {
    Tensor r = randn({100000}, dt);
    EXPECT_EQ(r.dtype(), dt);
    std::vector<double> v = r.to_vector();
    double m = 0, m2 = 0;
    int beyond3 = 0;
    for (double x : v) {
      ASSERT_TRUE(std::isfinite(x));
      m += x;
      beyond3 += std::fabs(x) > 3;
    }
    m /= v.size();
    for (double x : v) m2 += (x - m) * (x - m);
    const double sd = std::sqrt(m2 / (v.size() - 1));
    // std error of the mean is 1/sqrt(1e5) = 0.0032; of the std about 0.0022.
    EXPECT_NEAR(m, 0.0, 0.02) << dtype_name(dt);
    EXPECT_NEAR(sd, 1.0, 0.02) << dtype_name(dt);
    // P(|x| > 3) = 0.0027 -> about 270 of 1e5.
    EXPECT_GT(beyond3, 150) << dtype_name(dt);
    EXPECT_LT(beyond3, 400) << dtype_name(dt);
  }
  manual_seed(3);
  Tensor a = randn({17});
  manual_seed(3);
  EXPECT_TRUE(equal(randn({17}), a));
  Tensor rl = randn_like(a);
  EXPECT_EQ(rl.sizes(), a.sizes());
  EXPECT_FALSE(equal(rl, a));
}

TEST(Factories, Randint) {
  manual_seed(1);
  Tensor r = randint(-3, 4, {10000});
  EXPECT_EQ(r.dtype(), kInt64);
  std::vector<int> counts(7, 0);
  for (double x : r.to_vector()) {
    ASSERT_GE(x, -3);
    ASSERT_LT(x, 4);
    ASSERT_EQ(x, std::floor(x));
    ++counts[static_cast<int>(x) + 3];
  }
  for (int c : counts) EXPECT_GT(c, 1200);  // expected 1428 each
  Tensor f = randint(0, 10, {5}, kFloat32);
  EXPECT_EQ(f.dtype(), kFloat32);
  manual_seed(9);
  Tensor a = randint(0, 1000, {50});
  manual_seed(9);
  EXPECT_TRUE(equal(randint(0, 1000, {50}), a));
  TC_EXPECT_ERROR(randint(5, 5, {2}), "[randint] expected low < high");
}

TEST(Factories, TensorFromVector) {
  Tensor a = tensor(std::vector<float>{1.5f, -2, 3, 4, 5, 6}, {2, 3});
  EXPECT_EQ(a.dtype(), kFloat32);
  EXPECT_EQ(a.sizes(), (Shape{2, 3}));
  EXPECT_EQ(a.data_ptr<float>()[0], 1.5f);
  EXPECT_EQ(a.data_ptr<float>()[5], 6.0f);
  Tensor i = tensor(std::vector<int64_t>{INT64_C(9007199254740993), -1});
  EXPECT_EQ(i.dtype(), kInt64);
  EXPECT_EQ(i.data_ptr<int64_t>()[0], INT64_C(9007199254740993));  // not through double
  Tensor b = tensor(std::vector<bool>{true, false, true});
  EXPECT_EQ(b.dtype(), kBool);
  EXPECT_TRUE(all_close(b, {1, 0, 1}, {0, 0}));
  Tensor h = tensor(std::vector<double>{0.1, 1.0 / 3}, {}, kBFloat16);
  EXPECT_EQ(h.dtype(), kBFloat16);
  EXPECT_EQ(h.data_ptr<BFloat16>()[0].bits, BFloat16(0.1f).bits);
  Tensor u = tensor(std::vector<uint8_t>{0, 255});
  EXPECT_EQ(u.dtype(), kUInt8);
  EXPECT_EQ(u.data_ptr<uint8_t>()[1], 255);
  Tensor l = tensor({1.0, 2.0}, TensorOptions(kFloat64).requires_grad(true));
  EXPECT_EQ(l.dtype(), kFloat64);
  EXPECT_TRUE(l.requires_grad());
  TC_EXPECT_ERROR(tensor(std::vector<float>{1, 2, 3}, {2, 2}), "[tensor] shape (2, 2) needs 4 values, got 3");
}

TEST(Factories, FromBlobSharesMemory) {
  std::vector<float> buf = {1, 2, 3, 4, 5, 6};
  const MemoryStats before = memory_stats();
  Tensor t = from_blob(buf.data(), {2, 3});
  EXPECT_EQ(memory_stats().current_bytes, before.current_bytes);
  EXPECT_EQ(memory_stats().allocation_count, before.allocation_count);
  EXPECT_EQ(t.data_ptr<float>(), buf.data());
  buf[4] = 50;
  EXPECT_EQ(t.to_vector()[4], 50);
  t.select(0, 0).fill_(-1);
  EXPECT_EQ(buf[0], -1);
  EXPECT_EQ(buf[2], -1);
  EXPECT_EQ(buf[3], 4);
  // Explicit strides: a transposed (3, 2) view of the buffer.
  Tensor s = from_blob(buf.data(), {3, 2}, {1, 3});
  EXPECT_FALSE(s.is_contiguous());
  EXPECT_TRUE(all_close(s, {-1, 4, -1, 50, -1, 6}, {0, 0}));
  Tensor d = from_blob(buf.data(), {2}, TensorOptions(kFloat32).requires_grad(true));
  EXPECT_TRUE(d.requires_grad());
  TC_EXPECT_ERROR(from_blob(buf.data(), {2, 3}, {1}), "[from_blob]");
}

TEST(Factories, LikeFunctions) {
  Tensor base = zeros({2, 5}, kFloat16).t();  // non-contiguous input
  for (Tensor t : {empty_like(base), zeros_like(base), ones_like(base), full_like(base, 7)}) {
    EXPECT_EQ(t.sizes(), (Shape{5, 2}));
    EXPECT_EQ(t.dtype(), kFloat16);
    EXPECT_TRUE(t.is_contiguous());
    EXPECT_FALSE(t.requires_grad());
  }
  EXPECT_TRUE(all_close(full_like(base, 7), std::vector<double>(10, 7), {0, 0}));
  EXPECT_TRUE(all_close(ones_like(base), std::vector<double>(10, 1), {0, 0}));
  EXPECT_TRUE(all_close(zeros_like(base), std::vector<double>(10, 0), {0, 0}));
}

// ------------------------------------------------------------------ accessors

TEST(Accessors, Metadata) {
  Tensor t = zeros({2, 3, 4}, kInt32);
  EXPECT_EQ(t.dtype(), kInt32);
  EXPECT_EQ(t.dim(), 3);
  EXPECT_EQ(t.numel(), 24);
  EXPECT_EQ(t.size(-1), 4);
  EXPECT_EQ(t.size(0), 2);
  EXPECT_EQ(t.stride(0), 12);
  EXPECT_EQ(t.nbytes(), 96u);
  EXPECT_TRUE(t.is_contiguous());
  EXPECT_FALSE(t.is_floating_point());
  EXPECT_TRUE(t.device().is_cpu());
  TC_EXPECT_ERROR(t.size(3), "[size] dimension 3 out of range");
  TC_EXPECT_ERROR(t.size(-4), "[size] dimension -4 out of range");
  TC_EXPECT_ERROR(scalar_tensor(1).size(0), "[size]");
  EXPECT_EQ(shape_str({64, 784}), "(64, 784)");
  EXPECT_EQ(shape_str({2}), "(2,)");
  EXPECT_EQ(shape_str({}), "()");
}

TEST(Accessors, DataPtrChecksType) {
  Tensor t = ones({2}, kBFloat16);
  EXPECT_EQ(float(t.data_ptr<BFloat16>()[1]), 1.0f);
  TC_EXPECT_ERROR(t.data_ptr<float>(), "[data_ptr] tensor has dtype bfloat16 but data_ptr<float32>");
  TC_EXPECT_ERROR(ones({1}, kInt32).data_ptr<int64_t>(), "[data_ptr]");
  // data_ptr points at the view's first element.
  Tensor a = arange(10, kFloat32);
  EXPECT_EQ(a.slice(0, 3, 10).data_ptr<float>()[0], 3.0f);
  EXPECT_EQ(a.slice(0, 3, 10).data_ptr<float>(), a.data_ptr<float>() + 3);
}

TEST(Accessors, Item) {
  EXPECT_EQ(full({1, 1}, 2.5).item<double>(), 2.5);
  EXPECT_EQ(full({}, 7, kInt64).item<int64_t>(), 7);
  EXPECT_EQ(full({}, 1, kBool).item<bool>(), true);
  EXPECT_EQ(full({}, 0.1, kBFloat16).item<float>(), float(BFloat16(0.1f)));
  TC_EXPECT_ERROR(zeros({2}).item<float>(), "[item] a tensor with 2 elements cannot be converted to a scalar");
  TC_EXPECT_ERROR(zeros({0}).item<float>(), "[item]");
}

TEST(Accessors, ToDtypeRoundTrips) {
  Tensor x = tensor({-2.5, -1, 0, 0.5, 1, 3.75});
  for (DType dt : {kFloat16, kBFloat16, kFloat64}) {
    Tensor y = x.to(dt);
    EXPECT_EQ(y.dtype(), dt);
    EXPECT_TRUE(equal(y.to(kFloat32), x)) << dtype_name(dt);
  }
  EXPECT_TRUE(x.to(kFloat32).is_same(x));  // same dtype: no copy
  // float -> int truncates toward zero; -> bool is x != 0.
  EXPECT_TRUE(all_close(x.to(kInt64), {-2, -1, 0, 0, 1, 3}, {0, 0}));
  EXPECT_TRUE(all_close(x.to(kInt32), {-2, -1, 0, 0, 1, 3}, {0, 0}));
  EXPECT_TRUE(all_close(x.to(kBool), {1, 1, 0, 1, 1, 1}, {0, 0}));
  EXPECT_TRUE(all_close(tensor({3.0, 200, 255}).to(kUInt8), {3, 200, 255}, {0, 0}));
  // 16-bit rounding: round to nearest even, overflow to inf.
  Tensor r = tensor({1.0 + 1.0 / 256, 1.0 + 3.0 / 256, 65520.0}, kFloat64);
  EXPECT_TRUE(all_close(r.to(kBFloat16), {1.0, 1.0 + 4.0 / 256, 65536.0}, {0, 0}));
  EXPECT_TRUE(all_close(r.to(kFloat16), {1.0 + 1.0 / 256, 1.0 + 3.0 / 256, INFINITY}, {0, 0}));
  // A non-contiguous float64 source rounds once, like the contiguous path:
  // 1 + 2^-8 + 2^-30 is just above a bf16 tie; double -> float -> bf16 would give 1.0.
  Tensor d = tensor(std::vector<double>{1.0 + 0x1p-8 + 0x1p-30, 0, 0, 0}, {2, 2});
  EXPECT_EQ(float(d.to(kBFloat16).data_ptr<BFloat16>()[0]), 1.0f + 0x1p-7f);
  EXPECT_EQ(float(d.t().to(kBFloat16).data_ptr<BFloat16>()[0]), 1.0f + 0x1p-7f);
  // Non-contiguous cast keeps values in logical order.
  Tensor nc = arange(6, kFloat32).reshape({2, 3}).t();
  EXPECT_TRUE(all_close(nc.to(kFloat16), {0, 3, 1, 4, 2, 5}, {0, 0}));
  EXPECT_TRUE(all_close(nc.to(kInt64), {0, 3, 1, 4, 2, 5}, {0, 0}));
  // Without a GPU the allocation of the copy says why (with a GPU: test_cuda.cpp).
  if (!cuda::is_available()) TC_EXPECT_ERROR(x.to(Device(kCUDA)), "device cuda:0 is not available: ");
}

TEST(Accessors, CloneIsIndependent) {
  Tensor a = arange(6, kFloat32).reshape({2, 3});
  Tensor c = a.clone();
  EXPECT_NE(c.data_ptr<float>(), a.data_ptr<float>());
  c.fill_(9);
  EXPECT_TRUE(all_close(a, {0, 1, 2, 3, 4, 5}, {0, 0}));
  Tensor ct = a.t().clone();
  EXPECT_TRUE(ct.is_contiguous());
  EXPECT_TRUE(all_close(ct, {0, 3, 1, 4, 2, 5}, {0, 0}));
}

TEST(Accessors, DetachSharesStorageAndDropsHistory) {
  Tensor x = ones({3}).requires_grad_();
  Tensor y = mul(x, 2.0);
  ASSERT_TRUE(y.grad_fn() != nullptr);
  Tensor d = y.detach();
  EXPECT_FALSE(d.requires_grad());
  EXPECT_TRUE(d.is_leaf());
  EXPECT_EQ(d.grad_fn(), nullptr);
  EXPECT_EQ(d.data_ptr<float>(), y.data_ptr<float>());
  d.fill_(5);
  EXPECT_TRUE(all_close(y, {5, 5, 5}, {0, 0}));
  Tensor xd = x.detach();
  EXPECT_FALSE(xd.requires_grad());
  EXPECT_TRUE(x.requires_grad());
}

TEST(Accessors, InPlaceOps) {
  Tensor a = zeros({2, 3});
  a.fill_(2);
  a.add_(arange(3, kFloat32), 2.0);  // broadcast
  EXPECT_TRUE(all_close(a, {2, 4, 6, 2, 4, 6}, {0, 0}));
  a.mul_(0.5);
  EXPECT_TRUE(all_close(a, {1, 2, 3, 1, 2, 3}, {0, 0}));
  a.mul_(tensor({2.0, 1.0}).reshape({2, 1}));
  EXPECT_TRUE(all_close(a, {2, 4, 6, 1, 2, 3}, {0, 0}));
  a.copy_(full({3}, 1.5, kBFloat16));
  EXPECT_TRUE(all_close(a, std::vector<double>(6, 1.5), {0, 0}));
  a.zero_();
  EXPECT_TRUE(all_close(a, std::vector<double>(6, 0), {0, 0}));
  TC_EXPECT_ERROR(zeros({3}).add_(ones({2, 3})), "[add_]");
  TC_EXPECT_ERROR(zeros({3}).copy_(ones({2})), "[copy_]");
  Tensor i = zeros({2}, kInt64);
  i.fill_(3);
  EXPECT_EQ(i.data_ptr<int64_t>()[1], 3);
}

// add_/mul_ write into self when that is safe, and must equal the out-of-place op followed
// by a copy in every case: aliasing (a.add_(a)), a partially overlapping view of the same
// storage (general path), mixed dtypes (one rounding to self's dtype), non-contiguous self.
TEST(Accessors, VersionCountsInPlaceWritesAndIsSharedByViews) {
  Tensor t = zeros({4, 3});
  Tensor view = t.narrow(0, 1, 2);
  EXPECT_EQ(t._version(), 0);
  t.fill_(1.0);
  t.zero_();
  view.add_(ones({2, 3}));
  view.mul_(2.0);
  t.mul_(ones({4, 3}));
  t.copy_(ones({3}));
  EXPECT_EQ(t._version(), 6);
  EXPECT_EQ(view._version(), 6);  // one counter for the memory (PyTorch's, shared by views)
  (void)(t + t);
  (void)t.clone();
  EXPECT_EQ(t._version(), 6);  // reads and new tensors do not count
  EXPECT_EQ(t.clone()._version(), 0);
  increment_version(t);
  EXPECT_EQ(view._version(), 7);
  // An optimizer step writes its parameters; unscaling writes the gradients.
  Tensor p = ones({3}).requires_grad_();
  p.set_grad(ones({3}));
  optim::SGD opt({p}, optim::SGDOptions(0.1));
  opt.step();
  EXPECT_EQ(p._version(), 1);
  const Tensor found = zeros({}), inv = full({}, 0.5);
  cpu::amp_non_finite_check_and_unscale_({p.grad()}, found, inv);
  EXPECT_EQ(p.grad()._version(), 1);
  TC_EXPECT_ERROR(Tensor()._version(), "[_version] called on an undefined tensor");
}

TEST(Accessors, InPlaceMatchesOutOfPlaceThenCopy) {
  Tensor a = tc::testing::uniform({5, 7}, kFloat32);
  Tensor want = add(a, a);
  a.add_(a);
  EXPECT_TRUE(tc::testing::equal(a, want));

  Tensor base = arange(12, kFloat32);
  // self = base[4:12] reads other = base[0:8]: an element-by-element update would read
  // base[4..7] after writing them.
  Tensor self = base.narrow(0, 4, 8), other = base.narrow(0, 0, 8);
  Tensor expect = add(self, other, 3.0);
  self.add_(other, 3.0);
  EXPECT_TRUE(tc::testing::equal(self, expect));

  Tensor b = tc::testing::uniform({4, 9}, kBFloat16);
  Tensor f = tc::testing::uniform({4, 9}, kFloat32);
  Tensor b_want = add(b, f, -0.25).to(kBFloat16);
  Tensor m_want = mul(b_want, f).to(kBFloat16);
  b.add_(f, -0.25);
  EXPECT_TRUE(tc::testing::equal(b, b_want));
  b.mul_(f);
  EXPECT_TRUE(tc::testing::equal(b, m_want));

  Tensor t = tc::testing::uniform({6, 4}, kFloat32).t();  // non-contiguous self
  Tensor row = tc::testing::uniform({6}, kFloat32);
  Tensor t_want = add(t, row);
  t.add_(row);
  EXPECT_TRUE(tc::testing::equal(t, t_want));
}

// fill_ writes the dtype's bit pattern of the value: every dtype, contiguous and strided.
TEST(Accessors, FillEveryDtype) {
  for (DType dt : {kFloat32, kFloat64, kBFloat16, kFloat16, kInt32, kInt64, kUInt8, kBool}) {
    const double v = dt == kBool ? 1.0 : (is_floating(dt) ? -1.375 : 7.0);
    Tensor c = empty({70001}, dt);  // large enough for several threads
    c.fill_(v);
    Tensor s = zeros({3, 5}, dt).t();
    s.fill_(v);
    Tensor ref = full({1}, v, kFloat64).to(dt);
    for (int64_t i : {int64_t{0}, int64_t{12345}, int64_t{70000}})
      EXPECT_EQ(std::memcmp(static_cast<char*>(c.raw_data()) + i * element_size(dt), ref.raw_data(), element_size(dt)),
                0)
          << dtype_name(dt) << " at " << i;
    EXPECT_TRUE(tc::testing::equal(s.contiguous().reshape({-1}), full({15}, v, kFloat64).to(dt))) << dtype_name(dt);
    c.zero_();
    EXPECT_EQ(c.to(kFloat64).abs().sum().item<double>(), 0.0) << dtype_name(dt);
  }
}

TEST(Accessors, UndefinedTensor) {
  Tensor u;
  EXPECT_FALSE(u.defined());
  EXPECT_FALSE(u.requires_grad());
  TC_EXPECT_ERROR(u.dtype(), "undefined");
  TC_EXPECT_ERROR(u.sizes(), "undefined");
  TC_EXPECT_ERROR(u.numel(), "undefined");
  TC_EXPECT_ERROR(u.detach(), "[detach]");
  TC_EXPECT_ERROR(u.fill_(1), "[fill_]");
  TC_EXPECT_ERROR(u.is_leaf(), "undefined");
  TC_EXPECT_ERROR(u.grad_fn(), "undefined");
  TC_EXPECT_ERROR(u.to_vector(), "undefined");
  TC_EXPECT_ERROR(add(u, ones({1})), "[add]");
  EXPECT_EQ(u.str(), "tensor(undefined)");
}

// ------------------------------------------------------------------ printing

std::string printed(const Tensor& t) {
  std::ostringstream os;
  os << t;
  return os.str();
}

TEST(Printing, Formats) {
  EXPECT_EQ(printed(tensor({1.5, -2.25, 3})), "tensor([1.5, -2.25, 3.])");
  EXPECT_EQ(printed(tensor({1.0, 2.0})), "tensor([1., 2.])");
  EXPECT_EQ(printed(arange(4, kInt64)), "tensor([0, 1, 2, 3])");
  EXPECT_EQ(printed(arange(3, kInt32)), "tensor([0, 1, 2], dtype=int32)");
  EXPECT_EQ(printed(tensor({0.5, 2}, kBFloat16)), "tensor([0.5, 2.], dtype=bfloat16)");
  EXPECT_EQ(printed(tensor({0.5}, kFloat16)), "tensor([0.5], dtype=float16)");
  EXPECT_EQ(printed(tensor(std::vector<bool>{true, false})), "tensor([True, False])");
  EXPECT_EQ(printed(scalar_tensor(3.25)), "tensor(3.25)");
  EXPECT_EQ(printed(scalar_tensor(4, kInt64)), "tensor(4)");
  EXPECT_EQ(printed(tensor({NAN, INFINITY, -INFINITY})), "tensor([nan, inf, -inf])");
  EXPECT_EQ(printed(arange(6, kInt64).reshape({2, 3})), "tensor([[0, 1, 2],\n        [3, 4, 5]])");
  EXPECT_EQ(printed(zeros({0})), "tensor([])");
}

TEST(Printing, ShowsAutogradState) {
  Tensor x = tensor({1.0, 2.0}, TensorOptions().requires_grad(true));
  EXPECT_EQ(printed(x), "tensor([1., 2.], requires_grad=True)");
  Tensor y = mul(x, 2.0);
  EXPECT_NE(printed(y).find("grad_fn=<mul>"), std::string::npos) << printed(y);
  EXPECT_EQ(printed(y.detach()), "tensor([2., 4.])");
}

TEST(Printing, LargeTensorsAreElided) {
  // Small tensors print in full, like PyTorch (threshold 1000 elements).
  EXPECT_EQ(printed(arange(10, kInt64)), "tensor([0, 1, 2, 3, 4, 5, 6, 7, 8, 9])");
  const std::string s = printed(arange(2000, kInt64));
  EXPECT_NE(s.find("0, 1, 2, ..., 1997, 1998, 1999]"), std::string::npos) << s;
  EXPECT_LT(s.size(), 100u);
  const std::string m = printed(arange(40 * 50, kInt64).reshape({40, 50}));
  EXPECT_LT(m.size(), 600u) << m;
  EXPECT_NE(m.find("[0, 1, 2, ..., 47, 48, 49]"), std::string::npos) << m;
  EXPECT_NE(m.find("[1950, 1951, 1952, ..., 1997, 1998, 1999]"), std::string::npos) << m;
  EXPECT_NE(m.find("...,\n"), std::string::npos) << m;
  EXPECT_EQ(m.find("[150,"), std::string::npos) << m;  // row 3 is elided
}

// ------------------------------------------------------------------ threads

TEST(Threads, SetAndGet) {
  const int orig = get_num_threads();
  EXPECT_GE(orig, 1);
  set_num_threads(1);
  EXPECT_EQ(get_num_threads(), 1);
  set_num_threads(2);
  EXPECT_EQ(get_num_threads(), 2);
  TC_EXPECT_ERROR(set_num_threads(0), "[set_num_threads] expected a thread count in [1, 1024], got 0");
  TC_EXPECT_ERROR(set_num_threads(-3), "[set_num_threads]");
  // The OpenMP runtime crashes on tens of thousands of threads: refused before it is asked.
  TC_EXPECT_ERROR(set_num_threads(65536), "[set_num_threads] expected a thread count in [1, 1024], got 65536");
  EXPECT_EQ(get_num_threads(), 2);
  set_num_threads(orig);
}

TEST(Threads, ParallelForCoversRangeAndPropagatesErrors) {
  const int orig = get_num_threads();
  set_num_threads(2);
  std::vector<int> hits(100000, 0);
  parallel_for(0, 100000, 1000, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) ++hits[i];
  });
  EXPECT_EQ(std::accumulate(hits.begin(), hits.end(), 0), 100000);
  EXPECT_EQ(*std::min_element(hits.begin(), hits.end()), 1);
  EXPECT_THROW(parallel_for(0, 100000, 1000,
                            [](int64_t b, int64_t) {
                              if (b > 0) throw Error("[test] boom");
                            }),
               Error);
  set_num_threads(orig);
}

TEST(Threads, ParallelTasksRunsEachTaskOnceAndPropagatesErrors) {
  const int orig = get_num_threads();
  for (int threads : {1, 2, 3}) {
    set_num_threads(threads);
    for (int64_t tasks : {0, 1, 2, 7, 1000}) {
      std::vector<std::atomic<int>> hits(static_cast<size_t>(tasks));
      parallel_tasks(tasks, [&](int64_t t) { hits[static_cast<size_t>(t)].fetch_add(1); });
      for (int64_t t = 0; t < tasks; ++t) EXPECT_EQ(hits[static_cast<size_t>(t)].load(), 1) << t << " of " << tasks;
    }
    EXPECT_THROW(parallel_tasks(50,
                                [](int64_t t) {
                                  if (t == 17) throw Error("[test] boom");
                                }),
                 Error);
  }
  set_num_threads(orig);
}

}  // namespace
}  // namespace tc
