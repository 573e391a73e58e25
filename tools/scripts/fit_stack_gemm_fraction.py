#!/usr/bin/env python3
"""Fit a framework's stack_gemm_fraction: the one coefficient between a device's isolated GEMM curve (data/kernels/)
and the GEMMs of that framework's training steps, on the published runs of dense models on GPUs priced by their
curves (data/reference/published_fp8_priced.csv), scored leave-one-source-out.

    tools/scripts/fit_stack_gemm_fraction.py --headroom build/bin/headroom [--write]

Runs with experts are left out: their step also holds expert load imbalance and token permutation, which the model
does not price in full, and a GEMM fraction fitted on them would carry that cost to every dense model.
"""
from __future__ import annotations

import argparse
import csv
import json
import math
import pathlib
import shutil
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[2]


def curve_gpus(data: pathlib.Path) -> set[str]:
    return {p.stem for p in (data / "gpus").glob("*.json") if "kernel_curves" in json.loads(p.read_text())}


def errors(headroom: str, data: pathlib.Path, framework: str, fraction: float, ids: set[str]) -> dict[str, tuple]:
    with tempfile.TemporaryDirectory() as tmp:
        d = pathlib.Path(tmp) / "data"
        shutil.copytree(data, d)
        perf = d / "perf" / f"{framework}.json"
        doc = json.loads(perf.read_text())
        doc["stack_gemm_fraction"] = fraction
        perf.write_text(json.dumps(doc, indent=2) + "\n")
        out = subprocess.run([headroom, "validate", "--json"], env={"HEADROOM_DATA_DIR": str(d), "PATH": "/usr/bin"},
                             capture_output=True, text=True, check=False)
        runs = json.loads(out.stdout)["published_fp8_runs"]["runs"]
    return {r["id"]: (r["source"], math.log(r["predicted_step_time_s"] / r["measured_step_time_s"]))
            for r in runs if r["id"] in ids}


def best(table: dict[float, dict[str, tuple]], keep) -> tuple[float, float]:
    scored = []
    for f, rows in table.items():
        e = [abs(x) for s, x in rows.values() if keep(s)]
        scored.append((sum(e) / len(e), f))
    score, f = min(scored)
    return f, score


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--headroom", required=True)
    ap.add_argument("--data", default=str(ROOT / "data"))
    ap.add_argument("--framework", default="megatron")
    ap.add_argument("--write", action="store_true", help="write the fitted value into data/perf/<framework>.json")
    a = ap.parse_args()
    data = pathlib.Path(a.data)
    gpus = curve_gpus(data)
    rows = list(csv.DictReader(open(data / "reference" / "published_fp8_priced.csv", encoding="utf-8")))
    ids = {r["id"] for r in rows if r["gpu"] in gpus}
    if not ids:
        print("fit_stack_gemm_fraction: no published dense run on a GPU with kernel curves", file=sys.stderr)
        return 2
    grid = [round(0.50 + 0.01 * i, 2) for i in range(51)]  # the box: half the isolated curve to all of it
    table = {}
    for i, f in enumerate(grid):
        table[f] = errors(a.headroom, data, a.framework, f, ids)
        print(f"[{i + 1}/{len(grid)}] fraction {f:.2f}", file=sys.stderr, flush=True)
    sources = sorted({s for s, _ in next(iter(table.values())).values()})
    fitted, score = best(table, lambda s: True)
    print(f"runs: {len(ids)} on {', '.join(sorted(gpus))}; fitted stack_gemm_fraction {fitted:.2f}, "
          f"mean |log error| {score:.3f}")
    print("leave one source out (fit on the others, score the source):")
    for held in sources:
        f, _ = best(table, lambda s, h=held: s != h)
        e = [abs(math.expm1(x)) for s, x in table[f].values() if s == held]
        print(f"  {held[:60]:60s} fraction {f:.2f}  held-out mean |error| {100 * sum(e) / len(e):.1f}% ({len(e)} runs)")
    if a.write:
        perf = data / "perf" / f"{a.framework}.json"
        doc = json.loads(perf.read_text())
        doc["stack_gemm_fraction"] = fitted
        perf.write_text(json.dumps(doc, indent=2, ensure_ascii=False) + "\n")
        print(f"wrote stack_gemm_fraction {fitted:.2f} into {perf}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
