"""PyTorch's matrix-product rate, the reference for bench_cuda_gemm (bench/device/check.sh).

Prints one line per shape and dtype in bench_cuda_gemm's format:

    gemm <dtype> <M> <N> <K> <TFLOP/s>

C = A @ B with A M x K and B K x N, random normal data (products of zeros run faster),
3 warm-up samples, then the median of 10 samples, each 10 products back to back between two
CUDA events (bench_cuda_gemm times 10 between two device synchronizations).
fp32 is true fp32: TF32 is off, as in tensorcast's fp32 GEMM.

    python3 bench/device/torch_gemm.py [--sizes 8192,4096] [--dtypes bf16,fp16,fp32] [--device cuda]

--device cpu (with small --sizes) only checks that the script runs where there is no GPU.
"""

import argparse
import statistics
import sys
import time

import torch

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
WARMUP, REPEATS, PER_SAMPLE = 3, 10, 10


def seconds_per_product(a, b, c, device):
    def once():
        if device == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(PER_SAMPLE):
                torch.matmul(a, b, out=c)
            end.record()
            end.synchronize()
            return start.elapsed_time(end) / 1e3 / PER_SAMPLE
        t0 = time.perf_counter()
        for _ in range(PER_SAMPLE):
            torch.matmul(a, b, out=c)
        return (time.perf_counter() - t0) / PER_SAMPLE

    for _ in range(WARMUP):
        once()
    return statistics.median(once() for _ in range(REPEATS))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="8192,4096", help="square sizes M=N=K, comma-separated")
    parser.add_argument("--dtypes", default="bf16,fp16,fp32", help="of " + ",".join(DTYPES))
    parser.add_argument("--device", default="cuda")
    args = parser.parse_args()

    if args.device == "cuda" and not torch.cuda.is_available():
        print("torch_gemm: torch sees no CUDA device", file=sys.stderr)
        return 1
    torch.set_float32_matmul_precision("highest")  # no TF32 for fp32 products
    torch.manual_seed(0)
    for size in (int(s) for s in args.sizes.split(",")):
        m = n = k = size
        for name in args.dtypes.split(","):
            dtype = DTYPES[name]
            a = torch.randn(m, k, device=args.device, dtype=dtype)
            b = torch.randn(k, n, device=args.device, dtype=dtype)
            c = torch.empty(m, n, device=args.device, dtype=dtype)
            t = seconds_per_product(a, b, c, args.device)
            print(f"gemm {name} {m} {n} {k} {2.0 * m * n * k / t / 1e12:.1f}", flush=True)
            del a, b, c
    return 0


if __name__ == "__main__":
    sys.exit(main())
