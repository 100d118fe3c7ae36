#!/usr/bin/env python3
"""The alpha-beta cost model of data-parallel training in docs/distributed.md (stdlib only).

usage: dist-cost-model.py [--net LABEL:ALPHA_US:BETA_GBPS ...] [--ranks 2,8,64,256,1024]
                          [--grad-bytes-per-param 4] [--backward-fraction 0.667]
                          [--min-bucket-kib 64]
                          [--zero [--param-bytes 2] [--optimizer-bytes-per-param 12]
                                  [--memory-gib 24] [--reserve-gib 0]]
                          MODEL:STEP_MS:PARAMS ...

  MODEL:STEP_MS:PARAMS  a model, its measured single-process step time (ms) and parameter count
                        (optional with --zero: without one only the memory table is printed)
  --net                 a network: per-hop latency alpha (us) and bandwidth beta (GB/s, 1e9 B/s);
                        repeatable; without it: 10 Gb/s TCP, 100 Gb/s and 400 Gb/s RDMA
  --grad-bytes-per-param  g: bytes of one gradient element, on the wire and in memory
  --zero                compare DDP with ZeRO stages 1 and 2 (below) instead of the DDP tables
  --param-bytes         w: bytes of one parameter element (all-gathered by ZeRO; default 2, 16-bit)
  --optimizer-bytes-per-param  K: optimizer state per parameter (default 12: an fp32 master copy
                        and Adam's two fp32 moments; 8 for fp32 parameters, their own master)
  --memory-gib          memory of one rank (GiB); --reserve-gib of it is kept for activations,
                        workspace and buckets in flight, the rest holds the model state
Prints, per model, a markdown table of step time and scaling efficiency per network and rank
count, and one of the best bucket size; with --zero, per model a table of step time and
efficiency of DDP, ZeRO-1 and ZeRO-2, then one of the largest model that fits a rank's memory.

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

ZeRO (--zero): optimizer-state sharding, stages 1 and 2 (DeepSpeed ZeRO, PyTorch's
ZeroRedundancyOptimizer). Rank r owns 1/p of the parameters: it keeps their optimizer state
and updates them; n = PARAMS * g gradient bytes, m = PARAMS * w parameter bytes.
  ring reduce-scatter or all-gather of n bytes  t(n) = (p-1) alpha + (p-1)/p n/beta = A1 + n/B1,
      A1 = (p-1) alpha,  B1 = p beta / (p-1)
  DDP     all-reduce of the gradients in buckets during backward (above):
              step = T + exposed(k*)                          wire: 2(p-1)/p n bytes per rank
  ZeRO-1  the same all-reduce, then, after the optimizer step, an all-gather of the updated
          parameters, bucket by bucket (k all-gathers of m/k bytes, one after another), which
          nothing overlaps (it runs before the next forward):
              step = T + exposed(k) + k A1 + m/B1             wire: 2(p-1)/p n + (p-1)/p m
  ZeRO-2  a reduce-scatter of the gradients in buckets during backward, overlapped as the
          all-reduce (exposed_rs(k): exposed(k) with A1, B1 for A, B), then the all-gather:
              step = T + exposed_rs(k) + k A1 + m/B1          wire: (p-1)/p (n + m)
  One bucket gives the ring all-gather A1 + m/B1; more buckets hide more of the reduction and
  pay A1 each in the all-gather, so k is the integer that minimizes the step (a scan: the
  step is convex in k). T stays the measured step time: the 1/p of the optimizer step that
  ZeRO saves is not subtracted.
Memory of the model state per parameter per rank (w parameter, g gradient, K optimizer bytes):
  DDP     w + 2g + K      the parameters, their .grad, and the communication buckets, which hold
                          a second copy of every gradient for the whole step; all optimizer state
  ZeRO-1  w + g + K/p     the buckets hold the full reduced gradient; each parameter's own .grad
                          is freed once copied into its bucket; 1/p of the optimizer state
  ZeRO-2  w + (g + K)/p   only the rank's 1/p slice of the reduced gradient is kept; 1/p of the
                          optimizer state
  Not counted (leave room for them with --reserve-gib): activations, workspace; in ZeRO-2 the
  buckets in flight and the .grad not yet copied into one (a bucket or two where the
  communication keeps up with backward; up to g bytes per parameter where it lags); the
  all-gather's receive buffers (w bytes per parameter while it runs, after backward has freed
  the activations).
  Largest model = (memory - reserve) / bytes per parameter.
"""
import argparse
import math
import sys

DEFAULT_NETS = [  # label, alpha (us), beta (GB/s)
    ("10 Gb/s Ethernet, TCP", 20.0, 1.25),
    ("100 Gb/s RDMA (RoCE/IB)", 5.0, 12.5),
    ("400 Gb/s RDMA (IB NDR)", 3.0, 50.0),
]

STAGES = ("DDP", "ZeRO-1", "ZeRO-2")


def ring(p, alpha, beta, passes):
    """Latency term and seconds per byte of a ring collective that sends passes * (p-1) messages of
    n/p bytes per rank: passes = 2 for an all-reduce, 1 for a reduce-scatter or an all-gather."""
    return passes * (p - 1) * alpha, passes * (p - 1) / p / beta


def exposed(k, n, a, inv_b, tb):
    """Time exposed after backward by k buckets of a collective with latency a, inv_b s/byte."""
    return max(k * a + n * inv_b - tb * (1 - 1 / k), a + n / k * inv_b)


def best(n, a, inv_b, tb, min_bucket):
    """(exposed, k) at the best integer k, exposed for every k, the closed-form k."""
    kmax = max(1, int(n // min_bucket))
    ex = [exposed(k, n, a, inv_b, tb) for k in range(1, kmax + 1)]
    i = min(range(kmax), key=ex.__getitem__)
    k_closed = 1.0 if a == 0 else min(max(math.sqrt(tb / a), (tb - n * inv_b) / a, 1.0), kmax)
    return ex[i], i + 1, ex, k_closed


def best_checked(n, a, inv_b, tb, min_bucket):
    """best(), with a warning where the closed form misses the scan's optimum."""
    ex, k, all_ex, k_closed = best(n, a, inv_b, tb, min_bucket)
    ex_closed = min(exposed(math.floor(k_closed), n, a, inv_b, tb) if k_closed >= 1 else math.inf,
                    exposed(math.ceil(k_closed), n, a, inv_b, tb))
    if ex_closed > ex * 1.001 + 1e-9:
        print(f"warning: closed form k={k_closed:.1f} gives {ex_closed:.6f} s, scan k={k} {ex:.6f} s",
              file=sys.stderr)
    return ex, k, all_ex


def zero_exposed(n, m, p, alpha, beta, tb, min_bucket):
    """Communication time added to the compute per step: {stage: seconds}. ZeRO's k buckets
    also cost k all-gathers; k minimizes the whole step."""
    all_reduce = best_checked(n, *ring(p, alpha, beta, 2), tb, min_bucket)
    reduce_scatter = best_checked(n, *ring(p, alpha, beta, 1), tb, min_bucket)
    a1, inv_b1 = ring(p, alpha, beta, 1)

    def with_gather(ex):  # ex[k - 1]: exposed time of k buckets
        return min(e + (k + 1) * a1 for k, e in enumerate(ex)) + m * inv_b1

    return {"DDP": all_reduce[0], "ZeRO-1": with_gather(all_reduce[2]), "ZeRO-2": with_gather(reduce_scatter[2])}


def state_bytes(p, w, g, k):
    """Bytes of model state per parameter per rank: {stage: bytes} (assumptions in the docstring)."""
    return {"DDP": w + 2 * g + k, "ZeRO-1": w + g + k / p, "ZeRO-2": w + (g + k) / p}


def size(x):
    if x < 2**20:
        return f"{x / 1024:.0f}K"
    return f"{x / 2**20:.2g}M" if x < 10 * 2**20 else f"{x / 2**20:.0f}M"


def parse_model(spec, args):
    name, step_ms, params = spec.split(":")
    t = float(step_ms) / 1e3
    return name, float(step_ms), float(params), t, args.backward_fraction * t


def ddp_tables(args, nets, ranks, min_bucket):
    print(f"Cells: step time, efficiency; then the best bucket size b* and the range of b within 1% of\n"
          f"the best step time. Weak scaling, backward = {args.backward_fraction:.2f} of the step, "
          f"{args.grad_bytes_per_param:g} gradient bytes per parameter, buckets >= {args.min_bucket_kib:g} KiB; "
          f"efficiency < 50% in bold.")
    for spec in args.models:
        name, step_ms, params, t, tb = parse_model(spec, args)
        n = params * args.grad_bytes_per_param
        print(f"\n**{name}**: {params / 1e6:.2f} M parameters, {n / 2**20:.1f} MiB of gradients, "
              f"compute {step_ms:.4g} ms per step per rank (backward {1e3 * tb:.3g} ms)\n")
        head = "| network (alpha, beta) | " + " | ".join(f"p = {p}" for p in ranks) + " |"
        rule = "|---|" + "---|" * len(ranks)
        steps, buckets = [], []
        for label, alpha_us, beta_gbps in nets:
            alpha, beta = alpha_us * 1e-6, beta_gbps * 1e9
            row_s, row_b = [], []
            for p in ranks:
                ex, k, all_ex = best_checked(n, *ring(p, alpha, beta, 2), tb, min_bucket)
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


def zero_tables(args, nets, ranks, min_bucket):
    g, w, k = args.grad_bytes_per_param, args.param_bytes, args.optimizer_bytes_per_param
    if args.models:
        print(f"Cells: step time, efficiency (< 50% in bold). Weak scaling, backward = "
              f"{args.backward_fraction:.2f} of the step;\non the wire g = {g:g} bytes per gradient and "
              f"w = {w:g} bytes per parameter element; buckets >= {args.min_bucket_kib:g} KiB,\nat each "
              f"stage's best size. DDP all-reduces the gradients during backward; ZeRO-1 adds an all-gather\n"
              f"of the parameters after the optimizer step; ZeRO-2 reduce-scatters the gradients during "
              f"backward,\nthen all-gathers the parameters.")
    head = "| network (alpha, beta) | stage | " + " | ".join(f"p = {p}" for p in ranks) + " |"
    rule = "|---|---|" + "---|" * len(ranks)
    for spec in args.models:
        name, step_ms, params, t, tb = parse_model(spec, args)
        n, m = params * g, params * w
        print(f"\n**{name}**: {params / 1e6:.2f} M parameters, {n / 2**20:.1f} MiB of gradients, "
              f"{m / 2**20:.1f} MiB of parameters, compute {step_ms:.4g} ms per step per rank "
              f"(backward {1e3 * tb:.3g} ms)\n")
        rows = []
        for label, alpha_us, beta_gbps in nets:
            alpha, beta = alpha_us * 1e-6, beta_gbps * 1e9
            cells = {s: [] for s in STAGES}
            for p in ranks:
                for s, ex in zero_exposed(n, m, p, alpha, beta, tb, min_bucket).items():
                    eff = t / (t + ex)
                    cell = f"{1e3 * (t + ex):.4g} ms, {100 * eff:.0f}%"
                    cells[s].append(f"**{cell}**" if eff < 0.5 else cell)
            net = f"{label} ({alpha_us:g} µs, {beta_gbps:g} GB/s)"
            for i, s in enumerate(STAGES):
                rows.append(f"| {net if i == 0 else ''} | {s} | " + " | ".join(cells[s]) + " |")
        print("\n".join([head, rule] + rows))

    budget = (args.memory_gib - args.reserve_gib) * 2**30
    formula = {"DDP": "w + 2g + K", "ZeRO-1": "w + g + K/p", "ZeRO-2": "w + (g + K)/p"}
    print(("\n" if args.models else "") +
          f"Largest model whose state fits {args.memory_gib:g} GiB per rank, {args.reserve_gib:g} GiB of it "
          f"reserved for activations\nand buffers: billions of parameters (in parentheses: bytes of state "
          f"per parameter per rank), with\nw = {w:g} parameter, g = {g:g} gradient and K = {k:g} optimizer "
          f"bytes per parameter.\n")
    print("| stage | bytes per parameter | " + " | ".join(f"p = {p}" for p in ranks) + " |")
    print("|---|---|" + "---|" * len(ranks))
    per_p = [state_bytes(p, w, g, k) for p in ranks]
    for s in STAGES:
        cells = [f"{budget / b[s] / 1e9:.3g} ({b[s]:.3g})" for b in per_p]
        print(f"| {s} | {formula[s]} | " + " | ".join(cells) + " |")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("models", nargs="*", metavar="MODEL:STEP_MS:PARAMS")
    ap.add_argument("--net", action="append", metavar="LABEL:ALPHA_US:BETA_GBPS")
    ap.add_argument("--ranks", default="2,8,64,256,1024")
    ap.add_argument("--grad-bytes-per-param", type=float, default=4.0)
    ap.add_argument("--backward-fraction", type=float, default=2 / 3)
    ap.add_argument("--min-bucket-kib", type=float, default=64.0)
    ap.add_argument("--zero", action="store_true")
    ap.add_argument("--param-bytes", type=float, default=2.0)
    ap.add_argument("--optimizer-bytes-per-param", type=float, default=12.0)
    ap.add_argument("--memory-gib", type=float, default=24.0)
    ap.add_argument("--reserve-gib", type=float, default=0.0)
    args = ap.parse_args()
    if not args.models and not args.zero:
        ap.error("at least one MODEL:STEP_MS:PARAMS is required (or --zero for the memory table alone)")
    if not 0 <= args.reserve_gib < args.memory_gib:
        ap.error("--reserve-gib must be at least 0 and less than --memory-gib")
    nets = DEFAULT_NETS
    if args.net:
        nets = []
        for spec in args.net:
            label, alpha_us, beta_gbps = spec.rsplit(":", 2)
            nets.append((label, float(alpha_us), float(beta_gbps)))
    ranks = [int(r) for r in args.ranks.split(",")]
    if min(ranks) < 1:
        ap.error("--ranks must be positive")
    min_bucket = args.min_bucket_kib * 1024
    (zero_tables if args.zero else ddp_tables)(args, nets, ranks, min_bucket)


if __name__ == "__main__":
    main()
