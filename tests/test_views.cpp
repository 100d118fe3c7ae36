// Tests for views: geometry, storage sharing (writes through a view reach the base),
// errors, and gradients through every view op against hand-computed values.
#include <cstring>
#include <string>
#include <vector>

#include "common/testing.h"

namespace tc {
namespace {

using testing::all_close;
using testing::equal;

Tensor iota(const Shape& s, DType dt = kFloat32) {
  int64_t n = 1;
  for (int64_t v : s) n *= v;
  return arange(n, dt).reshape(s);
}

// Backward through `f` with gradient values 1, 2, 3, ... and returns x's gradient values.
std::vector<double> grad_through(const Tensor& x0, const std::function<Tensor(const Tensor&)>& f) {
  Tensor x = x0.detach().clone().requires_grad_();
  Tensor y = f(x);
  Tensor g = arange(1, y.numel() + 1, 1, y.dtype()).reshape(y.sizes());
  y.backward(g);
  EXPECT_TRUE(x.grad().defined());
  if (!x.grad().defined()) return {};
  EXPECT_EQ(x.grad().sizes(), x.sizes());
  EXPECT_EQ(x.grad().dtype(), x.dtype());
  return x.grad().to_vector();
}

TEST(Views, ViewAndReshape) {
  Tensor a = iota({2, 3, 4});
  Tensor v = a.view({6, 4});
  EXPECT_EQ(v.sizes(), (Shape{6, 4}));
  EXPECT_EQ(v.strides(), (Shape{4, 1}));
  EXPECT_EQ(v.data_ptr<float>(), a.data_ptr<float>());
  EXPECT_EQ(a.view({-1}).sizes(), (Shape{24}));
  EXPECT_EQ(a.view({4, -1, 2}).sizes(), (Shape{4, 3, 2}));
  EXPECT_EQ(a.reshape({-1, 12}).sizes(), (Shape{2, 12}));
  EXPECT_EQ(a.view({1, 24, 1}).strides(), (Shape{24, 1, 1}));
  EXPECT_EQ(scalar_tensor(5).view({1, 1}).sizes(), (Shape{1, 1}));
  EXPECT_EQ(ones({1}).view({}).dim(), 0);
  TC_EXPECT_ERROR(a.view({5, -1}), "[view] shape (5, -1) is invalid for input of size 24");
  TC_EXPECT_ERROR(a.view({5, 5}), "[view] shape (5, 5) is invalid for input of size 24");
  TC_EXPECT_ERROR(a.view({-1, -1}), "[view] only one dimension can be inferred");
  TC_EXPECT_ERROR(a.reshape({-2, 12}), "[reshape] invalid size -2");
  TC_EXPECT_ERROR(zeros({0, 3}).view({-1, 0}), "[view]");
  // A transposed tensor cannot be flattened as a view, and the message points at reshape.
  Tensor t = iota({3, 4}).t();
  TC_EXPECT_ERROR(t.view({12}), "use reshape()");
  TC_EXPECT_ERROR(t.view({12}), "[view] size (12,)");
  Tensor r = t.reshape({12});  // a copy
  EXPECT_TRUE(r.is_contiguous());
  EXPECT_TRUE(all_close(r, {0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11}, {0, 0}));
  // Views of non-contiguous tensors where the strides allow it.
  Tensor p = iota({2, 3, 4}).permute({1, 0, 2});  // (3, 2, 4), strides (4, 12, 1)
  Tensor pv = p.view({3, 2, 2, 2});
  EXPECT_EQ(pv.strides(), (Shape{4, 12, 2, 1}));
  EXPECT_EQ(pv.data_ptr<float>(), p.data_ptr<float>());
  TC_EXPECT_ERROR(p.view({6, 4}), "reshape");
  // Reshape of a view-compatible tensor shares storage.
  Tensor ex = ones({3, 1}).expand({3, 4});
  EXPECT_EQ(ex.unsqueeze(0).stride(1), 1);
  EXPECT_EQ(ex.unsqueeze(0).stride(2), 0);
  EXPECT_EQ(ex.unsqueeze(0).sizes(), (Shape{1, 3, 4}));
  Tensor fl = iota({2, 3, 4}).flatten(1);
  EXPECT_EQ(fl.sizes(), (Shape{2, 12}));
  EXPECT_EQ(iota({2, 3, 4}).flatten().sizes(), (Shape{24}));
  EXPECT_EQ(iota({2, 3, 4}).flatten(0, 1).sizes(), (Shape{6, 4}));
  EXPECT_EQ(scalar_tensor(1).flatten().sizes(), (Shape{1}));
  TC_EXPECT_ERROR(iota({2, 3}).flatten(1, 0), "[flatten]");
}

TEST(Views, ViewOfUnsqueezedSizeOneDims) {
  // (2, 1, 3) with a junk stride on the size-1 dim is still contiguous-like.
  Tensor a = iota({2, 3}).unsqueeze(1);
  EXPECT_EQ(a.sizes(), (Shape{2, 1, 3}));
  EXPECT_TRUE(a.is_contiguous());
  EXPECT_TRUE(all_close(a.view({6}), {0, 1, 2, 3, 4, 5}, {0, 0}));
}

TEST(Views, TransposePermuteT) {
  Tensor a = iota({2, 3});
  Tensor t = a.t();
  EXPECT_EQ(t.sizes(), (Shape{3, 2}));
  EXPECT_EQ(t.strides(), (Shape{1, 3}));
  EXPECT_FALSE(t.is_contiguous());
  EXPECT_TRUE(all_close(t, {0, 3, 1, 4, 2, 5}, {0, 0}));
  EXPECT_TRUE(equal(a.transpose(0, 1), t));
  EXPECT_TRUE(equal(a.transpose(-1, -2), t));
  Tensor b = iota({2, 3, 4});
  Tensor p = b.permute({2, 0, 1});
  EXPECT_EQ(p.sizes(), (Shape{4, 2, 3}));
  EXPECT_EQ(p.strides(), (Shape{1, 12, 4}));
  EXPECT_EQ(p.select(0, 1).select(0, 1).select(0, 2).item<float>(), 21.0f);  // b[1][2][1]
  EXPECT_TRUE(equal(b.permute({-1, 0, 1}), p));
  EXPECT_EQ(arange(3).t().sizes(), (Shape{3}));
  EXPECT_EQ(scalar_tensor(1).t().dim(), 0);
  TC_EXPECT_ERROR(b.t(), "[t] expects a tensor with <= 2 dimensions, got 3");
  TC_EXPECT_ERROR(b.permute({0, 1}), "[permute] expected 3 dims");
  TC_EXPECT_ERROR(b.permute({0, 1, 1}), "[permute] repeated dim 1");
  TC_EXPECT_ERROR(b.permute({0, 1, 3}), "[permute] dimension 3 out of range");
  TC_EXPECT_ERROR(b.transpose(0, 3), "[transpose] dimension 3 out of range");
  // contiguous() copies a transposed view into row-major order.
  Tensor c = t.contiguous();
  EXPECT_TRUE(c.is_contiguous());
  EXPECT_NE(c.data_ptr<float>(), a.data_ptr<float>());
  EXPECT_TRUE(all_close(c, {0, 3, 1, 4, 2, 5}, {0, 0}));
  EXPECT_TRUE(a.contiguous().is_same(a));
}

TEST(Views, TransposesCopyEveryElement) {
  // Past 1 MiB a transposed copy goes by tiles (16-bit ones at any size with AVX-512, by
  // 32 x 32 register tiles): every element size, sides that are not multiples of the tile,
  // a batch dim outside the transposed pair, the destination a strided view; checked
  // element by element against the source's own indexing (the raw bits, so NaN payloads
  // and -0 count).
  struct Case {
    DType dt;
    Shape shape;  // of the source before the transpose of its last two dims
  };
  for (const Case& c : {Case{kUInt8, {1037, 1100}}, Case{kBFloat16, {2051, 1033}}, Case{kFloat32, {3, 601, 333}},
                        Case{kInt64, {517, 300}}, Case{kBFloat16, {2048, 256}}, Case{kFloat16, {2, 64, 96}},
                        Case{kBFloat16, {33, 70}}, Case{kFloat16, {20, 17}}}) {
    const int64_t es = static_cast<int64_t>(element_size(c.dt));
    int64_t n = 1;
    for (int64_t d : c.shape) n *= d;
    Tensor src = empty(c.shape, TensorOptions(c.dt));
    auto* sb = static_cast<unsigned char*>(src.raw_data());
    for (int64_t i = 0; i < n * es; ++i) sb[i] = static_cast<unsigned char>((i * 2654435761u) >> 13);
    const Tensor view = src.transpose(-1, -2);
    const Tensor dense = view.contiguous();
    // and into a destination with padded rows (its rows are not contiguous with each other)
    Shape padded = view.sizes();
    padded.back() += 3;
    Tensor into = zeros(padded, TensorOptions(c.dt)).narrow(-1, 0, view.size(-1));
    into.copy_(view);
    const int64_t B = c.shape.size() == 3 ? c.shape[0] : 1, R = c.shape[c.shape.size() - 2], C = c.shape.back();
    const auto* db = static_cast<const unsigned char*>(dense.raw_data());
    const auto* ib = static_cast<const unsigned char*>(into.raw_data());
    int64_t wrong = 0;
    for (int64_t b = 0; b < B; ++b)
      for (int64_t col = 0; col < C; ++col)
        for (int64_t row = 0; row < R; ++row) {  // view[b][col][row] = src[b][row][col]
          const unsigned char* want = sb + ((b * R + row) * C + col) * es;
          wrong += std::memcmp(db + ((b * C + col) * R + row) * es, want, es) != 0;
          wrong += std::memcmp(ib + ((b * C + col) * (R + 3) + row) * es, want, es) != 0;
        }
    EXPECT_EQ(wrong, 0) << dtype_name(c.dt) << " " << shape_str(c.shape);
  }
}

TEST(Views, NarrowSliceSelect) {
  Tensor a = iota({4, 5});
  Tensor n = a.narrow(1, 1, 3);
  EXPECT_EQ(n.sizes(), (Shape{4, 3}));
  EXPECT_EQ(n.storage_offset(), 1);
  EXPECT_TRUE(all_close(n.select(0, 0), {1, 2, 3}, {0, 0}));
  EXPECT_TRUE(all_close(a.narrow(0, -1, 1), {15, 16, 17, 18, 19}, {0, 0}));
  TC_EXPECT_ERROR(a.narrow(1, 3, 3), "[narrow] start 3 + length 3 exceeds dimension size 5");
  TC_EXPECT_ERROR(a.narrow(2, 0, 1), "[narrow] dimension 2 out of range");
  // slice with a step, negative indices, and clamped bounds.
  Tensor s = a.slice(1, 0, 5, 2);
  EXPECT_EQ(s.sizes(), (Shape{4, 3}));
  EXPECT_EQ(s.strides(), (Shape{5, 2}));
  EXPECT_TRUE(all_close(s.select(0, 1), {5, 7, 9}, {0, 0}));
  EXPECT_TRUE(all_close(a.slice(1, -3, -1).select(0, 0), {2, 3}, {0, 0}));
  EXPECT_TRUE(all_close(a.slice(0, 1, 100, 2).select(1, 0), {5, 15}, {0, 0}));
  EXPECT_EQ(a.slice(1, 4, 2).numel(), 0);
  EXPECT_TRUE(all_close(a.slice(1, 1, 5, 3).select(0, 3), {16, 19}, {0, 0}));
  TC_EXPECT_ERROR(a.slice(1, 0, 5, 0), "[slice] step must be positive");
  TC_EXPECT_ERROR(scalar_tensor(1).slice(0, 0, 1), "[slice]");
  // select and operator[]
  EXPECT_TRUE(all_close(a.select(1, -1), {4, 9, 14, 19}, {0, 0}));
  EXPECT_TRUE(all_close(a[2], {10, 11, 12, 13, 14}, {0, 0}));
  EXPECT_EQ(a[2][3].dim(), 0);
  EXPECT_EQ(a[2][3].item<float>(), 13.0f);
  TC_EXPECT_ERROR(a.select(0, 4), "[select] index 4 is out of bounds for dimension 0 with size 4");
  TC_EXPECT_ERROR(a.select(0, -5), "[select] index -5");
  TC_EXPECT_ERROR(a.select(-3, 0), "[select] dimension -3 out of range");
}

TEST(Views, ExpandUnsqueezeSqueeze) {
  Tensor a = tensor({1.0, 2.0, 3.0}).reshape({3, 1});
  Tensor e = a.expand({2, 3, 4});
  EXPECT_EQ(e.sizes(), (Shape{2, 3, 4}));
  EXPECT_EQ(e.strides(), (Shape{0, 1, 0}));
  EXPECT_EQ(e.data_ptr<float>(), a.data_ptr<float>());
  EXPECT_TRUE(all_close(e.select(0, 1).select(0, 2), {3, 3, 3, 3}, {0, 0}));
  EXPECT_EQ(a.expand({-1, 5}).sizes(), (Shape{3, 5}));
  EXPECT_TRUE(equal(ones({2, 3}).expand_as(zeros({4, 2, 3})), ones({4, 2, 3})));
  TC_EXPECT_ERROR(a.expand({3, 4, 5}), "[expand] the expanded size 4 must match the existing size 3");
  TC_EXPECT_ERROR(a.expand({4}), "[expand] the number of sizes provided (1)");
  TC_EXPECT_ERROR(a.expand({-1, 3, 1}), "[expand]");
  // Materializing an expanded view copies the repeated values.
  Tensor c = e.contiguous();
  EXPECT_EQ(c.strides(), (Shape{12, 4, 1}));
  EXPECT_EQ(c.to_vector()[23], 3.0);
  // unsqueeze / squeeze
  Tensor b = iota({2, 3});
  EXPECT_EQ(b.unsqueeze(0).sizes(), (Shape{1, 2, 3}));
  EXPECT_EQ(b.unsqueeze(-1).sizes(), (Shape{2, 3, 1}));
  EXPECT_EQ(b.unsqueeze(1).sizes(), (Shape{2, 1, 3}));
  EXPECT_EQ(b.t().unsqueeze(1).sizes(), (Shape{3, 1, 2}));
  EXPECT_EQ(b.t().unsqueeze(1).data_ptr<float>(), b.data_ptr<float>());
  EXPECT_TRUE(all_close(b.t().unsqueeze(1), {0, 3, 1, 4, 2, 5}, {0, 0}));
  TC_EXPECT_ERROR(b.unsqueeze(3), "[unsqueeze] dimension 3 out of range");
  Tensor s = zeros({1, 3, 1, 2});
  EXPECT_EQ(s.squeeze().sizes(), (Shape{3, 2}));
  EXPECT_EQ(s.squeeze(0).sizes(), (Shape{3, 1, 2}));
  EXPECT_EQ(s.squeeze(-2).sizes(), (Shape{1, 3, 2}));
  EXPECT_EQ(s.squeeze(1).sizes(), (Shape{1, 3, 1, 2}));  // not size 1: unchanged
  EXPECT_EQ(zeros({1, 1}).squeeze().dim(), 0);
  TC_EXPECT_ERROR(s.squeeze(4), "[squeeze] dimension 4 out of range");
}

TEST(Views, WritesThroughViewsReachTheBase) {
  Tensor base = zeros({3, 4});
  base.t().select(0, 1).fill_(7);             // column 1
  base.slice(1, 2, 4).select(0, 2).fill_(5);  // row 2, cols 2..3
  base.view({12}).narrow(0, 0, 1).fill_(-1);  // element 0
  base.unsqueeze(0).squeeze(0).select(0, 0).select(0, 3).fill_(9);
  base.permute({1, 0}).slice(0, 0, 4, 3).select(1, 1).copy_(tensor({2.0, 3.0}));  // (1,0), (1,3)
  EXPECT_TRUE(all_close(base,
                        {-1, 7, 0, 9,  //
                         2, 7, 0, 3,   //
                         0, 7, 5, 5},  //
                        {0, 0}));
  // ... and writes to the base are visible in the views.
  Tensor v = base.t();
  base.fill_(1);
  EXPECT_TRUE(all_close(v, std::vector<double>(12, 1), {0, 0}));
  Tensor ex = base.select(0, 0).expand({5, 4});
  base.select(0, 0).select(0, 2).fill_(4);
  EXPECT_EQ(ex.select(0, 4).select(0, 2).item<float>(), 4.0f);
}

// libtorch's contiguous(MemoryFormat::ChannelsLast): same values and sizes, NHWC strides,
// a no-op when already channels-last, gradients flow; convolutions keep the layout.
TEST(Views, ChannelsLastMemoryFormat) {
  Tensor x = iota({2, 3, 4, 5});
  EXPECT_TRUE(x.is_contiguous(MemoryFormat::Contiguous));
  EXPECT_FALSE(x.is_contiguous(MemoryFormat::ChannelsLast));
  Tensor cl = x.contiguous(MemoryFormat::ChannelsLast);
  EXPECT_EQ(cl.sizes(), x.sizes());
  EXPECT_EQ(cl.strides(), (Shape{60, 1, 15, 3}));
  EXPECT_TRUE(cl.is_contiguous(MemoryFormat::ChannelsLast));
  EXPECT_FALSE(cl.is_contiguous());
  EXPECT_EQ(cl.to_vector(), x.to_vector());
  EXPECT_TRUE(cl.contiguous(MemoryFormat::ChannelsLast).is_same(cl));
  EXPECT_TRUE(cl.contiguous().is_contiguous());
  EXPECT_TRUE(iota({2, 1, 4, 5}).is_contiguous(MemoryFormat::ChannelsLast));  // C = 1: the same memory
  EXPECT_FALSE(iota({2, 3}).is_contiguous(MemoryFormat::ChannelsLast));
  TC_EXPECT_ERROR((void)iota({2, 3}).contiguous(MemoryFormat::ChannelsLast), "4-d");
  Tensor y = conv2d(cl, iota({4, 3, 3, 3}), Tensor(), {1, 1}, {1, 1});
  EXPECT_TRUE(y.is_contiguous(MemoryFormat::ChannelsLast));
  EXPECT_TRUE(all_close(y, conv2d(x, iota({4, 3, 3, 3}), Tensor(), {1, 1}, {1, 1}), {1e-4, 1e-5}));
  // Casts keep a dense layout (PyTorch's preserve_format), so autocast's bf16 copy of a
  // channels-last fp32 input is channels-last and the convolution stays on the NHWC path.
  Tensor cl_b = cl.to(kBFloat16);
  EXPECT_TRUE(cl_b.is_contiguous(MemoryFormat::ChannelsLast));
  EXPECT_TRUE(tc::testing::equal(cl_b, x.to(kBFloat16)));
  EXPECT_TRUE(x.to(kBFloat16).is_contiguous());
  Tensor t = iota({3, 5}).t();  // any dense permutation, not only NHWC
  EXPECT_EQ(t.to(kFloat64).strides(), t.strides());
  EXPECT_TRUE(iota({4, 6}).slice(1, 0, 6, 2).to(kFloat64).is_contiguous());  // not dense: row-major
  {
    amp::AutocastGuard ac(kCPU, kBFloat16);
    Tensor z = conv2d(cl, iota({4, 3, 3, 3}), Tensor(), {1, 1}, {1, 1});
    EXPECT_EQ(z.dtype(), kBFloat16);
    EXPECT_TRUE(z.is_contiguous(MemoryFormat::ChannelsLast));
  }
  EXPECT_TRUE(tc::testing::gradcheck(
      [](const std::vector<Tensor>& in) { return mul(in[0].contiguous(MemoryFormat::ChannelsLast), 2.0); },
      {tc::testing::uniform({2, 3, 2, 2}, kFloat64).requires_grad_()}, {1e-7, 1e-7}));
}

TEST(ViewGrads, ViewReshapeFlattenSqueeze) {
  const Tensor x = iota({2, 3});
  EXPECT_EQ(grad_through(x, [](const Tensor& t) { return t.view({3, 2}); }), (std::vector<double>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(grad_through(x, [](const Tensor& t) { return t.reshape({-1}); }), (std::vector<double>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(grad_through(x, [](const Tensor& t) { return t.flatten(); }), (std::vector<double>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(grad_through(x, [](const Tensor& t) { return t.unsqueeze(1).unsqueeze(0); }),
            (std::vector<double>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(grad_through(x.view({1, 2, 1, 3}), [](const Tensor& t) { return t.squeeze(); }),
            (std::vector<double>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(grad_through(x.view({1, 2, 1, 3}), [](const Tensor& t) { return t.squeeze(2); }),
            (std::vector<double>{1, 2, 3, 4, 5, 6}));
  // reshape of a transposed tensor copies; the gradient still lands in the right places.
  EXPECT_EQ(grad_through(x, [](const Tensor& t) { return t.t().reshape({6}); }),
            (std::vector<double>{1, 3, 5, 2, 4, 6}));
  EXPECT_EQ(grad_through(x, [](const Tensor& t) { return t.t().contiguous(); }),
            (std::vector<double>{1, 3, 5, 2, 4, 6}));
  EXPECT_EQ(grad_through(x, [](const Tensor& t) { return t.clone(); }), (std::vector<double>{1, 2, 3, 4, 5, 6}));
}

TEST(ViewGrads, TransposePermute) {
  const Tensor x = iota({2, 3});
  EXPECT_EQ(grad_through(x, [](const Tensor& t) { return t.t(); }), (std::vector<double>{1, 3, 5, 2, 4, 6}));
  EXPECT_EQ(grad_through(x, [](const Tensor& t) { return t.transpose(-1, 0); }),
            (std::vector<double>{1, 3, 5, 2, 4, 6}));
  // y = x.permute(2, 0, 1): y[a][b][c] = x[b][c][a]; dL/dy[a][b][c] = 1 + 6a + 3b + c.
  std::vector<double> expected(24);
  for (int b = 0; b < 2; ++b)
    for (int c = 0; c < 3; ++c)
      for (int a = 0; a < 4; ++a) expected[b * 12 + c * 4 + a] = 1 + 6 * a + 3 * b + c;
  EXPECT_EQ(grad_through(iota({2, 3, 4}), [](const Tensor& t) { return t.permute({2, 0, 1}); }), expected);
}

TEST(ViewGrads, NarrowSliceSelect) {
  EXPECT_EQ(grad_through(iota({4}), [](const Tensor& t) { return t.narrow(0, 1, 2); }),
            (std::vector<double>{0, 1, 2, 0}));
  EXPECT_EQ(grad_through(iota({7}), [](const Tensor& t) { return t.slice(0, 1, 7, 3); }),
            (std::vector<double>{0, 1, 0, 0, 2, 0, 0}));
  EXPECT_EQ(grad_through(iota({5}), [](const Tensor& t) { return t.slice(0, -3, -1); }),
            (std::vector<double>{0, 0, 1, 2, 0}));
  EXPECT_EQ(grad_through(iota({2, 3}), [](const Tensor& t) { return t.select(1, -1); }),
            (std::vector<double>{0, 0, 1, 0, 0, 2}));
  EXPECT_EQ(grad_through(iota({2, 3}), [](const Tensor& t) { return t[1]; }), (std::vector<double>{0, 0, 0, 1, 2, 3}));
  // A chain of views: x.t()[0:3:2, 0] = [x00, x02].
  EXPECT_EQ(grad_through(iota({2, 3}), [](const Tensor& t) { return t.t().slice(0, 0, 3, 2).select(1, 0); }),
            (std::vector<double>{1, 0, 2, 0, 0, 0}));
  // 16-bit leaves get 16-bit gradients through views.
  EXPECT_EQ(grad_through(iota({2, 3}, kBFloat16), [](const Tensor& t) { return t.slice(1, 1, 3).t(); }),
            (std::vector<double>{0, 1, 3, 0, 2, 4}));
  EXPECT_EQ(grad_through(iota({3}, kFloat16), [](const Tensor& t) { return t.select(0, 1); }),
            (std::vector<double>{0, 1, 0}));
}

TEST(ViewGrads, OverlappingViewsAccumulate) {
  // The same elements reached through two views: gradients add up.
  Tensor x = iota({4}).requires_grad_();
  Tensor y = mul(x.narrow(0, 0, 3), x.narrow(0, 1, 3));  // y_i = x_i x_{i+1}
  y.backward(ones({3}));
  // dL/dx0 = x1, dL/dx1 = x0 + x2, dL/dx2 = x1 + x3, dL/dx3 = x2
  EXPECT_TRUE(all_close(x.grad(), {1, 2, 4, 2}, {0, 0}));
}

// Several slices of one non-leaf (attention's q, k, v from one projection): the engine
// adds the later slices' gradients into the buffer already collected for the base, in
// place (src/autograd/nodes.h). Exact values for every order and overlap, and the in-place
// path is really taken.
TEST(ViewGrads, SlicesOfOneTensorAddIntoOneBuffer) {
  Tensor x = iota({3, 2, 4}).requires_grad_();
  profiler::Profile prof;
  Tensor base = mul(x, 1.0);  // a non-leaf: its gradient buffer lives in the engine
  Tensor q = base.select(0, 0), k = base.select(0, 1), v = base.select(0, 2), o = base.narrow(0, 1, 2);
  Tensor loss = add(add(mul(q, 2.0).sum(), mul(k, 3.0).sum()), add(mul(v, v).sum(), o.sum()));
  loss.backward();
  prof.stop();
  std::vector<double> expected(24);
  for (int i = 0; i < 24; ++i) {
    const int s = i / 8;
    expected[i] = (s == 0 ? 2.0 : s == 1 ? 3.0 + 1.0 : 2.0 * i + 1.0);
  }
  EXPECT_TRUE(all_close(x.grad(), expected, {0, 0}));
  int64_t into_buffer = 0;
  for (const profiler::OpStat& st : prof.key_averages())
    if (st.name.find("(into buffer)") != std::string::npos) into_buffer += st.calls;
  EXPECT_GE(into_buffer, 3);  // all but the first of the four slices
  // And through gradcheck (float64), with a non-contiguous base.
  EXPECT_TRUE(tc::testing::gradcheck(
      [](const std::vector<Tensor>& in) {
        Tensor b = mul(in[0], 1.5).t();  // (4, 3), non-contiguous
        return add(mul(b.select(1, 0), b.select(1, 2)), b.narrow(1, 1, 1).squeeze(1));
      },
      {tc::testing::uniform({3, 4}, kFloat64).requires_grad_()}, {1e-7, 1e-7}));
}

// q, k and v as selects of one permuted projection, k unused: the engine assembles the
// projection's gradient from the q and v parts alone (no zero-filled tensor per slice,
// no additions), zero-fills only the k part it never wrote, and lays the buffer out as the
// projection so the permute's backward hands on a contiguous gradient. The allocator is
// primed with NaN so that a part left unwritten shows.
TEST(ViewGrads, SlicesAssembleOneGradientInTheInputsLayout) {
  const Shape sz{8, 64, 3, 4, 64};  // (B, T, 3, H, hd): 1.5 MiB, from the allocator's cache
  const Tensor a = testing::uniform({8, 4, 64, 64}, kFloat32, -1, 1, 1),
               c = testing::uniform({8, 4, 64, 64}, kFloat32, -1, 1, 2);
  Tensor x = zeros(sz).requires_grad_();
  for (int round = 0; round < 2; ++round) {
    x.set_grad(Tensor());
    profiler::Profile prof;
    const Tensor heads = mul(x, 1.0).permute({2, 0, 3, 1, 4});  // (3, B, H, T, hd) views, no copy
    const Tensor q = heads.select(0, 0), v = heads.select(0, 2);
    const Tensor loss = add(mul(q, a).sum(), mul(v, c).sum());
    { const Tensor junk = full({8 * 64 * 3 * 4 * 64}, std::nan("")); }  // the block the buffer gets
    loss.backward();
    prof.stop();
    Tensor expected = zeros(sz);  // base[b][t][0][h][e] is q[b][h][t][e]
    expected.select(2, 0).copy_(a.permute({0, 2, 1, 3}));
    expected.select(2, 2).copy_(c.permute({0, 2, 1, 3}));
    EXPECT_TRUE(equal(x.grad(), expected));
    EXPECT_TRUE(x.grad().is_contiguous());
    int64_t into_buffer = 0, other = 0;
    for (const profiler::OpStat& st : prof.key_averages()) {
      if (st.name == "select backward (into buffer)") into_buffer += st.calls;
      if (st.name == "select backward" || st.name == "clone" || st.name == "contiguous") other += st.calls;
    }
    EXPECT_EQ(into_buffer, 2);
    EXPECT_EQ(other, 0);
  }
}

TEST(ViewGrads, Expand) {
  // Needs sum_to_size (reductions). y[a][i][k] = x[i]; dL/dy = 1 + 12a + 4i + k.
  std::vector<double> expected(3, 0);
  for (int a = 0; a < 2; ++a)
    for (int i = 0; i < 3; ++i)
      for (int k = 0; k < 4; ++k) expected[i] += 1 + 12 * a + 4 * i + k;
  EXPECT_EQ(grad_through(iota({3, 1}), [](const Tensor& t) { return t.expand({2, 3, 4}); }), expected);
  EXPECT_EQ(grad_through(iota({3}), [](const Tensor& t) { return t.expand({2, 3}); }), (std::vector<double>{5, 7, 9}));
}

TEST(ViewGrads, ViewsOfNonLeafs) {
  Tensor x = iota({2, 3}).requires_grad_();
  Tensor y = mul(x, 3.0);
  Tensor z = y.t().select(0, 2);  // [3 x02, 3 x12]
  EXPECT_FALSE(z.is_leaf());
  z.backward(tensor({1.0, 10.0}));
  EXPECT_TRUE(all_close(x.grad(), {0, 0, 3, 0, 0, 30}, {0, 0}));
}

}  // namespace
}  // namespace tc
