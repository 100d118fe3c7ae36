#!/usr/bin/env python3
"""PyTorch peer of `tensorcast bench`: the same four models, trained (or run forward-only)
in fp32 and with torch.autocast("cpu", dtype=torch.bfloat16) on synthetic data.

Shapes, loss, optimizer, data and timing follow apps/tensorcast/{models,bench}.cpp and
docs/cli.md ("Models"):
  mlp        Flatten-Linear(784,512)-ReLU-Linear(512,512)-ReLU-Linear(512,10); x (B,1,28,28)
  cnn        Conv2d(1,32,3,p1)-ReLU-MaxPool(2)-Conv2d(32,64,3,p1)-ReLU-MaxPool(2)-Flatten-
             Linear(3136,128)-ReLU-Linear(128,10); x (B,1,28,28)
  mlp-large  Linear(1024,4096)-GELU-Linear(4096,1024)-GELU-Linear(1024,10); x (B,1024)
  gpt        bytes (vocab 256), context 128, 4 layers, 4 heads, width 256, pre-LayerNorm,
             GELU MLP x4, final LayerNorm, untied lm_head with bias; x, y int64 (B,128)
  x ~ randn, targets ~ randint (synthetic, like tensorcast bench); loss = cross-entropy
  (gpt: over all B*T positions); AdamW(lr=1e-3, weight_decay=0); bf16 needs no GradScaler.
  A training step = zero_grad(set_to_none) + forward (under autocast for bf16) + loss +
  backward + optimizer.step + loss.item(). --inference: eval(), no_grad, forward + sum().item().
Timing: --warmup untimed steps, then the median of --steps timed steps (as tensorcast bench).

Peak memory: PyTorch has no CPU counterpart of tensorcast's peak-tensor-bytes counter, so
peak_memory_bytes here is the process's peak resident set size during the timed steps
(VmHWM, reset after warm-up through /proc/self/clear_refs) minus the resident size just
before the model was built (taken after one step of a throw-away batch-1 copy, so that
library code and thread pools are already resident). It includes allocator slack and oneDNN scratch, so it is an
upper bound of the tensor bytes; "peak_memory_kind" names which measure was used.
For a clean figure run one (model, precision, batch) per process (bench/compare does).

Prints one JSON line per (model, precision, batch): the fields of `tensorcast bench --json`
plus "impl": "pytorch" and "torch_version".

--epoch-fashion-mnist DIR: instead, one real training epoch of the cnn (the counterpart of
`tensorcast train --model cnn --epochs 1 --lr-schedule constant --precision P`) on Fashion-MNIST
read from DIR's IDX files (gzip'd or raw, e.g. Debian's dataset-fashion-mnist in
/usr/share/datasets/fashion-mnist; parsed with gzip + torch.frombuffer, no numpy or torchvision), pixels
normalized like tensorcast ((v/255 - 0.2860)/0.3530), float32 in memory before the clock
starts. Batch --batch-size (default 128), shuffled by a seeded permutation, the last batch
partial (as tensorcast's loader), AdamW(lr=1e-3, weight_decay=0) constant lr, cross-entropy,
fp32 or torch.autocast("cpu", dtype=torch.bfloat16). The epoch time "train_seconds" is the
sum of the per-step times, each from zero_grad to loss.item() (forward, loss, backward,
optimizer step) -- what tensorcast's train_seconds sums; the batch gather (tensorcast
prefetches batches on a loader thread outside the timed region) and the evaluation are not
counted. "epoch_wall_seconds" also counts the batch gathers. Then the test accuracy (eval
under the same autocast, batches of 1000). One JSON line per precision.
"""
import argparse
import gc
import json
import math
import os
import resource
import statistics
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

DEFAULT_BATCH = {"mlp": 128, "cnn": 128, "mlp-large": 256, "gpt": 16}
GPT_CONTEXT = 128
# --width/--layers/--context (scaling benchmarks; 0 = the default shape), as `tensorcast bench`:
# mlp-large of width W is Linear(W,4W)-GELU-Linear(4W,W)-GELU-Linear(W,10) on (B,W); gpt of
# width W has W/64 heads.
SIZE = {"width": 0, "layers": 0, "context": 0}


class CausalSelfAttention(nn.Module):
    def __init__(self, width, heads, attention):
        super().__init__()
        self.heads = heads
        self.attention = attention
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)
        self.register_buffer("mask", None, persistent=False)

    def forward(self, x):
        B, T, C = x.shape
        H = self.heads
        hd = C // H
        q, k, v = self.qkv(x).view(B, T, 3, H, hd).permute(2, 0, 3, 1, 4).unbind(0)
        if self.attention == "sdpa":
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:  # explicit math (tensorcast before its fused attention): matmul, scale, additive -inf mask, softmax, matmul
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hd))
            if self.mask is None or self.mask.shape[0] != T:
                self.mask = torch.triu(torch.full((T, T), float("-inf")), diagonal=1)
            att = att + self.mask.to(att.dtype)
            att = torch.softmax(att, dim=-1)
            y = att @ v
        y = y.transpose(1, 2).reshape(B, T, C)
        return self.proj(y)


class Block(nn.Module):
    def __init__(self, width, heads, attention):
        super().__init__()
        self.ln1 = nn.LayerNorm(width)
        self.attn = CausalSelfAttention(width, heads, attention)
        self.ln2 = nn.LayerNorm(width)
        self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width))

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self, vocab=256, context=GPT_CONTEXT, layers=4, heads=4, width=256, attention="math"):
        super().__init__()
        self.wte = nn.Embedding(vocab, width)
        self.wpe = nn.Embedding(context, width)
        self.blocks = nn.Sequential(*[Block(width, heads, attention) for _ in range(layers)])
        self.ln_f = nn.LayerNorm(width)
        self.lm_head = nn.Linear(width, vocab)

    def forward(self, idx):
        T = idx.shape[1]
        pos = torch.arange(T, dtype=torch.long, device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        return self.lm_head(self.ln_f(self.blocks(x)))


def build_model(name, attention):
    if name == "cnn":
        return nn.Sequential(nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                             nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                             nn.Flatten(), nn.Linear(3136, 128), nn.ReLU(), nn.Linear(128, 10))
    if name == "mlp":
        return nn.Sequential(nn.Flatten(), nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                             nn.Linear(512, 10))
    if name == "mlp-large":
        w = SIZE["width"] or 1024
        return nn.Sequential(nn.Linear(w, 4 * w), nn.GELU(), nn.Linear(4 * w, w), nn.GELU(), nn.Linear(w, 10))
    if name == "gpt":
        w = SIZE["width"] or 256
        return GPT(context=SIZE["context"] or GPT_CONTEXT, layers=SIZE["layers"] or 4, heads=max(1, w // 64), width=w,
                   attention=attention)
    raise SystemExit(f"pytorch_amp.py: unknown model '{name}' (use mlp, mlp-large, cnn or gpt)")


def synthetic_batch(name, B):
    if name in ("cnn", "mlp"):
        return torch.randn(B, 1, 28, 28), torch.randint(0, 10, (B,))
    if name == "mlp-large":
        return torch.randn(B, SIZE["width"] or 1024), torch.randint(0, 10, (B,))
    T = SIZE["context"] or GPT_CONTEXT
    return torch.randint(0, 256, (B, T)), torch.randint(0, 256, (B, T))


def rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def reset_peak_rss():
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def peak_rss_bytes():
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def prime(model_name, precision, inference, attention):
    """One step of a throw-away copy at batch 1, so that the kernels' code, thread pools and
    one-time runtime buffers are resident before the baseline RSS is taken."""
    m = build_model(model_name, attention)
    x, y = synthetic_batch(model_name, 1)
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bf16"):
        if inference:
            with torch.no_grad():
                m.eval()(x)
            return
        logits = m(x)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
    loss.backward()
    opt = torch.optim.AdamW(m.parameters(), lr=1e-3, weight_decay=0.0)
    opt.step()


def run_one(model_name, precision, B, steps, warmup, inference, attention, profile=False, compile_mode=""):
    torch.manual_seed(0)
    prime(model_name, precision, inference, attention)
    gc.collect()
    base_rss = rss_bytes()
    model = build_model(model_name, attention)
    if compile_mode:  # the module's forward through Inductor (backward via AOTAutograd), as users write it
        model = torch.compile(model, mode=None if compile_mode == "default" else compile_mode)
    x, y = synthetic_batch(model_name, B)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.0)
    bf16 = precision == "bf16"
    if inference:
        model.eval()

    def one():
        if inference:
            with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
                logits = model(x)
            logits.float().sum().item()
            return
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            logits = model(x)
            loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
        loss.backward()
        opt.step()
        loss.item()

    for _ in range(warmup):
        one()
    reset_ok = reset_peak_rss()
    ms = []
    for _ in range(steps):
        t0 = time.perf_counter()
        one()
        ms.append((time.perf_counter() - t0) * 1000.0)
    peak = peak_rss_bytes() - base_rss
    if profile:  # after the timed steps, as `tensorcast bench --profile`: the median has no profiler overhead
        from torch.profiler import ProfilerActivity, profile as torch_profile
        with torch_profile(activities=[ProfilerActivity.CPU]) as prof:
            for _ in range(steps):
                one()
        print(f"per-op profile (torch.profiler, {steps} steps; times are totals over them):", file=sys.stderr)
        print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=30), file=sys.stderr)
    return {
        "impl": "pytorch", "model": model_name, "precision": precision, "batch_size": B,
        "inference": inference, "ms_per_step": statistics.median(ms), "peak_memory_bytes": peak,
        "peak_memory_kind": "rss_delta" if reset_ok else "rss_delta_process_lifetime",
        "steps": steps, "ms_min": min(ms), "ms_max": max(ms),
        "samples_per_s": B * 1000.0 / statistics.median(ms), "threads": torch.get_num_threads(),
        "torch_version": torch.__version__, "attention": attention if model_name == "gpt" else None,
        "compile": compile_mode or None, **{k: v for k, v in SIZE.items() if v},
    }


def read_idx(path):
    """A uint8 IDX file (gzip'd or raw) -> uint8 tensor."""
    import gzip
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    zero, dtype_code, ndim = data[0] * 256 + data[1], data[2], data[3]
    if zero != 0 or dtype_code != 0x08:
        raise SystemExit(f"pytorch_amp.py: {path} is not a uint8 IDX file")
    dims = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
    body = bytearray(data[4 + 4 * ndim:])
    if len(body) != math.prod(dims):
        raise SystemExit(f"pytorch_amp.py: {path}: {len(body)} bytes of data, the header says {dims}")
    return torch.frombuffer(body, dtype=torch.uint8).reshape(dims)


def load_fashion_mnist(directory, train):
    stem = "train" if train else "t10k"

    def find(kind):
        gz = os.path.join(directory, f"{stem}-{kind}.gz")
        raw = os.path.join(directory, f"{stem}-{kind}")
        if os.path.exists(gz) or not os.path.exists(raw):
            return gz
        return raw

    images = read_idx(find("images-idx3-ubyte"))
    labels = read_idx(find("labels-idx1-ubyte"))
    lut = ((torch.arange(256, dtype=torch.float64) / 255.0 - 0.2860) / 0.3530).float()
    x = lut[images.long()].reshape(-1, 1, 28, 28).contiguous()
    y = labels.long()
    return x, y


def run_epoch(directory, precision, B, seed):
    torch.manual_seed(seed)
    x, y = load_fashion_mnist(directory, True)
    xt, yt = load_fashion_mnist(directory, False)
    model = build_model("cnn", "math")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.0)
    bf16 = precision == "bf16"
    g = torch.Generator().manual_seed(seed)
    perm = torch.randperm(x.shape[0], generator=g)
    n = x.shape[0]
    step_seconds = 0.0
    step_ms = []
    losses = []
    t_wall = time.perf_counter()
    for i in range(0, n, B):
        idx = perm[i:i + B]
        xb, yb = x.index_select(0, idx), y.index_select(0, idx)
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            logits = model(xb)
            loss = F.cross_entropy(logits, yb)
        loss.backward()
        opt.step()
        losses.append(loss.item())
        dt = time.perf_counter() - t0
        step_seconds += dt
        step_ms.append(dt * 1000.0)
    wall = time.perf_counter() - t_wall
    model.eval()
    correct = 0
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        for i in range(0, xt.shape[0], 1000):
            correct += (model(xt[i:i + 1000]).argmax(1) == yt[i:i + 1000]).sum().item()
    return {
        "impl": "pytorch", "model": "cnn", "precision": precision, "batch_size": B, "epochs": 1,
        "steps": len(losses), "train_seconds": step_seconds, "epoch_wall_seconds": wall,
        "median_step_ms": statistics.median(step_ms) if step_ms else None,
        "final_loss": losses[-1] if losses else None, "test_accuracy": correct / xt.shape[0],
        "train_examples": n, "test_examples": int(xt.shape[0]), "threads": torch.get_num_threads(),
        "torch_version": torch.__version__, "data": directory,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="mlp,cnn,mlp-large,gpt", help="comma-separated (default all four)")
    ap.add_argument("--precisions", default="fp32,bf16", help="comma-separated fp32,bf16")
    ap.add_argument("--batch-size", type=int, default=0, help="override every model's batch (default: mlp/cnn 128, "
                    "mlp-large 256, gpt 16)")
    ap.add_argument("--threads", type=int, default=2, help="torch.set_num_threads (default 2)")
    ap.add_argument("--steps", type=int, default=20, help="timed steps (default 20)")
    ap.add_argument("--warmup", type=int, default=3, help="untimed warm-up steps (default 3)")
    ap.add_argument("--inference", action="store_true", help="time forward passes only")
    ap.add_argument("--attention", choices=["math", "sdpa"], default="math",
                    help="gpt attention: 'math' = tensorcast's ops (default), 'sdpa' = F.scaled_dot_product_attention")
    ap.add_argument("--compile", nargs="?", const="default", default="", metavar="MODE",
                    help="torch.compile the model (MODE: default, max-autotune-no-cudagraphs, ...); the warm-up "
                    "steps include the compilation, so give enough of them (--warmup)")
    for k in ("width", "layers", "context"):
        ap.add_argument(f"--{k}", type=int, default=0, help=f"mlp-large/gpt {k} (default: the model's own)")
    ap.add_argument("--epoch-fashion-mnist", metavar="DIR", default="",
                    help="train the cnn for one epoch on Fashion-MNIST's IDX files in DIR (see above) instead")
    ap.add_argument("--profile", action="store_true",
                    help="after the timed steps, run --steps more under torch.profiler and print its table to stderr")
    ap.add_argument("--seed", type=int, default=0, help="--epoch-fashion-mnist: init and shuffling seed (default 0)")
    a = ap.parse_args()
    SIZE.update(width=a.width, layers=a.layers, context=a.context)
    torch.set_num_threads(a.threads)
    if a.epoch_fashion_mnist:
        for p in a.precisions.split(","):
            if p not in ("fp32", "bf16"):
                raise SystemExit(f"pytorch_amp.py: unknown precision '{p}' (use fp32 or bf16)")
            print(json.dumps(run_epoch(a.epoch_fashion_mnist, p, a.batch_size or 128, a.seed)), flush=True)
        return
    for m in a.models.split(","):
        for p in a.precisions.split(","):
            if p not in ("fp32", "bf16"):
                raise SystemExit(f"pytorch_amp.py: unknown precision '{p}' (use fp32 or bf16)")
            B = a.batch_size or DEFAULT_BATCH.get(m, 128)
            print(json.dumps(run_one(m, p, B, a.steps, a.warmup, a.inference, a.attention, a.profile, a.compile)), flush=True)


if __name__ == "__main__":
    main()
