"""PyTorch's training step on the shapes of bench_cuda_train (bench/device/check.sh).

Prints, per model and precision, eager and torch.compile lines in bench_cuda_train's format
with the mode appended:

    train <model> <precision> <batch> <ms per step> <peak MiB> <eager|compile>

Same models, AdamW(lr 1e-3), cross_entropy, bf16 as autocast over float32 parameters, fp16
the same with torch.amp.GradScaler; mean
of 30 steps after 5 warm-ups (torch.compile's compilation happens in the warm-ups), timed to
torch.cuda.synchronize(). fp32 matmuls are true fp32 (TF32 off), as tensorcast's.

    python3 bench/device/torch_train.py [--no-compile]
"""

import argparse
import sys
import time

import torch


def make(model):
    nn = torch.nn
    if model == "mlp-large":
        return nn.Sequential(nn.Linear(1024, 4096), nn.GELU(), nn.Linear(4096, 1024), nn.GELU(), nn.Linear(1024, 10)), 256, 1024
    return nn.Sequential(nn.Flatten(), nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10)), 128, 784


def run(model, precision, compiled):
    torch.manual_seed(0)
    net, batch, width = make(model)
    net = net.cuda()
    opt = torch.optim.AdamW(net.parameters(), lr=1e-3)
    scaler = torch.amp.GradScaler("cuda", enabled=precision == "fp16")
    dtype = torch.float16 if precision == "fp16" else torch.bfloat16
    fwd = torch.compile(net) if compiled else net
    x = torch.randn(batch, width, device="cuda")
    y = torch.randint(0, 10, (batch,), device="cuda")

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=dtype, enabled=precision != "fp32"):
            loss = torch.nn.functional.cross_entropy(fwd(x), y)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()

    for _ in range(5):
        step()
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    t0 = time.perf_counter()
    for _ in range(30):
        step()
    torch.cuda.synchronize()
    ms = (time.perf_counter() - t0) / 30 * 1e3
    peak = torch.cuda.max_memory_allocated() / 2**20
    print(f"train {model} {precision} {batch} {ms:.3f} {peak:.1f} {'compile' if compiled else 'eager'}",
          flush=True)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--no-compile", action="store_true")
    a = p.parse_args()
    if not torch.cuda.is_available():
        print("torch_train: no CUDA device; nothing measured")
        return 0
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    # Every eager case first: if compilation runs out of time, the eager numbers are in.
    for compiled in (False,) if a.no_compile else (False, True):
        for model in ("mlp", "mlp-large"):
            for precision in ("fp32", "bf16", "fp16"):
                try:
                    run(model, precision, compiled)
                except Exception as e:  # a compile failure must not hide the eager numbers
                    print(f"# {model} {precision} {'compile' if compiled else 'eager'} failed: {e}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
