#!/usr/bin/env python3
"""Draw PaRO Figure 5 from `headroom comm --compare --json`.

Total intra- and inter-group communication volume of one mini-batch (bars, in units of Psi) and the
single-GPU memory of model states (line, GiB) for every named scheme.

    build/bin/headroom comm --compare --params 7e9 --gpus 64 --group-size 8 --accum 8 --json > fig5.json
    tools/plot_paro.py fig5.json -o fig5.png          # or: ... --json | tools/plot_paro.py - -o fig5.png
"""
import argparse
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

GIB = 2.0**30


def load(path):
    if path == "-":
        return json.load(sys.stdin)
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def plot(doc, out):
    setup = doc["setup"]
    psi = setup["params"]
    schemes = doc["schemes"]
    names = [s["name"] for s in schemes]
    intra = [s["volume"]["intra"] / psi for s in schemes]
    inter = [s["volume"]["inter"] / psi for s in schemes]
    memory = [s["memory_bytes"]["total"] / GIB for s in schemes]

    fig, ax = plt.subplots(figsize=(11, 5.2))
    x = range(len(names))
    width = 0.38
    ax.bar([i - width / 2 for i in x], intra, width, label="intra-group volume", color="#f28e2b")
    ax.bar([i + width / 2 for i in x], inter, width, label="inter-group volume", color="#59a14f")
    ax.set_yscale("log")
    positive = [v for v in intra + inter if v > 0] or [1.0]
    ax.set_ylim(min(1.0, min(positive) / 2), max(positive) * 4)
    ax.set_ylabel("volume per mini-batch, all GPUs\n(× Ψ elements, log scale)")
    ax.set_xticks(list(x))
    ax.set_xticklabels(names, rotation=30, ha="right")
    for i, (a, b) in enumerate(zip(intra, inter)):
        for dx, v in ((-width / 2, a), (width / 2, b)):
            if v > 0:
                ax.text(i + dx, v * 1.08, f"{v:.0f}" if v >= 10 else f"{v:.2g}", ha="center", va="bottom", fontsize=7)

    mem_ax = ax.twinx()
    mem_ax.plot(list(x), memory, "o-", color="#4e79a7", label="model states per GPU")
    mem_ax.set_ylabel("model states per GPU (GiB)")
    mem_ax.set_ylim(0, max(memory) * 1.3)

    handles = ax.get_legend_handles_labels()
    mem_handles = mem_ax.get_legend_handles_labels()
    ax.legend(handles[0] + mem_handles[0], handles[1] + mem_handles[1], loc="upper center", ncol=3, fontsize=8)
    ax.set_title(
        f"PaRO Figure 5: Ψ = {psi / 1e9:g}B, N = {setup['gpus']}, g = {setup['groups']}, "
        f"M = {setup['group_size']}, s = {setup['accum']}"
    )
    fig.tight_layout()
    fig.savefig(out, dpi=130)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("input", help="JSON from `headroom comm --compare --json`, or - for stdin")
    parser.add_argument("-o", "--output", default="paro_figure5.png", help="image to write (PNG, SVG, PDF)")
    args = parser.parse_args()
    doc = load(args.input)
    if "schemes" not in doc or "setup" not in doc:
        sys.exit("error: input is not the output of `headroom comm --compare --json`")
    plot(doc, args.output)


if __name__ == "__main__":
    main()
