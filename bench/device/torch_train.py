"""PyTorch's side of bench_cuda_train (bench/device/check.sh): the same five models, shapes,
optimizer and timing, eager (every case) and torch.compile (the bf16 training step). Prints
bench_cuda_train's lines with the mode appended:

    train <model> <precision> <batch> <ms per step> <peak MiB> <eager|compile>
    infer <model> <precision> <batch> <ms per forward> - <eager|compile>

The models are bench/peer/pytorch_amp.py's (the CPU peer benchmark's), plus gpt2-small:
that GPT with vocabulary 50257, context 1024, 12 layers, 12 heads, width 768. The GPTs use
F.scaled_dot_product_attention (PyTorch's fastest attention on the GPU: flash or
memory-efficient kernels). AdamW(lr 1e-3), cross_entropy, bf16 as autocast over float32
parameters, fp16 the same with torch.amp.GradScaler; the mean of 30 timed steps after 5
warm-ups (gpt2-small: 10 after 3; torch.compile's compilation happens in the warm-ups),
timed to torch.cuda.synchronize(). fp32 matmuls are true fp32 (TF32 off), as tensorcast's.

    python3 bench/device/torch_train.py [--no-compile] [model ...]
"""

import argparse
import os
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "peer"))
import pytorch_amp as peer  # noqa: E402  (the CPU peer benchmark's models)

MODELS = ("mlp", "mlp-large", "cnn", "gpt", "gpt2-small")


def make(model):
    """(module, x, y, batch, warmup, steps) on the GPU, seeded."""
    torch.manual_seed(0)
    nn = torch.nn
    warmup, steps = 5, 30
    if model == "mlp":  # bench_cuda_train feeds (B, 784): no Flatten
        net = nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10))
        x, y = torch.randn(128, 784), torch.randint(0, 10, (128,))
    elif model in ("mlp-large", "cnn"):
        net = peer.build_model(model, "sdpa")
        x, y = peer.synthetic_batch(model, peer.DEFAULT_BATCH[model])
    elif model == "gpt":
        net = peer.GPT(attention="sdpa")
        x, y = torch.randint(0, 256, (16, 128)), torch.randint(0, 256, (16, 128))
    elif model == "gpt2-small":
        net = peer.GPT(vocab=50257, context=1024, layers=12, heads=12, width=768, attention="sdpa")
        x, y = torch.randint(0, 50257, (16, 1024)), torch.randint(0, 50257, (16, 1024))
        warmup, steps = 3, 10
    else:
        raise SystemExit(f"torch_train.py: unknown model '{model}' (use {', '.join(MODELS)})")
    return net.cuda(), x.cuda(), y.cuda(), x.shape[0], warmup, steps


def timed(fn, warmup, steps):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(steps):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) / steps * 1e3


def train(model, precision, compiled):
    net, x, y, batch, warmup, steps = make(model)
    opt = torch.optim.AdamW(net.parameters(), lr=1e-3)
    scaler = torch.amp.GradScaler("cuda", enabled=precision == "fp16")
    dtype = torch.float16 if precision == "fp16" else torch.bfloat16
    fwd = torch.compile(net) if compiled else net

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=dtype, enabled=precision != "fp32"):
            logits = fwd(x)
            loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()

    for _ in range(warmup):
        step()
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    ms = timed(step, 0, steps)
    peak = torch.cuda.max_memory_allocated() / 2**20
    mode = "compile" if compiled else "eager"
    print(f"train {model} {precision} {batch} {ms:.3f} {peak:.1f} {mode}", flush=True)


def infer(model, precision, compiled):
    net, x, _, batch, warmup, steps = make(model)
    net.eval()
    fwd = torch.compile(net) if compiled else net

    @torch.no_grad()
    def step():
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=precision == "bf16"):
            fwd(x)

    ms = timed(step, warmup, steps)
    print(f"infer {model} {precision} {batch} {ms:.3f} - {'compile' if compiled else 'eager'}", flush=True)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--no-compile", action="store_true")
    p.add_argument("models", nargs="*", default=list(MODELS))
    a = p.parse_args()
    if not torch.cuda.is_available():
        print("torch_train: no CUDA device; nothing measured")
        return 0
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    # Every eager case first: if compilation runs out of time, the eager numbers are in. Then
    # torch.compile for the bf16 training step only (the cases the targets compare with
    # compile): a compilation takes 10-60 s, and every case would not fit check.sh's time limit.
    for compiled in (False,) if a.no_compile else (False, True):
        mode = "compile" if compiled else "eager"
        cases = ((("train", ("bf16",), train),) if compiled else
                 (("train", ("fp32", "bf16", "fp16"), train), ("infer", ("fp32", "bf16"), infer)))
        for model in a.models:
            for kind, precisions, fn in cases:
                for precision in precisions:
                    try:
                        fn(model, precision, compiled)
                    except Exception as e:  # a failure (e.g. compilation) must not hide the other numbers
                        print(f"# {kind} {model} {precision} {mode} failed: {type(e).__name__}: {e}", flush=True)
                    torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
