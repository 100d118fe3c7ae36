#!/usr/bin/env python3
"""Runs one AMP recipe program and PyTorch's version of it (reference.py) and compares them.

    python compare.py RECIPE bf16|fp16 PROGRAM [ARGS...]

runs `PROGRAM ARGS... --precision P` (ARGS: e.g. the recipe, for a program of all eight).

Exact: the number of steps, which optimizer steps were skipped, and the scale after every
update. The forced overflows are built so that every skip comes from an activation
gradient, which both compute alike (examples/amp_recipes/recipe.h; reference.py checks it).

Within tolerances: the losses and the final weights. The two engines round the same
operations to 16 bits but accumulate the products in other orders (oneDNN or tensorcast's
kernels against PyTorch's CPU GEMMs), and tensorcast keeps an autocast linear's weight
gradient in fp32 where PyTorch rounds it to 16 bits (docs/amp.md). Each step thus differs
by a few units of the 16-bit unit roundoff u (bf16 2^-8, fp16 2^-11), and the differences
of the weights feed every later step, growing at most like the square root of the number
of steps when the roundings are independent. So:

  losses:   |loss_tc - loss_pt| <= LOSS_K * u * sqrt(steps) * max(1, |loss_pt|)
  weights:  per tensor, ||w_tc - w_pt||_2 <= WEIGHT_K * u * sqrt(steps) * ||w_pt||_2

With 24 steps the bounds are 4.9 u for LOSS_K = 1 and WEIGHT_K = 1 (the SGD recipes),
over the largest differences measured: 0.3 u (losses) and 1.0 u (weights, typical bf16);
docs/amp.md lists them all, and this script prints them each run. AdamW divides each
gradient by its own running magnitude, so an element whose gradient is near zero moves by
about lr whatever the rounding made of it: the recipes with AdamW (multiple_models' second
model, resume) get WEIGHT_K = 4, 19.6 u, over 8.8 u measured (multiple_models bf16).
The gradient penalty's update holds a Hessian-vector product formed from 16-bit first
gradients, each factor rounded, so its rounding differences are larger: WEIGHT_K = 4 over
5.8 u (bf16) and 9.6 u (fp16) measured. With autocast off in both programs the same recipe
agrees to 2e-7 (float32's roundoff): the formulas are PyTorch's, the rest is rounding.
Inference computes one forward from identical weights: its outputs (as its losses) may
differ only by the order of the 16-bit products' fp32 sums, within the losses' bound.
"""
import json
import math
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
UNIT_ROUNDOFF = {"bf16": 2.0**-8, "fp16": 2.0**-11}
LOSS_K = 1.0
WEIGHT_K = {"typical": 1.0, "clipping": 1.0, "accumulation": 1.0, "gradient_penalty": 4.0, "custom_function": 1.0,
            "inference": 1.0,
            "multiple_models": 4.0, "resume": 4.0}


def run(cmd):
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if proc.returncode != 0:
        sys.exit(f"{' '.join(cmd)} exited with {proc.returncode}:\n{proc.stderr}")
    return json.loads(proc.stdout)


def norm(v):
    return math.sqrt(sum(x * x for x in v))


def main():
    recipe, precision, program = sys.argv[1:4]
    args = sys.argv[4:]
    if not os.path.exists(program):
        sys.exit(f"{program} is not built")
    tc = run([program, *args, "--precision", precision])
    pt = run([sys.executable, os.path.join(HERE, "reference.py"), recipe, "--precision", precision])
    u = UNIT_ROUNDOFF[precision]
    failures = []

    steps_tc, steps_pt = tc["steps"], pt["steps"]
    if len(steps_tc) != len(steps_pt):
        sys.exit(f"{recipe} {precision}: {len(steps_tc)} steps against PyTorch's {len(steps_pt)}")
    n = len(steps_pt)
    loss_tol = LOSS_K * u * math.sqrt(n)
    max_loss = 0.0
    for i, (a, b) in enumerate(zip(steps_tc, steps_pt)):
        if a["skipped"] != b["skipped"]:
            failures.append(f"step {i}: skipped {a['skipped']}, PyTorch {b['skipped']}")
        if a["scale"] != b["scale"]:
            failures.append(f"step {i}: scale {a['scale']}, PyTorch {b['scale']}")
        if (a["loss"] is None) != (b["loss"] is None):
            failures.append(f"step {i}: loss {a['loss']}, PyTorch {b['loss']}")
        elif a["loss"] is not None:
            d = abs(a["loss"] - b["loss"]) / max(1.0, abs(b["loss"]))
            max_loss = max(max_loss, d)
            if d > loss_tol:
                failures.append(f"step {i}: loss {a['loss']:.9g}, PyTorch {b['loss']:.9g}")

    weight_tol = WEIGHT_K[recipe] * u * math.sqrt(n)
    max_weight, max_abs = 0.0, 0.0
    if sorted(tc["weights"]) != sorted(pt["weights"]):
        failures.append(f"weights {sorted(tc['weights'])}, PyTorch {sorted(pt['weights'])}")
    named = [(k, tc["weights"][k], v) for k, v in pt["weights"].items() if k in tc["weights"]]
    if "outputs" in pt:
        named.append(("outputs", tc.get("outputs", []), pt["outputs"]))
    for name, a, b in named:
        if len(a) != len(b):
            failures.append(f"{name}: {len(a)} values, PyTorch {len(b)}")
            continue
        diff = [x - y for x, y in zip(a, b)]
        rel = norm(diff) / max(norm(b), 1e-30)
        max_weight = max(max_weight, rel)
        max_abs = max([max_abs] + [abs(d) for d in diff])
        tol = loss_tol if name == "outputs" else weight_tol
        if rel > tol:
            failures.append(f"{name}: relative difference {rel:.3g} > {tol:.3g}")

    skips = sum(any(s["skipped"]) for s in steps_pt)
    print(f"{recipe} {precision}: {n} steps, {skips} skipped, scales and skips identical" if not any(
        "skipped" in f or "scale" in f for f in failures) else f"{recipe} {precision}: {n} steps")
    print(f"  losses:  max relative difference {max_loss:.3g} ({max_loss / u:.2f} u; bound {loss_tol:.3g})")
    print(f"  weights: max relative L2 difference per tensor {max_weight:.3g} ({max_weight / u:.2f} u; bound "
          f"{weight_tol:.3g}), max absolute {max_abs:.3g}")
    if failures:
        print("\n".join(["FAILED:"] + failures))
        sys.exit(1)


if __name__ == "__main__":
    main()
