#!/usr/bin/env python3
"""Simulator against the analytical model over random layouts, without contention.

Runs `headroom simulate --no-contention --json` (`--contention`: with link sharing) on a seeded random sample of
layouts (two Llama models, the shipped clusters, Megatron with its default sharding, PyTorch FSDP with its default
(ZeRO-3), ZeRO-2 and HSDP; t, c, p, d in 1-8; 1F1B, interleaved with 2 or 4 virtual stages and GPipe where the
framework runs them; 1 to 32 micro-batches per pipeline; no, selective or full recompute) and lists every layout whose
simulated step differs from the analytical one by more than the tolerance, with the share within it and the worst
ratio.

    tools/scripts/sim_vs_model_sweep.py [--headroom build/bin/headroom] [--count 400] [--seed 1] [--tolerance 0.05]
"""
import argparse
import itertools
import json
import random
import subprocess
import sys


def layouts():
    for model, seq in [("llama3.1-8b", 8192), ("llama3.1-70b", 8192), ("llama3.1-8b", 65536)]:
        for cluster in ["dgx-a100-80gb", "h100-94gb-x4", "lumi-mi250x"]:
            for framework, sharding in [("megatron", None), ("pytorch-fsdp", "zero2"), ("pytorch-fsdp", "hsdp"),
                                        ("pytorch-fsdp", None)]:
                for t, c, p, d in itertools.product([1, 2, 4, 8], [1, 2, 4], [1, 2, 4], [1, 2, 4]):
                    for v, m, rc in itertools.product([1, 2, 4, 0], [1, 2, 4, 8, 32], ["none", "selective", "full"]):
                        yield model, seq, cluster, framework, sharding, t, c, p, d, v, m, rc


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--headroom", default="build/bin/headroom")
    ap.add_argument("--count", type=int, default=400)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--tolerance", type=float, default=0.05)
    ap.add_argument("--contention", action="store_true",
                    help="simulate with link sharing (default: every flow alone, as the analytical model prices)")
    a = ap.parse_args()
    cases = list(layouts())
    random.Random(a.seed).shuffle(cases)
    ran, apart, worst = 0, [], 1.0
    for model, seq, cluster, framework, sharding, t, c, p, d, v, m, rc in cases:
        if ran >= a.count:
            break
        if p == 1 and v != 1:
            continue
        cmd = [a.headroom, "simulate", "--model", model, "--cluster", cluster, "--framework", framework,
               "--tp", str(t), "--cp", str(c), "--pp", str(p), "--dp", str(d), "--seq", str(seq), "--mbs", "1",
               "--gbs", str(m * d), "--recompute", rc, "--json"]
        if not a.contention:
            cmd.append("--no-contention")
        if sharding:
            cmd += ["--sharding", sharding]
        if v > 1:
            cmd += ["--vpp", str(v)]
        elif v == 0:
            cmd += ["--schedule", "gpipe"]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode == 2:  # a layout the model or the framework refuses (heads, layers, GPipe): skipped
            continue
        if r.returncode != 0:
            sys.exit(f"{' '.join(cmd)}: exit {r.returncode}: {r.stderr.strip()}")
        j = json.loads(r.stdout)
        ran += 1
        ratio = j["step_time_s"] / j["analytical_step_time_s"]
        worst = max(worst, ratio, 1 / ratio)
        if abs(ratio - 1) > a.tolerance:
            apart.append((ratio, model, seq, cluster, framework, sharding or "default", t, c, p, d, v, m, rc))
    within = 100.0 * (ran - len(apart)) / max(ran, 1)
    print(f"{ran} layouts simulated, {len(apart)} apart by more than {100 * a.tolerance:g}% "
          f"({within:.1f}% within); worst ratio {worst:.3f}")
    print(f"{'sim/model':>9}  {'model':<13} {'seq':>6}  {'cluster':<14} {'framework':<13} {'sharding':<8}"
          f"  t  c  p  d  v   m  recompute")
    for ratio, model, seq, cluster, framework, sharding, t, c, p, d, v, m, rc in sorted(apart):
        print(f"{ratio:9.3f}  {model:<13} {seq:>6}  {cluster:<14} {framework:<13} {sharding:<8} "
              f"{t:2} {c:2} {p:2} {d:2} {v:2} {m:3}  {rc}")


if __name__ == "__main__":
    main()
