#!/usr/bin/env python3
"""PyTorch's own version of each AMP recipe in examples/amp_recipes/, on the CPU.

    python reference.py RECIPE --precision bf16|fp16

prints the same JSON trace as the C++ program of that recipe: per step the loss, whether
each optimizer's step was skipped and the scale after the update; at the end the final
weights (and, for inference, the last batch's outputs). Weights and data come from the
closed formulas of examples/amp_recipes/recipe.h, evaluated in float64 with the C
library's sin and rounded to float32, so both sides start from the same bits.
"""
import argparse
import io
import json
import math
import sys

import torch
import torch.nn.functional as F

BATCH, IN, HIDDEN, OUT = 8, 8, 16, 4
STEPS = 24
INF_STEP = 10  # the step whose input holds an inf (a skip in both precisions)
GROWTH_INTERVAL = 3


def formula(shape, amp, freq, phase):
    n = math.prod(shape)
    vals = [amp * math.sin(freq * i + phase) for i in range(n)]
    return torch.tensor(vals, dtype=torch.float64).to(torch.float32).reshape(shape)


class Mlp(torch.nn.Module):
    """Linear-ReLU-Linear; model k's weights come from formula() with phases shifted by k."""

    def __init__(self, k):
        super().__init__()
        self.fc1 = torch.nn.Linear(IN, HIDDEN)
        self.fc2 = torch.nn.Linear(HIDDEN, OUT)
        with torch.no_grad():
            p = 1.0 + 2.0 * k
            self.fc1.weight.copy_(formula((HIDDEN, IN), 0.5, 0.37, p))
            self.fc1.bias.copy_(formula((HIDDEN,), 0.05, 0.53, p + 0.5))
            self.fc2.weight.copy_(formula((OUT, HIDDEN), 0.3, 0.29, p + 1.0))
            self.fc2.bias.copy_(formula((OUT,), 0.05, 0.61, p + 1.5))
        self.watched = []  # gradients of the 16-bit activations, for check_skip

    def hidden(self, x):
        h = F.relu(self.fc1(x))
        self.watch(h)
        return h

    def forward(self, x):
        out = self.fc2(self.hidden(x))
        self.watch(out)
        return out

    def watch(self, t):
        if t.requires_grad and t.dtype == torch.float16:
            t.register_hook(lambda g: self.watched.append(bool(torch.isfinite(g).all())))


def batch(step):
    """The inputs (BATCH, IN) and classes (BATCH) of a step: four batches in turn; the
    class's pattern dominates, so the loss falls."""
    b = step % 4
    x, y = [], []
    for n in range(BATCH):
        c = (n + b) % 4
        y.append(c)
        for j in range(IN):
            x.append(0.4 * math.sin(1.3 * (c + 1) * j + 0.4 * c) + 0.05 * math.sin(0.71 * (n * IN + j) + 0.37 * b))
    xt = torch.tensor(x, dtype=torch.float64).to(torch.float32).reshape(BATCH, IN)
    return xt, torch.tensor(y, dtype=torch.int64)


def one_hot(y):
    return F.one_hot(y, OUT).to(torch.float32)


def inject(x, step, enabled=True):
    if enabled and step == INF_STEP:
        x = x.clone()
        x[0, 0] = float("inf")
    return x


def new_scaler(dtype):
    """fp16: the scale alternates between 2^22, where the loss's gradient overflows fp16 (a
    skip and a backoff), and 2^14, where every gradient is far from fp16's limit (three
    steps, then a growth): see recipe.h. bf16 never overflows but at the inf input."""
    if dtype == torch.float16:
        return torch.amp.GradScaler("cpu", init_scale=2.0**22, growth_factor=2.0**8, backoff_factor=2.0**-8,
                                    growth_interval=GROWTH_INTERVAL)
    return torch.amp.GradScaler("cpu", init_scale=2.0**16, growth_factor=2.0, backoff_factor=0.5,
                                growth_interval=GROWTH_INTERVAL)


class Trace:
    def __init__(self, recipe, precision):
        self.out = {"recipe": recipe, "precision": precision, "steps": []}

    def step(self, loss, skipped, scale):
        loss = float(loss.detach()) if torch.is_tensor(loss) else float(loss)
        self.out["steps"].append({"loss": loss if math.isfinite(loss) else None, "skipped": skipped,
                                  "scale": scale})

    def weights(self, named):
        self.out["weights"] = {k: v.detach().reshape(-1).tolist() for k, v in named}

    def dump(self):
        json.dump(self.out, sys.stdout)
        sys.stdout.write("\n")


def check_skip(models, skipped):
    """fp16 only: tensorcast writes an autocast linear's weight gradient in fp32 where PyTorch
    rounds it to fp16 first (docs/amp.md), so a step PyTorch skips because only a weight
    gradient overflowed would be a step tensorcast takes. The recipes are built so that every
    skip comes from an activation gradient (the scale itself, or the inf input); this makes
    sure of it, so that the comparison of skips can stay exact."""
    finite = all(all(m.watched) for m in models)
    for m in models:
        m.watched.clear()
    if any(skipped) and finite:
        sys.exit("reference.py: a step was skipped for a weight gradient alone; the recipe's data must change")


def stepped(scaler, opt):
    """Whether scaler.step(opt) stepped (the optimizer state's found_inf, as the C++ step() returns)."""
    return float(scaler._per_optimizer_states[id(opt)]["found_inf_per_device"][torch.device("cpu")].sum()) == 0


def finish_step(trace, dtype, scaler, opts, models, loss):
    """The end of every training step: which optimizers' steps were skipped, update(), the
    fp16 skip check, and the step's trace line (the scale after update)."""
    skipped = [not stepped(scaler, opt) for opt in opts]
    scaler.update()
    if dtype == torch.float16:
        check_skip(models, skipped)
    trace.step(loss, skipped, scaler.get_scale())


def typical(dtype, trace):
    model = Mlp(0)
    opt = torch.optim.SGD(model.parameters(), lr=0.2, momentum=0.9)
    scaler = new_scaler(dtype)
    for step in range(STEPS):
        x, y = batch(step)
        x = inject(x, step)
        opt.zero_grad()
        with torch.autocast("cpu", dtype=dtype):
            loss = F.cross_entropy(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(opt)
        finish_step(trace, dtype, scaler, [opt], [model], loss)
    trace.weights(model.named_parameters())


def clipping(dtype, trace):
    model = Mlp(0)
    opt = torch.optim.SGD(model.parameters(), lr=0.2, momentum=0.9)
    scaler = new_scaler(dtype)
    for step in range(STEPS):
        x, y = batch(step)
        x = inject(x, step)
        opt.zero_grad()
        with torch.autocast("cpu", dtype=dtype):
            loss = F.cross_entropy(model(x), y)
        scaler.scale(loss).backward()
        scaler.unscale_(opt)
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.25)
        scaler.step(opt)
        finish_step(trace, dtype, scaler, [opt], [model], loss)
    trace.weights(model.named_parameters())


ACCUMULATE = 4


def accumulation(dtype, trace):
    model = Mlp(0)
    opt = torch.optim.SGD(model.parameters(), lr=0.2, momentum=0.9)
    scaler = new_scaler(dtype)
    for step in range(STEPS):
        opt.zero_grad()
        total = 0.0
        for micro in range(ACCUMULATE):
            x, y = batch(step * ACCUMULATE + micro)
            x = inject(x, step, micro == 1)
            with torch.autocast("cpu", dtype=dtype):
                loss = F.cross_entropy(model(x), y) / ACCUMULATE
            scaler.scale(loss).backward()
            total += float(loss.detach())
        scaler.step(opt)
        finish_step(trace, dtype, scaler, [opt], [model], total)
    trace.weights(model.named_parameters())


def gradient_penalty(dtype, trace):
    model = Mlp(0)
    opt = torch.optim.SGD(model.parameters(), lr=0.2, momentum=0.9)
    scaler = new_scaler(dtype)
    for step in range(STEPS):
        x, y = batch(step)
        x = inject(x, step)
        opt.zero_grad()
        with torch.autocast("cpu", dtype=dtype):
            loss = F.cross_entropy(model(x), y)
        scaled_grads = torch.autograd.grad(scaler.scale(loss), list(model.parameters()), create_graph=True)
        inv_scale = 1.0 / scaler.get_scale()
        with torch.autocast("cpu", dtype=dtype):
            sum_of_squares = None
            for g in scaled_grads:
                s = (g * inv_scale).pow(2).sum()
                sum_of_squares = s if sum_of_squares is None else sum_of_squares + s
            loss = loss + sum_of_squares.sqrt()
        scaler.scale(loss).backward()
        scaler.step(opt)
        finish_step(trace, dtype, scaler, [opt], [model], loss)
    trace.weights(model.named_parameters())


def multiple_models(dtype, trace):
    model0, model1 = Mlp(0), Mlp(1)
    opt0 = torch.optim.SGD(model0.parameters(), lr=0.05, momentum=0.9)
    opt1 = torch.optim.AdamW(model1.parameters(), lr=0.01, weight_decay=0.01)
    scaler = new_scaler(dtype)
    for step in range(STEPS):
        x, y = batch(step)
        x = inject(x, step)
        target = one_hot(y)
        opt0.zero_grad()
        opt1.zero_grad()
        with torch.autocast("cpu", dtype=dtype):
            out0 = model0(x)
            out1 = model1(x)
            loss0 = F.mse_loss(2 * out0 + 3 * out1, target)
            loss1 = F.mse_loss(3 * out0 - 5 * out1, target)
        scaler.scale(loss0).backward(retain_graph=True)
        scaler.scale(loss1).backward()
        scaler.unscale_(opt0)  # as PyTorch's recipe: only to inspect or clip model0's gradients
        scaler.step(opt0)
        scaler.step(opt1)
        finish_step(trace, dtype, scaler, [opt0, opt1], [model0, model1],
                    float(loss0.detach()) + float(loss1.detach()))
    named = [("model0." + k, v) for k, v in model0.named_parameters()]
    named += [("model1." + k, v) for k, v in model1.named_parameters()]
    trace.weights(named)


class MyMM(torch.autograd.Function):
    """PyTorch's example: an fp32 matmul inside an autocast region."""

    @staticmethod
    @torch.amp.custom_fwd(device_type="cpu", cast_inputs=torch.float32)
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return a.mm(b)

    @staticmethod
    @torch.amp.custom_bwd(device_type="cpu")
    def backward(ctx, grad):
        a, b = ctx.saved_tensors
        return grad.mm(b.t()), a.t().mm(grad)


def custom_function(dtype, trace):
    model = Mlp(0)
    # The output layer's weight, stored (HIDDEN, OUT) for MyMM; its bias is unused.
    w2 = torch.nn.Parameter(model.fc2.weight.detach().t().contiguous())
    params = [model.fc1.weight, model.fc1.bias, w2]
    opt = torch.optim.SGD(params, lr=0.2, momentum=0.9)
    scaler = new_scaler(dtype)
    for step in range(STEPS):
        x, y = batch(step)
        x = inject(x, step)
        opt.zero_grad()
        with torch.autocast("cpu", dtype=dtype):
            out = MyMM.apply(model.hidden(x), w2)
            loss = F.cross_entropy(out, y)
        scaler.scale(loss).backward()
        scaler.step(opt)
        finish_step(trace, dtype, scaler, [opt], [model], loss)
    trace.weights([("fc1.weight", model.fc1.weight), ("fc1.bias", model.fc1.bias), ("w2", w2)])


def inference(dtype, trace):
    model = Mlp(0)
    model.eval()
    out = None
    for step in range(STEPS):
        x, y = batch(step)
        with torch.no_grad(), torch.autocast("cpu", dtype=dtype):
            out = model(x)
            loss = F.cross_entropy(out, y)
        trace.step(loss, [], 1.0)
    trace.weights(model.named_parameters())
    trace.out["outputs"] = out.float().reshape(-1).tolist()


RESUME_AT = 12


def resume(dtype, trace):
    def train(model, opt, scaler, first, last):
        for step in range(first, last):
            x, y = batch(step)
            x = inject(x, step)
            opt.zero_grad()
            with torch.autocast("cpu", dtype=dtype):
                loss = F.cross_entropy(model(x), y)
            scaler.scale(loss).backward()
            scaler.step(opt)
            finish_step(trace, dtype, scaler, [opt], [model], loss)

    model = Mlp(0)
    opt = torch.optim.AdamW(model.parameters(), lr=0.01, weight_decay=0.01)
    scaler = new_scaler(dtype)
    train(model, opt, scaler, 0, RESUME_AT)
    buf = io.BytesIO()
    torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "scaler": scaler.state_dict()}, buf)
    buf.seek(0)
    checkpoint = torch.load(buf)
    # A fresh model (other weights), optimizer and scaler (default options) take the checkpoint.
    model = Mlp(5)
    opt = torch.optim.AdamW(model.parameters(), lr=0.01, weight_decay=0.01)
    scaler = torch.amp.GradScaler("cpu")
    model.load_state_dict(checkpoint["model"])
    opt.load_state_dict(checkpoint["optimizer"])
    scaler.load_state_dict(checkpoint["scaler"])
    train(model, opt, scaler, RESUME_AT, STEPS)
    trace.weights(model.named_parameters())


RECIPES = {f.__name__: f for f in (typical, clipping, accumulation, gradient_penalty, multiple_models,
                                   custom_function, inference, resume)}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("recipe", choices=sorted(RECIPES))
    parser.add_argument("--precision", choices=["bf16", "fp16"], required=True)
    args = parser.parse_args()
    torch.set_num_threads(1)
    dtype = torch.bfloat16 if args.precision == "bf16" else torch.float16
    trace = Trace(args.recipe, args.precision)
    RECIPES[args.recipe](dtype, trace)
    trace.dump()


if __name__ == "__main__":
    main()
