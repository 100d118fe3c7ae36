#!/usr/bin/env python3
"""The alpha-beta cost model of data-parallel training in docs/distributed.md (stdlib only).

usage: dist-cost-model.py [--net LABEL:ALPHA_US:BETA_GBPS ...] [--ranks 2,8,64,256,1024]
                          [--grad-bytes-per-param 4] [--backward-fraction 0.667]
                          [--min-bucket-kib 64] MODEL:STEP_MS:PARAMS ...

  MODEL:STEP_MS:PARAMS  a model, its measured single-process step time (ms) and parameter count
  --net                 a network: per-hop latency alpha (us) and bandwidth beta (GB/s, 1e9 B/s);
                        repeatable; without it: 10 Gb/s TCP, 100 Gb/s and 400 Gb/s RDMA
Prints, per model, a markdown table of step time and scaling efficiency per network and rank
count, and one of the best bucket size.

Model (weak scaling: every rank keeps its batch, so its compute T stays the measured step time):
  ring all-reduce of n bytes on p ranks  t(n) = 2(p-1) alpha + 2(p-1)/p n/beta = A + n/B,
      A = 2(p-1) alpha,  B = p beta / (2(p-1))
  gradients (n = PARAMS * grad bytes) appear uniformly during backward, Tb = f T (f ~ 2/3);
  k equal buckets of b = n/k bytes; bucket i is complete at i Tb/k and its all-reduce (cost
  c = A + b/B) starts then or when the previous one ends, whichever is later. The last one ends at
  max(Tb/k + k c, Tb + c), so the time exposed after backward is
      exposed(k) = max(k A + n/B - Tb (1 - 1/k),  A + n/(k B))
  (communication-bound: the first bucket cannot start before Tb/k; compute-bound: the last bucket
  is always exposed). The first term is convex in k with its minimum at k = sqrt(Tb/A); the
  second falls with k; they cross at k = (Tb - n/B)/A. Hence the best bucket count
      k* = max(sqrt(Tb/A), (Tb - n/B)/A),  b* = n/k*
  (clamped to [--min-bucket-kib, n]); step = T + exposed(k*), efficiency = T / step.
The table's b* comes from a scan over integer k, checked against the closed form.
"""
import argparse
import math
import sys

DEFAULT_NETS = [  # label, alpha (us), beta (GB/s)
    ("10 Gb/s Ethernet, TCP", 20.0, 1.25),
    ("100 Gb/s RDMA (RoCE/IB)", 5.0, 12.5),
    ("400 Gb/s RDMA (IB NDR)", 3.0, 50.0),
]


def exposed(k, n, p, alpha, beta, tb):
    a = 2 * (p - 1) * alpha
    inv_b = 2 * (p - 1) / p / beta  # seconds per byte
    return max(k * a + n * inv_b - tb * (1 - 1 / k), a + n / k * inv_b)


def best(n, p, alpha, beta, tb, min_bucket):
    """(exposed, k) at the best integer k, the k range within 1% of the best step, closed-form k."""
    kmax = max(1, int(n // min_bucket))
    ex = [exposed(k, n, p, alpha, beta, tb) for k in range(1, kmax + 1)]
    i = min(range(kmax), key=ex.__getitem__)
    a = 2 * (p - 1) * alpha
    n_over_b = n * 2 * (p - 1) / p / beta
    k_closed = min(max(math.sqrt(tb / a), (tb - n_over_b) / a, 1.0), kmax)
    return ex[i], i + 1, ex, k_closed


def size(x):
    if x < 2**20:
        return f"{x / 1024:.0f}K"
    return f"{x / 2**20:.2g}M" if x < 10 * 2**20 else f"{x / 2**20:.0f}M"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("models", nargs="+", metavar="MODEL:STEP_MS:PARAMS")
    ap.add_argument("--net", action="append", metavar="LABEL:ALPHA_US:BETA_GBPS")
    ap.add_argument("--ranks", default="2,8,64,256,1024")
    ap.add_argument("--grad-bytes-per-param", type=float, default=4.0)
    ap.add_argument("--backward-fraction", type=float, default=2 / 3)
    ap.add_argument("--min-bucket-kib", type=float, default=64.0)
    args = ap.parse_args()
    nets = DEFAULT_NETS
    if args.net:
        nets = []
        for spec in args.net:
            label, alpha_us, beta_gbps = spec.rsplit(":", 2)
            nets.append((label, float(alpha_us), float(beta_gbps)))
    ranks = [int(r) for r in args.ranks.split(",")]
    min_bucket = args.min_bucket_kib * 1024

    print(f"Cells: step time, efficiency; then the best bucket size b* and the range of b within 1% of\n"
          f"the best step time. Weak scaling, backward = {args.backward_fraction:.2f} of the step, "
          f"{args.grad_bytes_per_param:g} gradient bytes per parameter, buckets >= {args.min_bucket_kib:g} KiB; "
          f"efficiency < 50% in bold.")
    for spec in args.models:
        name, step_ms, params = spec.split(":")
        t = float(step_ms) / 1e3
        n = float(params) * args.grad_bytes_per_param
        tb = args.backward_fraction * t
        print(f"\n**{name}**: {float(params) / 1e6:.2f} M parameters, {n / 2**20:.1f} MiB of gradients, "
              f"compute {float(step_ms):.4g} ms per step per rank (backward {1e3 * tb:.3g} ms)\n")
        head = "| network (alpha, beta) | " + " | ".join(f"p = {p}" for p in ranks) + " |"
        rule = "|---|" + "---|" * len(ranks)
        steps, buckets = [], []
        for label, alpha_us, beta_gbps in nets:
            alpha, beta = alpha_us * 1e-6, beta_gbps * 1e9
            row_s, row_b = [], []
            for p in ranks:
                ex, k, all_ex, k_closed = best(n, p, alpha, beta, tb, min_bucket)
                ex_closed = min(exposed(math.floor(k_closed), n, p, alpha, beta, tb) if k_closed >= 1 else math.inf,
                                exposed(math.ceil(k_closed), n, p, alpha, beta, tb))
                if ex_closed > ex * 1.001 + 1e-9:
                    print(f"warning: closed form k={k_closed:.1f} gives {ex_closed:.6f} s, scan k={k} {ex:.6f} s",
                          file=sys.stderr)
                eff = t / (t + ex)
                cell = f"{1e3 * (t + ex):.4g} ms, {100 * eff:.0f}%"
                row_s.append(f"**{cell}**" if eff < 0.5 else cell)
                ok = [i + 1 for i, e in enumerate(all_ex) if t + e <= 1.01 * (t + ex)]
                lo, hi = n / max(ok), n / min(ok)
                row_b.append(f"{size(n / k)} ({size(lo)}–{size(hi)})")
            net = f"{label} ({alpha_us:g} µs, {beta_gbps:g} GB/s)"
            steps.append(f"| {net} | " + " | ".join(row_s) + " |")
            buckets.append(f"| {net} | " + " | ".join(row_b) + " |")
        print("Step time, efficiency:\n")
        print("\n".join([head, rule] + steps))
        print("\nBest bucket size b* (K = KiB, M = MiB; range within 1% of the best step time):\n")
        print("\n".join([head, rule] + buckets))


if __name__ == "__main__":
    main()
