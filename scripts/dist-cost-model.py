#!/usr/bin/env python3
"""The alpha-beta cost model of data-parallel training in docs/distributed.md.

Ring all-reduce of n bytes on p ranks: t(n) = 2(p-1)*alpha + 2(p-1)/p * n/beta.
A step is compute T (forward + backward, per rank, fixed batch per rank: weak scaling);
gradients appear uniformly during backward (2/3 of T); a bucket of b bytes is reduced as
soon as its gradients exist, buckets one after another. What is not hidden behind the
rest of backward is exposed:  exposed(b) = max(k*c(b) - Tb*(1 - 1/k), c(b)),  k = n/b,
c(b) = t(b). Efficiency = T / (T + exposed), at the bucket size that minimizes exposed.

usage: dist-cost-model.py MODEL:STEP_MS:GRAD_BYTES ... (e.g. gpt:366:13296640)
"""
import sys

NETWORKS = [  # name, alpha (s), beta (bytes/s)
    ("10 Gb/s (TCP, alpha 20 us)", 20e-6, 10e9 / 8),
    ("100 Gb/s (RDMA, alpha 5 us)", 5e-6, 100e9 / 8),
    ("400 Gb/s (RDMA, alpha 3 us)", 3e-6, 400e9 / 8),
]
RANKS = [2, 8, 64, 256, 1024]


def best(step_s, n, p, alpha, beta):
    tb = step_s * 2 / 3
    out = None
    b = 64 * 1024
    while True:
        b = min(b, n)
        k = -(-n // b)
        c = 2 * (p - 1) * alpha + 2 * (p - 1) / p * b / beta
        exposed = max(k * c - tb * (1 - 1 / k), c)
        if out is None or exposed < out[0]:
            out = (exposed, b)
        if b == n:
            return out
        b *= 2


def main(args):
    for spec in args:
        name, step_ms, grad_bytes = spec.split(":")
        step_s, n = float(step_ms) / 1e3, int(grad_bytes)
        print(f"\n**{name}**: compute {float(step_ms):.0f} ms per step per rank, {n / 2**20:.1f} MiB of fp32 "
              "gradients\n")
        print("| network | " + " | ".join(f"p = {p}" for p in RANKS) + " |")
        print("|---|" + "---|" * len(RANKS))
        for net, alpha, beta in NETWORKS:
            cells = []
            for p in RANKS:
                exposed, b = best(step_s, n, p, alpha, beta)
                eff = step_s / (step_s + exposed)
                cells.append(f"{1e3 * (step_s + exposed):.0f} ms, {100 * eff:.0f}% (b {b / 2**20:.2g} MiB)")
            print(f"| {net} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1:])
