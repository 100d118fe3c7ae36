// Tensors of the 8-bit floats: casts both ways agree with the scalar conversions (which
// tests/test_float8.cpp and tests/torch/float8_against_pytorch.py check against float64 and
// PyTorch), strided copies, factories, printing, safetensors, autocast, and the refusal of
// arithmetic that PyTorch refuses too.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "common/testing.h"
#include "tensorcast/amp/autocast.h"
#include "tensorcast/factories.h"
#include "tensorcast/io/safetensors.h"
#include "tensorcast/ops.h"

namespace tc {
namespace {

const DType kFloat8s[] = {kFloat8_e4m3fn, kFloat8_e5m2, kFloat8_e8m0fnu};

// The raw codes of an 8-bit tensor.
std::vector<uint8_t> codes(const Tensor& t) {
  const Tensor c = t.contiguous();
  const auto* p = static_cast<const uint8_t*>(c.raw_data());
  return {p, p + c.numel()};
}

// A tensor holding the given codes.
Tensor from_codes(const std::vector<uint8_t>& v, DType dt) {
  Tensor t = empty({static_cast<int64_t>(v.size())}, dt);
  std::memcpy(t.raw_data(), v.data(), v.size());
  return t;
}

uint8_t scalar_code(float f, DType dt) {
  return dispatch_float8(dt, "test", [&]<class T>() { return T(f).x; });
}
float scalar_value(uint8_t c, DType dt) {
  return dispatch_float8(dt, "test", [&]<class T>() { return static_cast<float>(T(c, T::from_bits())); });
}

// Floats around every exponent of the formats: each code's value, the midpoints and their
// float neighbours, past the range, infinities and NaN.
std::vector<float> probe_floats() {
  std::vector<float> v = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, -NAN, 1e30f, -1e30f, 1e-30f};
  for (int e = -140; e <= 128; ++e)
    for (float m : {1.0f, 1.0625f, 1.125f, 1.1875f, 1.25f, 1.5f, 1.75f, 1.875f, 1.9375f})
      for (float s : {1.0f, -1.0f}) {
        const float x = s * std::ldexp(m, e);
        v.insert(v.end(), {x, std::nextafter(x, 0.0f), std::nextafter(x, 2 * x)});
      }
  return v;
}

TEST(Float8Tensor, FloatToFloat8MatchesTheScalarCastOnEveryProbe) {
  const std::vector<float> v = probe_floats();
  const Tensor x = from_blob(const_cast<float*>(v.data()), {static_cast<int64_t>(v.size())}, kFloat32);
  for (DType dt : kFloat8s) {
    const Tensor y = x.to(dt);
    ASSERT_EQ(y.dtype(), dt);
    const std::vector<uint8_t> got = codes(y);
    for (size_t i = 0; i < v.size(); ++i) ASSERT_EQ(got[i], scalar_code(v[i], dt)) << dtype_name(dt) << " of " << v[i];
    // Strided: every other element of the source, into a transposed destination.
    const Tensor xs = x.narrow(0, 0, static_cast<int64_t>(v.size() / 2) * 2).reshape({-1, 2}).select(1, 1);
    const std::vector<uint8_t> strided = codes(xs.to(dt));
    for (size_t i = 0; i < strided.size(); ++i) ASSERT_EQ(strided[i], scalar_code(v[2 * i + 1], dt));
  }
}

TEST(Float8Tensor, EveryCodeWidensExactlyToEveryDtype) {
  std::vector<uint8_t> all(256);
  for (int i = 0; i < 256; ++i) all[i] = static_cast<uint8_t>(i);
  for (DType dt : kFloat8s) {
    const Tensor t = from_codes(all, dt);
    const Tensor f = t.to(kFloat32), d = t.to(kFloat64), b = t.to(kBFloat16), i32 = t.to(kInt32), z = t.to(kBool);
    for (int c = 0; c < 256; ++c) {
      const float want = scalar_value(static_cast<uint8_t>(c), dt);
      const float got = static_cast<const float*>(f.raw_data())[c];
      ASSERT_EQ(std::bit_cast<uint32_t>(got), std::bit_cast<uint32_t>(want)) << dtype_name(dt) << " code " << c;
      const double gd = static_cast<const double*>(d.raw_data())[c];
      if (std::isnan(want)) {
        ASSERT_TRUE(std::isnan(gd));
        continue;
      }
      ASSERT_EQ(gd, static_cast<double>(want));
      ASSERT_EQ(float(static_cast<const BFloat16*>(b.raw_data())[c]), want);  // every fp8 value is a bf16
      if (std::fabs(want) < 2e9f) ASSERT_EQ(static_cast<const int32_t*>(i32.raw_data())[c], static_cast<int32_t>(want));
      ASSERT_EQ(static_cast<const bool*>(z.raw_data())[c], want != 0.0f);
    }
    // Between the 8-bit formats: through float, as PyTorch.
    for (DType other : kFloat8s) {
      if (other == dt) continue;
      const std::vector<uint8_t> got = codes(t.to(other));
      for (int c = 0; c < 256; ++c)
        ASSERT_EQ(got[c], scalar_code(scalar_value(static_cast<uint8_t>(c), dt), other))
            << dtype_name(dt) << " -> " << dtype_name(other) << " code " << c;
    }
  }
}

TEST(Float8Tensor, DoublesAndIntegersReachFloat8ThroughFloatAsPyTorch) {
  // 1.0625 is the E4M3 midpoint between 1 and 1.125. 1.0625 + 2^-40 is above it, but it is
  // 1.0625 in float, which ties to even: PyTorch's cast (double -> float -> 8-bit) gives 1.
  const double above_tie = 1.0625 + std::ldexp(1.0, -40);
  EXPECT_EQ(scalar_tensor(above_tie, kFloat64).to(kFloat8_e4m3fn).item<float>(), 1.0f);
  EXPECT_EQ(scalar_tensor(above_tie, kFloat32).item<float>(), 1.0625f);
  // Past float's range a double is infinity in float: ±448 in E4M3, inf in E5M2.
  EXPECT_EQ(scalar_tensor(1e300, kFloat64).to(kFloat8_e4m3fn).item<float>(), 448.0f);
  EXPECT_TRUE(std::isinf(scalar_tensor(-1e300, kFloat64).to(kFloat8_e5m2).item<float>()));
  const std::vector<int64_t> ints = {0, 1, -3, 17, 300, 1000, 100000};
  const Tensor ti = tensor(ints);
  const std::vector<uint8_t> e4 = codes(ti.to(kFloat8_e4m3fn));
  for (size_t i = 0; i < ints.size(); ++i) EXPECT_EQ(e4[i], scalar_code(static_cast<float>(ints[i]), kFloat8_e4m3fn));
  EXPECT_EQ(codes(tensor({1.0, 0.0}).to(kBool).to(kFloat8_e5m2)), (std::vector<uint8_t>{0x3c, 0x00}));
}

TEST(Float8Tensor, FactoriesViewsAndPrinting) {
  for (DType dt : kFloat8s) {
    EXPECT_EQ(ones({3}, dt).to_vector(), (std::vector<double>{1, 1, 1})) << dtype_name(dt);
    EXPECT_EQ(full({1}, 4.0, dt).item<float>(), 4.0f);
  }
  EXPECT_EQ(zeros({2}, kFloat8_e4m3fn).to_vector(), (std::vector<double>{0, 0}));
  EXPECT_EQ(full({1}, 1000.0, kFloat8_e4m3fn).item<float>(), 448.0f);  // saturates, as PyTorch
  const Tensor m = tensor({1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f}).reshape({2, 3}).to(kFloat8_e4m3fn);
  EXPECT_EQ(m.t().contiguous().to_vector(), (std::vector<double>{1, 4, 2, 5, 3, 6}));
  EXPECT_EQ(m.t().to(kFloat32).to_vector(), (std::vector<double>{1, 4, 2, 5, 3, 6}));
  EXPECT_EQ(tensor({0.5f, -448.0f, 1e9f}).to(kFloat8_e4m3fn).str(), "tensor([0.5, -448., 448.], dtype=float8_e4m3fn)");
  EXPECT_EQ(tensor({1.0f, 1e9f}).to(kFloat8_e5m2).str(), "tensor([1., inf], dtype=float8_e5m2)");
}

TEST(Float8Tensor, ArithmeticIsRefusedAsPyTorchRefusesIt) {
  const Tensor a = ones({2, 2}, kFloat8_e4m3fn);
  TC_EXPECT_ERROR(a + a, "not implemented for float8_e4m3fn");
  TC_EXPECT_ERROR(a.matmul(a), "not implemented for float8_e4m3fn");
  TC_EXPECT_ERROR(a.sum(), "not implemented for float8_e4m3fn");
  TC_EXPECT_ERROR(a + ones({2, 2}), "promotion for 8-bit float types is not supported");
  // The way out is a cast: the same product in bfloat16 is exact for these values.
  EXPECT_EQ(a.to(kBFloat16).matmul(a.to(kBFloat16)).to_vector(), (std::vector<double>{2, 2, 2, 2}));
}

TEST(Float8Tensor, AutocastCastsFloat8InputsAsAnyFloatingInput) {
  // PyTorch's autocast treats an 8-bit float as floating: cast to bf16 for a lower-precision
  // op, to float32 for a float32 op.
  const Tensor a = tensor({1.0f, 2.0f, 3.0f, 4.0f}).reshape({2, 2}).to(kFloat8_e4m3fn);
  const Tensor b = tensor({0.5f, -1.0f, 2.0f, 448.0f}).reshape({2, 2}).to(kFloat8_e5m2);
  amp::AutocastGuard guard(kCPU, kBFloat16);
  const Tensor y = a.matmul(b);
  EXPECT_EQ(y.dtype(), kBFloat16);
  EXPECT_EQ(y.to_vector(), (std::vector<double>{4.5, 896, 9.5, 1792}));  // exact in float32, then bf16
  const Tensor s = softmax(a, 1);
  EXPECT_EQ(s.dtype(), kFloat32);
}

TEST(Float8Tensor, SafetensorsNamesAndRoundTrip) {
  StateDict sd;
  sd.emplace("e4m3", tensor({1.0f, -0.5f, 448.0f, 0.001953125f}).to(kFloat8_e4m3fn));
  sd.emplace("e5m2", tensor({1.0f, INFINITY, -57344.0f}).to(kFloat8_e5m2));
  sd.emplace("e8m0", tensor({1.0f, 0.25f, 1024.0f}).to(kFloat8_e8m0fnu));
  const std::string bytes = io::serialize_safetensors(sd);
  EXPECT_NE(bytes.find("\"dtype\":\"F8_E4M3\""), std::string::npos);
  EXPECT_NE(bytes.find("\"dtype\":\"F8_E5M2\""), std::string::npos);
  EXPECT_NE(bytes.find("\"dtype\":\"F8_E8M0\""), std::string::npos);
  const io::SafetensorsFile back = io::parse_safetensors(bytes);
  for (const auto& [name, t] : sd) {
    const Tensor& u = back.tensors.at(name);
    EXPECT_EQ(u.dtype(), t.dtype()) << name;
    EXPECT_EQ(codes(u), codes(t)) << name;
  }
}

}  // namespace
}  // namespace tc
