// All-reduce time against message size through tc::dist (what DistributedDataParallel
// uses), and the least-squares fit of the ring model for p ranks:
//   t(n) = 2(p-1) * alpha + 2(p-1)/p * n / beta
// alpha: per-message latency, beta: bandwidth. Run under mpirun, e.g.
//   mpirun -np 2 ./bench_allreduce                (this machine: shared memory or loopback TCP)
//   tests/dist/two_hosts.sh -- ./bench_allreduce  (two network namespaces over a veth pair)
// Prints a table and one machine-readable line: "fit: p=2 alpha_us=... beta_GBps=...".
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "tensorcast/dist/process_group.h"
#include "tensorcast/factories.h"

int main(int argc, char** argv) {
  // --ordered: all_reduce_ordered_async (what DistributedDataParallel uses) instead of
  // MPI's own all-reduce.
  const bool ordered = argc > 1 && std::string(argv[1]) == "--ordered";
  tc::dist::init();
  const int p = tc::dist::world_size();
  const bool lead = tc::dist::rank() == 0;
  if (lead) std::printf("%12s %12s %12s\n", "bytes", "median_us", "algbw_GB/s");
  std::vector<double> xs, ys;
  for (int64_t bytes = 4; bytes <= (int64_t{64} << 20); bytes *= 4) {
    tc::Tensor t = tc::ones({bytes / 4});
    const int reps = bytes <= (1 << 16) ? 200 : bytes <= (4 << 20) ? 30 : 8;
    std::vector<double> us;
    for (int i = 0; i < reps + 2; ++i) {
      tc::dist::barrier();
      const double t0 = tc::dist::now();
      if (ordered)
        tc::dist::all_reduce_ordered_async(t)->wait();
      else
        tc::dist::all_reduce(t);
      if (i >= 2) us.push_back(1e6 * (tc::dist::now() - t0));
    }
    std::sort(us.begin(), us.end());
    const double med = us[us.size() / 2];
    if (lead) std::printf("%12lld %12.1f %12.3f\n", static_cast<long long>(bytes), med, bytes / med * 1e-3);
    xs.push_back(static_cast<double>(bytes));
    ys.push_back(med);
  }
  // Least squares of t = a + b * n, weighted by 1/t so small and large messages count alike.
  double sw = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    const double w = 1.0 / (ys[i] * ys[i]);
    sw += w, sx += w * xs[i], sy += w * ys[i], sxx += w * xs[i] * xs[i], sxy += w * xs[i] * ys[i];
  }
  const double b = (sw * sxy - sx * sy) / (sw * sxx - sx * sx), a = (sy - b * sx) / sw;
  const double alpha_us = a / (2.0 * (p - 1));
  const double beta_GBps = (2.0 * (p - 1) / p) / b * 1e-3;  // b: us per byte
  if (lead) std::printf("fit: p=%d alpha_us=%.2f beta_GBps=%.3f\n", p, alpha_us, beta_GBps);
  tc::dist::finalize();
  return 0;
}
