"""Reference traces of torch.amp.GradScaler("cpu") for tests/torch/test_torch_amp.cpp.

  python reference.py traces OUT_DIR
      For every scenario: OUT_DIR/<name>.pt with the inputs (initial parameters, batches) and
      Python's trace (per step: loss, scale, growth tracker, how many optimizers skipped their
      step, the parameters after the step), OUT_DIR/<name>_state10.pt with the scaler's state dict after 10 steps
      (torch.save, for the C++ side to resume from), and OUT_DIR/misuse.pt with the messages
      of Python's errors.
  python reference.py resume SCENARIO_PT SCALER_PT PARAMS_PT OUT_PT
      Runs the steps 10.. of a scenario from a scaler state dict and parameters written by
      the C++ side; writes the trace of those steps.

The C++ test runs the same loop line by line with libtorch and tensorcast's
tc::torch_amp::GradScaler and AutocastGuard, on the same inputs, one thread each side.
"""

import sys

import torch
import torch.nn.functional as F

torch.set_num_threads(1)

STEPS = 20
RESUME_AT = 10

# name: (autocast dtype, optimizer, explicit unscale_ + clipping, init_scale, growth_interval,
#        steps whose input holds an inf (the loss and every gradient become inf/NaN))
SCENARIOS = {
    "fp16_sgd_momentum": (torch.float16, "sgd_momentum", False, 2.0**24, 3, [7]),
    "fp16_sgd_clip": (torch.float16, "sgd", True, 2.0**20, 2, [4, 5]),
    "bf16_adam": (torch.bfloat16, "adam", False, 2.0**16, 2, [3, 12]),
    "fp16_adamw_clip": (torch.float16, "adamw", True, 2.0**22, 4, [9]),
    "fp16_two_optimizers": (torch.float16, "two_sgd", False, 2.0**24, 3, [6]),
}


def inputs(name):
    g = torch.Generator().manual_seed(sum(map(ord, name)))
    params = {
        "w1": torch.randn(32, 16, generator=g) * 0.3,
        "b1": torch.randn(32, generator=g) * 0.1,
        "w2": torch.randn(4, 32, generator=g) * 0.3,
        "b2": torch.randn(4, generator=g) * 0.1,
    }
    x = torch.randn(STEPS, 8, 16, generator=g) * 4.0
    y = torch.randn(STEPS, 8, 4, generator=g)
    for s in SCENARIOS[name][5]:
        x[s, 0, 0] = float("inf")
    return params, x, y


def make_optimizers(kind, p):
    if kind == "sgd_momentum":
        return [torch.optim.SGD(p, lr=0.01, momentum=0.9, weight_decay=1e-4)]
    if kind == "sgd":
        return [torch.optim.SGD(p, lr=0.01)]
    if kind == "adam":
        return [torch.optim.Adam(p, lr=1e-3)]
    if kind == "adamw":
        return [torch.optim.AdamW(p, lr=1e-3, weight_decay=0.01)]
    if kind == "two_sgd":
        return [torch.optim.SGD(p[:2], lr=0.01), torch.optim.SGD(p[2:], lr=0.02, momentum=0.5)]
    raise ValueError(kind)


def run(name, params, x, y, scaler, first, last):
    dtype, kind, clip = SCENARIOS[name][:3]
    p = [params[k].clone().requires_grad_() for k in ("w1", "b1", "w2", "b2")]
    opts = make_optimizers(kind, p)
    trace = {"loss": [], "scale": [], "growth_tracker": [], "skipped": [], "params": []}
    for s in range(first, last):
        for o in opts:
            o.zero_grad()
        with torch.autocast("cpu", dtype=dtype):
            h = F.relu(F.linear(x[s], p[0], p[1]))
            out = F.linear(h, p[2], p[3])
        loss = F.mse_loss(out.float(), y[s])
        scaler.scale(loss).backward()
        if clip:
            for o in opts:
                scaler.unscale_(o)
            torch.nn.utils.clip_grad_norm_(p, 1.0)
        skipped = 0  # optimizers whose step was skipped
        for o in opts:
            scaler.step(o)
            skipped += bool(sum(v.item() for v in scaler._found_inf_per_device(o).values()))
        scaler.update()
        trace["loss"].append(loss.detach())
        trace["scale"].append(scaler.get_scale())
        trace["growth_tracker"].append(scaler._get_growth_tracker())
        trace["skipped"].append(skipped)
        trace["params"].append(torch.cat([t.detach().flatten() for t in p]))
    return trace, p


def to_saved(trace):
    return {
        "loss": torch.stack(trace["loss"]),
        "scale": torch.tensor(trace["scale"], dtype=torch.float64),
        "growth_tracker": torch.tensor(trace["growth_tracker"], dtype=torch.int64),
        "skipped": torch.tensor(trace["skipped"], dtype=torch.int64),
        "params": torch.stack(trace["params"]),
    }


def scaler_for(name):
    return torch.amp.GradScaler("cpu", init_scale=SCENARIOS[name][3], growth_interval=SCENARIOS[name][4])


def traces(out_dir):
    for name in SCENARIOS:
        params, x, y = inputs(name)
        scaler = scaler_for(name)
        trace, _ = run(name, params, x, y, scaler, 0, STEPS)
        saved = {"x": x, "y": y, **params, **to_saved(trace)}
        torch.save(saved, f"{out_dir}/{name}.pt")
        # The state after RESUME_AT steps, from a second run stopped there.
        scaler = scaler_for(name)
        run(name, params, x, y, scaler, 0, RESUME_AT)
        torch.save(scaler.state_dict(), f"{out_dir}/{name}_state{RESUME_AT}.pt")
    torch.save(misuse(), f"{out_dir}/misuse.pt")


def message(fn):
    try:
        fn()
    except (RuntimeError, AssertionError, ValueError) as e:
        return str(e)
    raise AssertionError("no error")


def misuse():
    def setup():
        w = torch.ones(3, requires_grad=True)
        opt = torch.optim.SGD([w], lr=0.1)
        return w, opt, torch.amp.GradScaler("cpu")

    msgs = {}
    w, opt, sc = setup()
    msgs["step_before_scale"] = message(lambda: sc.step(opt))
    msgs["update_before_scale"] = message(lambda: sc.update())
    msgs["unscale_before_scale"] = message(lambda: sc.unscale_(opt))
    sc.scale((w * 2).sum()).backward()
    sc.unscale_(opt)
    msgs["unscale_twice"] = message(lambda: sc.unscale_(opt))
    sc.step(opt)
    msgs["unscale_after_step"] = message(lambda: sc.unscale_(opt))
    msgs["step_twice"] = message(lambda: sc.step(opt))
    sc.update()
    msgs["update_without_checks"] = message(lambda: sc.update())
    w, opt, sc = setup()
    sc.scale((w * 2).sum())  # no backward: no gradients
    msgs["step_without_grads"] = message(lambda: sc.step(opt))
    w16 = torch.ones(3, dtype=torch.float16, requires_grad=True)
    opt16 = torch.optim.SGD([w16], lr=0.1)
    sc16 = torch.amp.GradScaler("cpu")
    sc16.scale((w16 * 2).sum()).backward()
    msgs["unscale_fp16"] = message(lambda: sc16.unscale_(opt16))
    msgs["load_empty"] = message(lambda: torch.amp.GradScaler("cpu").load_state_dict({}))
    msgs["growth_factor"] = message(lambda: torch.amp.GradScaler("cpu", growth_factor=1.0))
    msgs["backoff_factor"] = message(lambda: torch.amp.GradScaler("cpu", backoff_factor=1.0))
    return msgs


def resume(scenario_pt, scaler_pt, params_pt, out_pt):
    name = scenario_pt.rsplit("/", 1)[-1][: -len(".pt")]
    saved = torch.load(scenario_pt)
    # Written by the test with torch::pickle_save, whose type tags torch.load refuses by
    # default; the scaler's file (GradScaler::save) loads with the default.
    params = torch.load(params_pt, weights_only=False)
    scaler = scaler_for(name)
    scaler.load_state_dict(torch.load(scaler_pt))
    trace, _ = run(name, params, saved["x"], saved["y"], scaler, RESUME_AT, STEPS)
    torch.save(to_saved(trace), out_pt)


if __name__ == "__main__":
    if sys.argv[1] == "traces":
        traces(sys.argv[2])
    elif sys.argv[1] == "resume":
        resume(*sys.argv[2:6])
    else:
        raise SystemExit(__doc__)
