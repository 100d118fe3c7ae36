// tensorcast's own AMX kernels (backend/cpu/x86/matmul_amx.h: products by a weight;
// weight_grad.h: weight gradients) against oneDNN, in one process, alternating: on a host
// whose AMX unit is shared with another tenant the rate drifts 2-4x over minutes, so only
// side-by-side figures compare. Plain C++ (no Google Benchmark); internal headers, hence the
// src/ include path.
//
//   bench_amx_ab products [KINDS]
//                           each product of gpt d=256 (2048 tokens) and d=512 (1024) training
//                           (the weight written between products, as an optimizer step
//                           does: its tiles packed each time), and of inference (the weight
//                           unchanged: its tiles kept) at batch 1 and 16 and mlp-large B=1024:
//                           best of 60 runs each way, 4 at a time alternating, and the
//                           largest difference between the two results; KINDS: only the
//                           products of these kinds (f, d, w, i: see Product below)
//   bench_amx_ab step [W L T B STEPS]
//                           gpt bf16 training steps (AdamW, autocast), the kernels on and off
//                           on alternate steps: medians and fastest of each (default 256 4 128 16 40)
//   bench_amx_ab infer [W L T B PASSES]
//                           the same for gpt bf16 forward passes (no gradients; default
//                           256 4 128 1 400)
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "backend/cpu/onednn/matmul.h"
#include "backend/cpu/x86/matmul_amx.h"
#include "backend/cpu/x86/weight_grad.h"
#include "tensorcast/convert.h"
#include "tensorcast/tensorcast.h"

namespace {

using namespace tc;

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

void use_own_kernels(bool on) {
  cpu::set_matmul_amx(on);
  cpu::set_weight_grad_amx(on);
}

struct Product {
  const char* name;
  int64_t m, k, n;
  // 'f': x w^T + bias (training's forward), 'd': g w (input gradient), 'w': g^T x into
  // float32 (weight gradient), 'i': x w^T + bias with w unchanged between products (inference)
  char kind;
};

void products(const char* kinds) {
  const std::vector<Product> shapes = {{"d256 qkv", 2048, 256, 768, 'f'},     {"d256 proj", 2048, 256, 256, 'f'},
                                       {"d256 fc", 2048, 256, 1024, 'f'},     {"d256 fc2", 2048, 1024, 256, 'f'},
                                       {"d256 dX qkv", 2048, 768, 256, 'd'},  {"d256 dX fc", 2048, 1024, 256, 'd'},
                                       {"d256 dX fc2", 2048, 256, 1024, 'd'}, {"d256 dW qkv", 768, 2048, 256, 'w'},
                                       {"d256 dW fc", 1024, 2048, 256, 'w'},  {"d512 fc2", 1024, 2048, 512, 'f'},
                                       {"d512 dX fc", 1024, 2048, 512, 'd'},  {"d512 dX qkv", 1024, 1536, 512, 'd'},
                                       {"d512 dW proj", 512, 1024, 512, 'w'}, {"d512 dW qkv", 1536, 1024, 512, 'w'},
                                       {"d512 dW fc", 2048, 1024, 512, 'w'},  {"d512 dW fc2", 512, 1024, 2048, 'w'},
                                       {"mlpL dW fc", 4096, 1024, 1024, 'w'}, {"mlpL dW fc2", 1024, 1024, 4096, 'w'},
                                       {"b1 qkv", 128, 256, 768, 'i'},        {"b1 proj", 128, 256, 256, 'i'},
                                       {"b1 fc", 128, 256, 1024, 'i'},        {"b1 fc2", 128, 1024, 256, 'i'},
                                       {"b16 fc", 2048, 256, 1024, 'i'},      {"b16 fc2", 2048, 1024, 256, 'i'},
                                       {"mlpL fc", 1024, 1024, 4096, 'i'},    {"mlpL fc2", 1024, 4096, 1024, 'i'}};
  std::printf(
      "| product | m x k x n | oneDNN ms | tensorcast's kernel ms | speed-up | max difference "
      "|\n|---|---|---|---|---|---|\n");
  for (const Product& s : shapes) {
    if (kinds != nullptr && std::string(kinds).find(s.kind) == std::string::npos) continue;
    const bool weight_grad = s.kind == 'w';
    // a (m, k) and b (k, n) as the layers hold them: the forward's b is w^T, the weight
    // gradient's a is g^T (g: tokens x out).
    const Tensor a = weight_grad ? randn({s.k, s.m}).to(kBFloat16).t() : randn({s.m, s.k}).to(kBFloat16);
    const bool forward = s.kind == 'f' || s.kind == 'i';
    const Tensor b = forward ? randn({s.n, s.k}).to(kBFloat16).t() : randn({s.k, s.n}).to(kBFloat16);
    const Tensor bias = forward ? randn({s.n}).to(kBFloat16) : Tensor();
    const DType out = weight_grad ? kFloat32 : kBFloat16;
    const Tensor c[2] = {empty({s.m, s.n}, out), empty({s.m, s.n}, out)};
    double best[2] = {1e9, 1e9};
    for (int round = 0; round < 15; ++round)
      for (int own = 0; own < 2; ++own) {
        use_own_kernels(own == 1);
        for (int i = 0; i < 4; ++i) {
          if (s.kind != 'i') increment_version(b);  // an optimizer step wrote it
          const auto t0 = std::chrono::steady_clock::now();
          cpu::matmul_into(a, b, bias, c[own], "bench_amx_ab");
          best[own] = std::min(best[own], ms_since(t0));
        }
      }
    use_own_kernels(true);
    const std::vector<double> x = c[0].to_vector(), y = c[1].to_vector();
    double diff = 0;
    for (size_t i = 0; i < x.size(); ++i) diff = std::max(diff, std::fabs(x[i] - y[i]));
    std::printf("| %s | %ld x %ld x %ld | %.3f | %.3f | %.2f | %.2g |\n", s.name, static_cast<long>(s.m),
                static_cast<long>(s.k), static_cast<long>(s.n), best[0], best[1], best[0] / best[1], diff);
  }
}

void step(int64_t width, int64_t layers, int64_t context, int64_t batch, int steps, bool inference) {
  manual_seed(0);
  amp::set_autocast_cache_keeps_training_copies(true);  // as tensorcast bench
  amp::set_autocast_cache_across_regions(true);
  nn::GPT gpt(nn::GPTConfig().layers(layers).width(width).heads(width / 64).context(context));
  optim::AdamW opt(gpt->parameters(), optim::AdamWOptions(1e-4));
  if (inference) gpt->eval();
  const Tensor x = randint(0, 256, {batch, context}), y = randint(0, 256, {batch * context});
  std::vector<double> times[2];
  for (int s = 0; s < 2 * steps + 4; ++s) {  // 4 warm-up steps
    const int own = s % 2;
    use_own_kernels(own == 1);
    const auto t0 = std::chrono::steady_clock::now();
    if (inference) {
      NoGradGuard no_grad;
      amp::AutocastGuard autocast(kCPU, kBFloat16);
      (void)gpt(x).sum().item_double();
    } else {
      opt.zero_grad();
      Tensor loss;
      {
        amp::AutocastGuard autocast(kCPU, kBFloat16);
        loss = cross_entropy(gpt(x).view({batch * context, 256}).to(kFloat32), y);
      }
      loss.backward();
      opt.step();
      (void)loss.item_double();
    }
    if (s >= 4) times[own].push_back(ms_since(t0));
  }
  use_own_kernels(true);
  for (auto& t : times) std::sort(t.begin(), t.end());
  const double med[2] = {times[0][times[0].size() / 2], times[1][times[1].size() / 2]};
  std::printf(
      "gpt width %ld, %ld layers, context %ld, batch %ld, bf16 %s, %d each way, %d threads:\n"
      "  oneDNN only: median %.2f ms, fastest %.2f\n  own kernels: median %.2f ms, fastest %.2f\n"
      "  ratio: medians %.3f, fastest %.3f\n",
      static_cast<long>(width), static_cast<long>(layers), static_cast<long>(context), static_cast<long>(batch),
      inference ? "forward pass" : "step", steps, get_num_threads(), med[0], times[0][0], med[1], times[1][0],
      med[1] / med[0], times[1][0] / times[0][0]);
}

}  // namespace

int main(int argc, char** argv) {
  const std::string what = argc > 1 ? argv[1] : "";
  if (!tc::cpu_features().amx_bf16) {
    std::printf("bench_amx_ab: this CPU has no AMX-BF16; the kernels it compares do not run here\n");
    return 0;
  }
  try {
    if (what == "products") {
      products(argc > 2 ? argv[2] : nullptr);
    } else if (what == "step" || what == "infer") {
      const bool inference = what == "infer";
      auto arg = [&](int i, int64_t d) { return argc > i ? std::atoll(argv[i]) : d; };
      step(arg(2, 256), arg(3, 4), arg(4, 128), arg(5, inference ? 1 : 16),
           static_cast<int>(arg(6, inference ? 400 : 40)), inference);
    } else {
      std::fprintf(stderr, "usage: bench_amx_ab products | step|infer [width layers context batch steps]\n");
      return 2;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_amx_ab: %s\n", e.what());
    return 1;
  }
  return 0;
}
