#!/usr/bin/env python3
"""Plots of headroom's JSON output (matplotlib).

Each subcommand reads the `--json` document of one headroom command from a file or stdin (-), or, with the
command's flags after `--`, runs that command through the `headroom` Python package (PYTHONPATH=build/python):

    tools/scripts/plot.py memory  est.json -o memory.png      # headroom estimate ... --json
    tools/scripts/plot.py mtsl    a.json b.json -o mtsl.png   # mtsl --sweep lora-rank=...|gpus=... --json: a curve each
    tools/scripts/plot.py rank    rank.json -o rank.png       # headroom rank ... --top 200 --json
    tools/scripts/plot.py paro    fig5.json -o fig5.png       # headroom comm --compare ... --json (PaRO Figure 5)
    tools/scripts/plot.py calibration data/profiles/cpu-example-quick.json -o fits.png   # headroom calibrate profile
    tools/scripts/plot.py memory -o memory.png -- --model llama3.1-8b --gpu h100-94gb --seq 8192 --tp 2 --gpus 8

The image format follows the extension (PNG, SVG, PDF); the file is written atomically (temporary file, rename).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import stat
import sys
import tempfile
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

GIB = 2.0**30
COMMANDS = {"memory": "estimate", "mtsl": "mtsl", "rank": "rank", "paro": "comm"}


# ---- input and output ----


def load(path: str) -> dict:
    if path == "-":
        return json.load(sys.stdin)
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def run_headroom(command: str, flags: list[str]) -> dict:
    """The JSON document of `headroom COMMAND FLAGS... --json`, through the Python package."""
    import headroom

    if command == "comm" and "--compare" not in flags:
        flags = [*flags, "--compare"]
    return json.loads(headroom.run(command, *flags, "--json"))


def check_output(out: str) -> bool:
    """The rule of headroom's C++ writers (atomic_file.hpp, check_output_path), checked before any work:
    a regular file or a new name is replaced atomically; a character device, FIFO or socket is written into
    (True), never replaced; a link is followed; a directory, a missing directory or a dangling link is an
    error naming the path."""
    if not out:
        raise ValueError("-o is empty: give a file path")
    if os.path.exists(out):  # follows links
        mode = os.stat(out).st_mode
        if stat.S_ISREG(mode):
            return False
        if stat.S_ISDIR(mode):
            raise ValueError(f"-o {out} is a directory: give a file path")
        if stat.S_ISCHR(mode) or stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode):
            return True
        raise ValueError(f"-o {out} is neither a regular file nor a stream (device, pipe): not written")
    if os.path.islink(out):
        raise ValueError(f"-o {out} is a symbolic link to nothing: not followed")
    directory = os.path.dirname(os.path.abspath(out))
    if not os.path.isdir(directory):
        raise ValueError(f"-o {out}: the directory {directory} does not exist")
    return False


def save(fig, out: str, dpi: int = 130) -> None:
    """Writes the figure to a temporary file next to `out`, then renames it over `out`; a device or pipe is
    written into instead (renaming over /dev/null would replace it)."""
    ext = os.path.splitext(out)[1] or ".png"
    try:
        if check_output(out):
            with open(out, "wb") as f:
                fig.savefig(f, dpi=dpi, format=ext.lstrip(".").lower())
            return
        out = os.path.realpath(out)  # a link stays a link: the file it names is replaced
        directory = os.path.dirname(out)
        fd, tmp = tempfile.mkstemp(prefix=".plot-", suffix=ext, dir=directory)
        umask = os.umask(0)
        os.umask(umask)
        try:
            os.chmod(tmp, 0o666 & ~umask)  # mkstemp creates 0600
            with os.fdopen(fd, "wb") as f:
                fig.savefig(f, dpi=dpi, format=ext.lstrip(".").lower())
            os.replace(tmp, out)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise
    finally:
        plt.close(fig)


def need(doc: dict, keys: tuple[str, ...], what: str) -> None:
    if not isinstance(doc, dict) or any(k not in doc for k in keys):
        raise ValueError(f"input is not the output of `{what}`")


def layout_label(layout: dict) -> str:
    pp = f"{layout['pp']}" + (f"x{layout['vpp']}" if layout.get("vpp", 1) > 1 else "")
    text = f"tp{layout['tp']} cp{layout['cp']} pp{pp} dp{layout['dp']}"
    if "mbs" in layout:
        text += f" mbs{layout['mbs']}"
    return text


def sharding_code(layout: dict) -> str:
    if "sharding_code" in layout:
        return layout["sharding_code"]
    s = layout.get("sharding", {})
    return s.get("params", "?") + s.get("grads", "?") + s.get("optimizer", "?")


# ---- memory: stacked per-stage breakdown with the capacity line ----

PARTS = [("params", "parameters", "#4e79a7"), ("grads", "gradients", "#f28e2b"),
         ("optimizer", "optimizer states", "#59a14f"), ("activations", "activations", "#e15759"),
         ("residual", "residual (context, buffers)", "#bab0ac")]


def plot_memory(doc: dict, out: str) -> None:
    need(doc, ("memory", "layout"), "headroom estimate --json")
    mem, layout = doc["memory"], doc["layout"]
    stages = mem["stages"]
    x = list(range(len(stages)))
    fig, ax = plt.subplots(figsize=(max(6.5, 1.0 + 0.55 * len(stages)), 5.2))
    bottom = [0.0] * len(stages)
    for key, label, color in PARTS:
        values = [s[key] / GIB for s in stages]
        ax.bar(x, values, 0.65, bottom=bottom, label=label, color=color, edgecolor="white", linewidth=0.5)
        bottom = [b + v for b, v in zip(bottom, values)]
    capacity = mem["capacity_gib"]
    ax.axhline(capacity, color="black", linestyle="--", linewidth=1.2, label=f"usable memory {capacity:.1f} GiB")
    peak_stage = mem["peak_stage"]
    ax.annotate(f"peak {mem['peak_gib']:.1f} GiB\n{mem['verdict']}, margin {mem['margin_gib']:+.1f} GiB",
                xy=(peak_stage, bottom[peak_stage]), xytext=(0, 6), textcoords="offset points", ha="center",
                va="bottom", fontsize=8)
    top = max(capacity, max(bottom))
    ax.set_ylim(0, top * 1.32)
    ax.set_xticks(x)
    ax.set_xticklabels([str(s["stage"]) for s in stages])
    ax.set_xlabel("pipeline stage")
    ax.set_ylabel("memory per GPU (GiB)")
    model = doc["model"]["name"] if isinstance(doc.get("model"), dict) else doc.get("model", "")
    ax.set_title(f"{model} on {layout['gpus']} x {doc.get('gpu', '')}: {layout_label(layout)}, "
                 f"{sharding_code(layout)}\nseq {layout['seq']}, gbs {layout['gbs']}, recompute "
                 f"{layout['recompute']}, {doc.get('framework', '')}", fontsize=10)
    ax.legend(loc="upper left", ncol=3, fontsize=8, framealpha=0.9)
    fig.tight_layout()
    save(fig, out)


# ---- mtsl: MTSL over LoRA rank or GPU count, one curve per input ----


def plot_mtsl(docs: list[dict], out: str) -> None:
    for d in docs:
        need(d, ("sweep", "layout"), "headroom mtsl --sweep ... --json")
    variables = {d["sweep"]["variable"] for d in docs}
    if len(variables) != 1:
        raise ValueError("all inputs must sweep the same variable (lora-rank or gpus)")
    variable = variables.pop()
    key = "gpus" if variable == "gpus" else "lora_rank"
    fig, ax = plt.subplots(figsize=(7.5, 5))
    xs_all = []
    for d in docs:
        pts = d["sweep"]["points"]
        xs = [p[key] for p in pts]
        ys = [p["mtsl_tokens"] / 1000 for p in pts]
        xs_all += xs
        lay = d["layout"]
        label = f"{layout_label(lay)} {sharding_code(lay)}" if variable == "lora-rank" else \
            f"tp{lay['tp']} cp{lay['cp']} pp{lay['pp']} {sharding_code(lay)}"
        line, = ax.plot(xs, ys, "o-", label=label)
        zeros = [x for x, y in zip(xs, ys) if y == 0]
        if zeros:
            ax.plot(zeros, [0] * len(zeros), "x", color=line.get_color(), markersize=10, mew=2)
    if all(v > 0 and (v & (v - 1)) == 0 for v in xs_all):
        ax.set_xscale("log", base=2)
    ax.set_xticks(sorted(set(xs_all)))
    ax.set_xticklabels([str(v) for v in sorted(set(xs_all))])
    ax.minorticks_off()
    ax.set_xlabel("LoRA rank" if variable == "lora-rank" else "GPUs")
    ax.set_ylabel("maximum trainable sequence length (thousand tokens)")
    ax.set_ylim(bottom=0)
    first = docs[0]
    ax.set_title(f"MTSL of {first['model']} on {first['gpu']} ({first['framework']}); x = no sequence fits",
                 fontsize=10)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    save(fig, out)


# ---- rank: memory vs throughput, Pareto front ----


def plot_rank(doc: dict, out: str) -> None:
    need(doc, ("layouts", "pareto"), "headroom rank --json")
    rows = doc["layouts"]
    if not rows:
        raise ValueError("no layout fits: nothing to plot")
    fig, ax = plt.subplots(figsize=(12, 5.8))
    ax.scatter([r["peak_gib"] for r in rows], [r["tokens_per_s"] / 1000 for r in rows], s=18, color="#9fb7d3",
               label=f"layouts that fit (fastest {len(rows)} of {doc['fitting']})")
    front = sorted(doc["pareto"], key=lambda r: r["peak_gib"])
    fx = [r["peak_gib"] for r in front]
    fy = [r["tokens_per_s"] / 1000 for r in front]
    ax.plot(fx, fy, "o-", color="#e15759", markersize=6, drawstyle="steps-post", label="Pareto front")
    # Numbered on the plot, spelled out beside it: layout names are too long to place next to close points.
    # Points closer than ~2% of the axes share one label ("1-4", "6,7").
    x_span = (max(r["peak_gib"] + r["margin_gib"] for r in rows) or 1.0) * 1.05
    y_span = max(r["tokens_per_s"] for r in rows) / 1000 * 1.15
    groups: list[list[int]] = []
    for i in range(len(front)):
        if groups and abs(fx[i] - fx[groups[-1][0]]) < 0.02 * x_span and abs(fy[i] - fy[groups[-1][0]]) < 0.03 * y_span:
            groups[-1].append(i)
        else:
            groups.append([i])
    for g in groups:
        pair = f"{g[0] + 1},{g[1] + 1}" if len(g) == 2 else f"{g[0] + 1}-{g[-1] + 1}"
        text = str(g[0] + 1) if len(g) == 1 else pair
        ax.annotate(text, (fx[g[0]], fy[g[0]]), xytext=(-4, 5), textcoords="offset points", fontsize=7,
                    ha="right", color="#7a1f20", fontweight="bold")
    names = []
    for i, r in enumerate(front):
        lay = r["layout"]
        names.append(f"{i + 1:>2}  {layout_label(lay)} {sharding_code(lay)} rc:{lay['recompute']}  "
                     f"{r['peak_gib']:.1f} GiB, {r['tokens_per_s'] / 1000:.1f}k tok/s")
    ax.text(1.02, 1.0, "Pareto front (memory ascending)\n" + "\n".join(names), transform=ax.transAxes,
            fontsize=7, va="top", ha="left", family="monospace")
    best = rows[0]
    ax.scatter([best["peak_gib"]], [best["tokens_per_s"] / 1000], marker="*", s=220, color="#f1ce63",
               edgecolor="black", zorder=5, label="fastest")
    capacity = best["peak_gib"] + best["margin_gib"]
    ax.axvline(capacity, color="black", linestyle="--", linewidth=1.2, label=f"usable memory {capacity:.1f} GiB")
    ax.set_xlim(0, capacity * 1.05)
    ax.set_ylim(0, max(r["tokens_per_s"] for r in rows) / 1000 * 1.15)
    ax.set_xlabel("predicted peak memory per GPU (GiB)")
    ax.set_ylabel("predicted throughput (thousand tokens/s)")
    ax.set_title(f"headroom rank: {doc['model']} on {doc['gpus']} x {doc['gpu']}, seq {doc['seq']}, "
                 f"gbs {doc['gbs']} ({doc['framework']})", fontsize=10)
    ax.grid(True, alpha=0.3)
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    save(fig, out)


# ---- paro: PaRO Figure 5 ----


def plot_paro(doc: dict, out: str) -> None:
    """Intra-/inter-group volume of one mini-batch (bars, × Ψ) and model states per GPU (line, GiB)."""
    need(doc, ("schemes", "setup"), "headroom comm --compare --json")
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
    save(fig, out)


# ---- calibration: measured points and fitted curves of a profile ----


def _shape(m, n, k, h):
    return m / (m + h) * n / (n + h) * k / (k + h)


def _wave(m, n, units, tile):
    if units <= 0:
        return 1.0
    tiles = math.ceil(m / tile) * math.ceil(n / tile)
    return tiles / (math.ceil(tiles / units) * units)


def plot_calibration(doc: dict, out: str) -> None:
    need(doc, ("format", "raw"), "headroom calibrate (a profile)")
    if doc["format"] != "headroom-profile":
        raise ValueError("input is not a headroom profile")
    peak = doc["peak"]["TFLOPs"]
    raw = doc["raw"]
    panels = [p for p in ("gemm", "attention", "collectives") if doc.get(p)]
    if not panels:
        raise ValueError("the profile has no fits to plot")
    fig, axes = plt.subplots(1, len(panels), figsize=(5.4 * len(panels), 4.8), squeeze=False)
    axes = axes[0]
    machine = doc.get("machine", {})
    for ax, panel in zip(axes, panels):
        if panel == "gemm":
            g = doc["gemm"]
            pts = raw.get("gemm", [])
            flops = [2.0 * p["m"] * p["n"] * p["k"] for p in pts]
            ax.scatter(flops, [p["TFLOPs"] / peak for p in pts], s=16, color="#4e79a7", label="measured")
            fit = [g["efficiency"] * _shape(p["m"], p["n"], p["k"], g["half_dim"]) *
                   _wave(p["m"], p["n"], g["wave_units"], g["tile"]) for p in pts]
            ax.scatter(flops, fit, s=22, marker="x", color="#e15759", label="fit at the same shapes")
            if pts:  # the square GEMMs spanning the measured sizes
                lo, hi = (min(flops) / 2) ** (1 / 3), (max(flops) / 2) ** (1 / 3)
                ds = [lo * (hi / lo) ** (i / 100) for i in range(101)]
                ax.plot([2.0 * d**3 for d in ds], [g["efficiency"] * _shape(d, d, d, g["half_dim"]) for d in ds],
                        color="#e15759", linewidth=1, alpha=0.7, label="fit, square m = n = k (no waves)")
            ax.set_xscale("log")
            ax.set_xlabel("GEMM size 2·m·n·k (FLOP)")
            ax.set_ylabel(f"efficiency (fraction of peak {peak:.3g} TFLOP/s)")
            ax.set_title(f"GEMM: e·m/(m+h)·n/(n+h)·k/(k+h)·wave\ne = {g['efficiency']:.3f}, "
                         f"h = {g['half_dim']:.1f}, R² of time = {g['r2']:.3f}", fontsize=9)
            ax.set_ylim(0, 1.05 * max([p["TFLOPs"] / peak for p in pts] + fit + [g["efficiency"]]))
        elif panel == "attention":
            acc = defaultdict(lambda: [0.0, 0.0])  # (head_dim, causal, seq) -> flops, seconds (fwd + bwd)
            for p in raw.get("attention", []):
                seconds = p["time_us"] * 1e-6
                a = acc[(p["head_dim"], p["causal"], p["seq"])]
                a[0] += p["TFLOPs"] * 1e12 * seconds
                a[1] += seconds
            for i, f in enumerate(doc["attention"]["fits"]):
                color = plt.cm.tab10(i % 10)
                keys = sorted(k for k in acc if k[0] == f["head_dim"] and k[1] == f["causal"])
                seqs = [k[2] for k in keys]
                eff = [acc[k][0] / acc[k][1] / (peak * 1e12) for k in keys]
                tag = f"d = {f['head_dim']}, {'causal' if f['causal'] else 'full'}"
                ax.scatter(seqs, eff, s=18, color=color, label=f"measured fwd+bwd, {tag}")
                if seqs:
                    ss = [min(seqs) * (max(seqs) / min(seqs)) ** (j / 100) for j in range(101)]
                    ax.plot(ss, [f["efficiency"] * s / (s + f["half_tokens"]) for s in ss], color=color,
                            label=f"fit e = {f['efficiency']:.3f}, s½ = {f['half_tokens']:.0f}, R² = {f['r2']:.3f}")
            ax.set_xscale("log", base=2)
            ax.set_xlabel("sequence length s (tokens)")
            ax.set_ylabel(f"efficiency (fraction of peak {peak:.3g} TFLOP/s)")
            ax.set_ylim(bottom=0)
            ax.set_title("attention: e·s/(s + s½), forward + backward", fontsize=9)
        else:
            by = defaultdict(list)
            for p in raw.get("collectives", []):
                by[(p["op"], p["ranks"])].append(p)
            for i, f in enumerate(doc["collectives"]["fits"]):
                color = plt.cm.tab10(i % 10)
                pts = sorted(by.get((f["op"], f["ranks"]), []), key=lambda p: p["size_B"])
                label = f"{f['op']} x{f['ranks']} ({f['level']}, R² {f['r2']:.2f})"
                if pts:
                    ax.scatter([p["size_B"] for p in pts], [p["time_us"] for p in pts], s=10, color=color)
                for regime in ("small", "large"):
                    r = f[regime]
                    lo, hi = r["min_size_B"], r["max_size_B"]
                    xs = [lo * (hi / lo) ** (j / 50) for j in range(51)] if hi > lo else [lo]
                    ax.plot(xs, [r["alpha_us"] + r["beta_us_per_MiB"] * x / 2**20 for x in xs], color=color,
                            linestyle="-" if regime == "large" else "--", linewidth=1.2,
                            label=label if regime == "large" else None)
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.set_xlabel("message size (bytes)")
            ax.set_ylabel("time (µs)")
            ax.set_title("collectives: α + β·size per regime\n(dashed: small messages, solid: large)", fontsize=9)
        ax.grid(True, alpha=0.3, which="both" if panel == "collectives" else "major")
        ax.legend(fontsize=6.5 if panel == "collectives" else 7, loc="best")
    fig.suptitle(f"calibration profile: {machine.get('device', '?')} ({machine.get('backend', '?')}), "
                 f"{doc.get('date', '')}" + (" (partial)" if doc.get("partial") else ""), fontsize=10)
    fig.tight_layout()
    save(fig, out)


PLOTS = {"memory": plot_memory, "rank": plot_rank, "paro": plot_paro, "calibration": plot_calibration}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    flags: list[str] = []
    if "--" in argv:
        cut = argv.index("--")
        argv, flags = argv[:cut], argv[cut + 1:]
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="kind", required=True)
    helps = {"memory": "stacked per-stage memory with the capacity line (headroom estimate --json)",
             "mtsl": "MTSL over LoRA rank or GPU count, a curve per input (headroom mtsl --sweep --json)",
             "rank": "memory vs throughput of the ranked layouts, Pareto front (headroom rank --json)",
             "paro": "PaRO Figure 5: communication volume and model-state memory (headroom comm --compare --json)",
             "calibration": "measured points and fitted curves of a calibration profile (headroom calibrate)"}
    for kind, text in helps.items():
        p = sub.add_parser(kind, help=text, description=text)
        p.add_argument("inputs", nargs="*" if kind in COMMANDS else "+",
                       help="JSON file(s), - for stdin; none: run the command with the flags after --")
        p.add_argument("-o", "--output", default=f"{kind}.png", help="image to write (PNG, SVG, PDF)")
    args = parser.parse_args(argv)
    try:
        check_output(args.output)  # before reading or running anything
        if args.inputs:
            docs = [load(p) for p in args.inputs]
        elif flags and args.kind in COMMANDS:
            docs = [run_headroom(COMMANDS[args.kind], flags)]
        else:
            parser.error("give a JSON file (or -), or the headroom flags after --")
        if args.kind == "mtsl":
            plot_mtsl(docs, args.output)
        else:
            if len(docs) != 1:
                parser.error(f"{args.kind} plots one document")
            PLOTS[args.kind](docs[0], args.output)
    except (ValueError, KeyError, json.JSONDecodeError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except OSError as e:  # an input that cannot be read, an output that cannot be written
        print(f"error: {e.filename or ''}: {e.strerror}", file=sys.stderr)
        return 2
    print(args.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
