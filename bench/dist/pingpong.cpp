// Point-to-point and all-reduce latency/bandwidth with the plain MPI C API (no tensorcast), and
// least-squares fits of the alpha-beta model t(n) = alpha + n / beta.
//
//   mpicxx -O2 -std=c++20 -o pingpong bench/dist/pingpong.cpp
//   mpirun -np 2 --mca btl self,tcp ./pingpong            # loopback TCP
//   mpirun -np 2 --mca btl self,vader ./pingpong          # shared memory
//   tests/dist/two_hosts.sh -- ./pingpong                 # two namespaces over a veth pair
//
// Ranks 0 and 1 ping-pong messages of 8 B ... 64 MiB (one-way time = round trip / 2, median
// of the repetitions); then every rank takes part in MPI_Allreduce (MPI_SUM) of fp32 buffers
// of the same sizes (time of a repetition = the slowest rank's, after a barrier; median).
// The fit minimizes the relative error sum(((t_i - alpha - n_i/beta) / t_i)^2), so that 8 B and
// 64 MiB count alike. For the all-reduce it also gives the per-hop figures of the ring model
// t = 2(p-1) alpha + 2(p-1)/p n/beta that docs/distributed.md uses.
//
// Options: --max-bytes N (default 64 MiB), --budget-mib M (bytes moved per size, default 256:
// sets the repetitions, clamped to [--min-reps 5, --max-reps 1000]).
// Machine-readable lines: "pt2pt bytes=... us=... GBps=...", "allreduce p=... bytes=...",
// "fit pt2pt alpha_us=... beta_GBps=...", "fit allreduce p=... alpha_us=... beta_GBps=...
// ring_alpha_us=... ring_beta_GBps=...", and the same with "_split": alpha fitted on n <= 32 KiB,
// beta on n >= 1 MiB (one line fits the measured curve poorly where caches and socket buffers
// bend it; the split figures are the ones to use for MiB-sized gradient buckets).
// The plain C API: keep the deprecated C++ bindings (and their warnings) out.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

struct Options {
  int64_t max_bytes = int64_t{64} << 20;
  int64_t budget = int64_t{256} << 20;
  int min_reps = 5;
  int max_reps = 1000;
};

struct Point {
  int64_t bytes;
  double us;  // median
};

struct Fit {
  double alpha_us, beta_GBps, max_rel_err;
};

std::vector<int64_t> sizes(int64_t max_bytes) {
  std::vector<int64_t> out;
  for (int64_t n = 8; n <= max_bytes; n *= 4) out.push_back(n);
  if (out.empty() || out.back() != max_bytes) out.push_back(max_bytes);
  return out;
}

int reps_for(const Options& o, int64_t bytes) {
  return static_cast<int>(std::clamp<int64_t>(o.budget / bytes, o.min_reps, o.max_reps));
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

// Least squares of t = a + c * n weighted by 1/t^2 (relative error); beta = 1/c.
Fit fit(const std::vector<Point>& pts) {
  double sw = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (const Point& p : pts) {
    const double x = static_cast<double>(p.bytes), y = p.us, w = 1.0 / (y * y);
    sw += w, sx += w * x, sy += w * y, sxx += w * x * x, sxy += w * x * y;
  }
  const double c = (sw * sxy - sx * sy) / (sw * sxx - sx * sx);  // us per byte
  const double a = (sy - c * sx) / sw;
  double worst = 0;
  for (const Point& p : pts) worst = std::max(worst, std::abs(a + c * static_cast<double>(p.bytes) - p.us) / p.us);
  return {a, 1e-3 / c, worst};  // bytes/us = MB/s; 1/c * 1e-3 = GB/s
}

// Prints "fit NAME ..." (all sizes) and "fit NAME_split ..." (alpha from the small messages,
// beta from the large ones, where a single line fits the curve poorly: caches, socket buffers).
// ring_p > 0: an all-reduce on ring_p ranks, also converted to the ring model's per-hop figures.
void report(const char* name, const std::vector<Point>& pts, int ring_p) {
  std::vector<Point> small, large;
  for (const Point& q : pts) {
    if (q.bytes <= (32 << 10)) small.push_back(q);
    if (q.bytes >= (1 << 20)) large.push_back(q);
  }
  auto line = [&](const char* suffix, double alpha_us, double beta_GBps, double err) {
    std::printf("fit %s%s", name, suffix);
    if (ring_p > 0) std::printf(" p=%d", ring_p);
    std::printf(" alpha_us=%.3f beta_GBps=%.4f", alpha_us, beta_GBps);
    if (err >= 0) std::printf(" max_rel_err=%.2f", err);
    if (ring_p > 0)
      std::printf(" ring_alpha_us=%.3f ring_beta_GBps=%.4f", alpha_us / (2.0 * (ring_p - 1)),
                  beta_GBps * 2.0 * (ring_p - 1) / ring_p);
    std::printf("\n");
  };
  const Fit all = fit(pts);
  line("", all.alpha_us, all.beta_GBps, all.max_rel_err);
  if (small.size() >= 2 && large.size() >= 2) line("_split", fit(small).alpha_us, fit(large).beta_GBps, -1);
}

std::string human(int64_t n) {
  char buf[32];
  if (n >= (1 << 20))
    std::snprintf(buf, sizeof buf, "%lld MiB", static_cast<long long>(n >> 20));
  else if (n >= (1 << 10))
    std::snprintf(buf, sizeof buf, "%lld KiB", static_cast<long long>(n >> 10));
  else
    std::snprintf(buf, sizeof buf, "%lld B", static_cast<long long>(n));
  return buf;
}

void print_table(const char* what, const char* time_label) {
  std::printf("\n%s\n%10s %10s %12s %14s %10s\n", what, "size", "bytes", time_label, "GB/s", "reps");
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, p = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &p);
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has = i + 1 < argc;
    if (a == "--max-bytes" && has)
      o.max_bytes = std::atoll(argv[++i]);
    else if (a == "--budget-mib" && has)
      o.budget = std::atoll(argv[++i]) << 20;
    else if (a == "--min-reps" && has)
      o.min_reps = std::atoi(argv[++i]);
    else if (a == "--max-reps" && has)
      o.max_reps = std::atoi(argv[++i]);
    else {
      if (rank == 0) std::fprintf(stderr, "pingpong: unknown argument %s\n", argv[i]);
      MPI_Abort(MPI_COMM_WORLD, 2);
    }
  }
  if (p < 2) {
    if (rank == 0) std::fprintf(stderr, "pingpong: needs at least 2 ranks (mpirun -np 2)\n");
    MPI_Finalize();
    return 2;
  }
  if (o.max_bytes < 8 || o.min_reps < 1 || o.max_reps < o.min_reps) MPI_Abort(MPI_COMM_WORLD, 2);

  char host[MPI_MAX_PROCESSOR_NAME];
  int len = 0;
  MPI_Get_processor_name(host, &len);
  std::vector<char> hosts(static_cast<size_t>(p) * MPI_MAX_PROCESSOR_NAME);
  MPI_Gather(host, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, hosts.data(), MPI_MAX_PROCESSOR_NAME, MPI_CHAR, 0, MPI_COMM_WORLD);
  if (rank == 0) {
    std::printf("ranks=%d", p);
    for (int r = 0; r < p; ++r) std::printf(" rank%d=%s", r, &hosts[static_cast<size_t>(r) * MPI_MAX_PROCESSOR_NAME]);
    std::printf("\n");
  }

  const std::vector<int64_t> ns = sizes(o.max_bytes);
  std::vector<char> buf(static_cast<size_t>(o.max_bytes), 1);
  constexpr int kWarmup = 2;

  // --- point to point: ranks 0 and 1 ---
  std::vector<Point> pt;
  if (rank == 0) print_table("ping-pong between ranks 0 and 1 (one-way time = round trip / 2)", "one-way_us");
  for (const int64_t n : ns) {
    const int reps = reps_for(o, n);
    std::vector<double> us;
    MPI_Barrier(MPI_COMM_WORLD);
    for (int i = 0; i < reps + kWarmup; ++i) {
      if (rank > 1) continue;
      const double t0 = MPI_Wtime();
      if (rank == 0) {
        MPI_Send(buf.data(), static_cast<int>(n), MPI_BYTE, 1, 0, MPI_COMM_WORLD);
        MPI_Recv(buf.data(), static_cast<int>(n), MPI_BYTE, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      } else {
        MPI_Recv(buf.data(), static_cast<int>(n), MPI_BYTE, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Send(buf.data(), static_cast<int>(n), MPI_BYTE, 0, 0, MPI_COMM_WORLD);
      }
      if (i >= kWarmup) us.push_back(0.5e6 * (MPI_Wtime() - t0));
    }
    if (rank == 0) {
      const double med = median(us);
      pt.push_back({n, med});
      std::printf("%10s %10lld %12.2f %14.4f %10d\n", human(n).c_str(), static_cast<long long>(n), med,
                  static_cast<double>(n) / med * 1e-3, reps);
      std::fflush(stdout);
    }
  }

  // --- all-reduce of fp32 over all ranks ---
  std::vector<Point> ar;
  if (rank == 0) print_table("MPI_Allreduce (fp32, sum) over all ranks (slowest rank per repetition)", "time_us");
  std::vector<float> send(static_cast<size_t>(o.max_bytes / 4), 1.0f), recv(send.size(), 0.0f);
  bool ok = true;
  for (const int64_t n : ns) {
    const int count = static_cast<int>(std::max<int64_t>(n / 4, 1));
    const int reps = reps_for(o, n);
    std::vector<double> us(static_cast<size_t>(reps + kWarmup));
    for (int i = 0; i < reps + kWarmup; ++i) {
      MPI_Barrier(MPI_COMM_WORLD);
      const double t0 = MPI_Wtime();
      MPI_Allreduce(send.data(), recv.data(), count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      us[static_cast<size_t>(i)] = 1e6 * (MPI_Wtime() - t0);
    }
    ok = ok && recv[0] == static_cast<float>(p) && recv[static_cast<size_t>(count) - 1] == static_cast<float>(p);
    MPI_Allreduce(MPI_IN_PLACE, us.data(), static_cast<int>(us.size()), MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    if (rank == 0) {
      const double med = median(std::vector<double>(us.begin() + kWarmup, us.end()));
      const int64_t bytes = int64_t{count} * 4;
      ar.push_back({bytes, med});
      std::printf("%10s %10lld %12.2f %14.4f %10d\n", human(bytes).c_str(), static_cast<long long>(bytes), med,
                  static_cast<double>(bytes) / med * 1e-3, reps);
      std::fflush(stdout);
    }
  }
  int all_ok = ok ? 1 : 0;
  MPI_Allreduce(MPI_IN_PLACE, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);

  if (rank == 0) {
    std::printf("\n");
    for (const Point& q : pt)
      std::printf("pt2pt bytes=%lld us=%.3f GBps=%.5f\n", static_cast<long long>(q.bytes), q.us,
                  static_cast<double>(q.bytes) / q.us * 1e-3);
    for (const Point& q : ar)
      std::printf("allreduce p=%d bytes=%lld us=%.3f GBps=%.5f\n", p, static_cast<long long>(q.bytes), q.us,
                  static_cast<double>(q.bytes) / q.us * 1e-3);
    std::printf(
        "\nt(n) = alpha + n/beta, least squares on relative error (all sizes; split: alpha from n <= 32 KiB,\n"
        "beta from n >= 1 MiB); ring_*: per-hop figures of t = 2(p-1) alpha + 2(p-1)/p n/beta\n");
    report("pt2pt", pt, 0);
    report("allreduce", ar, p);
    std::printf("allreduce_check=%s\n", all_ok ? "ok" : "WRONG");
  }
  MPI_Finalize();
  return all_ok ? 0 : 1;
}
