// tc_dispatch_overhead: the cost of one tiny op call (ns), to show that the autocast layer
// of the dispatcher costs nothing measurable when autocast is off.
//   ./build/tools/tc_dispatch_overhead [iterations]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "tensorcast/tensorcast.h"

namespace {

// Best of several timed loops: the minimum is the least noisy estimate on a shared machine.
template <class F>
double ns_per_call(long iters, F f) {
  double best = 1e30;
  for (int rep = 0; rep < 7; ++rep) {
    auto t0 = std::chrono::steady_clock::now();
    for (long i = 0; i < iters; ++i) f();
    auto t1 = std::chrono::steady_clock::now();
    best = std::min(best, std::chrono::duration<double, std::nano>(t1 - t0).count() / double(iters));
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  const long iters = argc > 1 ? std::atol(argv[1]) : 200000;
  tc::set_num_threads(1);
  tc::Tensor a = tc::ones({4});
  tc::Tensor b = tc::ones({4});
  tc::Tensor m = tc::ones({2, 2});
  volatile double sink = 0;
  std::printf("neg(4 floats):      %.1f ns/call\n", ns_per_call(iters, [&] { sink = sink + tc::neg(a).numel(); }));
  std::printf("add(4, 4 floats):   %.1f ns/call\n", ns_per_call(iters, [&] { sink = sink + tc::add(a, b).numel(); }));
  std::printf("mul(4 floats, 2.0): %.1f ns/call\n", ns_per_call(iters, [&] { sink = sink + tc::mul(a, 2.0).numel(); }));
  std::printf("sum(4 floats):      %.1f ns/call\n", ns_per_call(iters, [&] { sink = sink + tc::sum(a).numel(); }));
  std::printf("matmul(2x2, 2x2):   %.1f ns/call\n",
              ns_per_call(iters / 4, [&] { sink = sink + tc::matmul(m, m).numel(); }));
  return 0;
}
