// The backend interface (src/backend/kernels.h): the ops reach a device only through its
// kernel table, a kernel a device lacks is a named error before anything reads the
// tensor's memory, and the CPU registers every kernel.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "backend/kernels.h"
#include "backend/registry.h"
#include "common/testing.h"
#include "tensorcast/tensorcast.h"

namespace tc {
namespace {

// Whether this build compiled a backend in for the device type (the registry's names).
bool has_backend(const char* name) {
  const std::string names = backend::registry().backend_names();
  return names.find(name) != std::string::npos;
}

TEST(Backend, AKernelTheDeviceLacksIsANamedError) {
  backend::Kernels k;
  k.set_device("meta");
  EXPECT_FALSE(static_cast<bool>(k.softmax_forward));
  const Tensor x = ones({2, 3});
  EXPECT_TRUE(testing::throws_with([&] { k.softmax_forward(x, x, 1, false); },
                                   {"[softmax_forward]", "no kernel for meta tensors", "cpu"}));
  EXPECT_TRUE(testing::throws_with([&] { k.map<fn::Exp>()(x, x, "exp", fn::Exp{}, false); },
                                   {"[elementwise Exp]", "no kernel for meta tensors"}));
  EXPECT_EQ(x.to_vector(), std::vector<double>(6, 1.0));
}

// The kernels (by name) and elementwise functors a table lacks, but the ones in `absent`.
std::string missing_kernels(const backend::Kernels& k, const std::set<std::string>& absent) {
  std::string missing;
#define TC_KERNEL(name, ret, params) \
  if (!k.name && !absent.contains(#name)) missing += #name " ";
#include "backend/kernels.def"
#undef TC_KERNEL
#define TC_CHECK_MAP(F) \
  if (!k.map<fn::F>()) missing += #F " ";
  TC_UNARY_FNS(TC_CHECK_MAP)
  TC_BINARY_FNS(TC_CHECK_MAP)
  TC_TERNARY_FNS(TC_CHECK_MAP)
#undef TC_CHECK_MAP
  return missing;
}

// The CPU is the reference backend: every kernel of kernels.def and every elementwise
// functor, but transfer (registered by the device on the other side of a copy) and the
// steps that keep the scaler's and optimizers' state in device memory.
TEST(Backend, TheCpuRegistersEveryKernel) {
  const backend::Kernels& k = backend::kernels_for(Device(kCPU));
  EXPECT_EQ(missing_kernels(k, {"transfer", "amp_update_scale_", "fused_sgd_step", "fused_adam_step"}), "");
  EXPECT_FALSE(static_cast<bool>(k.transfer));
  EXPECT_FALSE(static_cast<bool>(k.fused_adam_step));
}

// The meta device runs every op: every kernel but the two fused ones whose composition
// allocates the same (the CPU's AMX weight-and-bias gradient, the bf16 attention backward,
// which runs only after its forward, declined on meta).
TEST(Backend, TheMetaDeviceRegistersEveryKernel) {
  const backend::Kernels& k = backend::kernels_for(Device(kMeta));
  EXPECT_EQ(missing_kernels(k, {"weight_and_bias_grads", "sdpa_backward_bf16"}), "");
}

// Where the CUDA backend is compiled in, it has a kernel for every elementwise functor (a
// functor missing there would fail only on a GPU, at run time) and every kernel but the
// ones a front end composes without (listed here).
TEST(Backend, TheCudaBackendRegistersEveryFunctor) {
  if (!has_backend("cuda")) GTEST_SKIP() << "this build has no CUDA backend";
  const backend::Kernels& k = backend::kernels_for(Device(kCUDA, 0));
  EXPECT_EQ(missing_kernels(
                k, {"add_layer_norm_forward", "weight_and_bias_grads", "activation_value", "activation_and_derivative",
                    "sdpa_forward", "sdpa_backward", "sdpa_forward_bf16", "sdpa_backward_bf16"}),
            "");
  EXPECT_FALSE(static_cast<bool>(k.sdpa_forward));  // the front end runs the products
}

// A tensor on a device no backend of this build runs (host memory labelled cuda:0 through
// from_blob) is never read or written: an op that allocates its result there is refused by
// the allocator, which finds no memory for the device, and one that writes in place by its
// kernel, naming it.
TEST(Backend, ADeviceWithoutABackendIsRefused) {
  if (has_backend("cuda")) GTEST_SKIP() << "this build has a CUDA backend";
  std::vector<float> host(6, 1.0f);
  const Tensor x = from_blob(host.data(), {2, 3}, TensorOptions(Device(kCUDA, 0)));
  const std::string no_device =
      "[allocator] device cuda:0 is not available: this build has no backend for it (backends: cpu, meta)";
  EXPECT_TRUE(testing::throws_with([&] { (void)softmax(x, -1); }, {no_device}));
  EXPECT_TRUE(testing::throws_with([&] { (void)exp(x); }, {no_device}));
  EXPECT_TRUE(testing::throws_with([&] { (void)matmul(x, x.t()); }, {no_device}));
  const std::string why = "no backend of this build runs tensors on this device (backends: cpu, meta)";
  EXPECT_TRUE(testing::throws_with([&] { (void)Tensor(x).fill_(2.0); }, {"[fill] " + why}));
  EXPECT_TRUE(testing::throws_with([&] { (void)Tensor(x).copy_(x); }, {"[copy_into] " + why}));
  EXPECT_EQ(host, std::vector<float>(6, 1.0f));
}

}  // namespace
}  // namespace tc
