#!/usr/bin/env python3
"""Write a device's kernel curves (format headroom-kernel-curves, the one gpu_kernel_sweep.py measures into) from the
published kernel benchmarks in data/reference/published_kernels_by_shape.csv, each row keeping its citation.

These stand in for a measured profile until one exists: `headroom` fits the same GEMM and attention curves to either.

    tools/scripts/published_kernel_curves.py --gpu "H100 SXM" --out data/kernels/h100-sxm-published.json
"""
from __future__ import annotations

import argparse
import csv
import json
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
FORMAT, VERSION = "headroom-kernel-curves", 1

# Which rows are the kernels a training framework runs on this device, and why the others are left out.
SELECTION = {
    "H100 SXM": {
        "machine": "NVIDIA H100 SXM5 80GB, 700 W (the benchmarks' stated SKU)",
        # BF16 GEMM: XLA's matmul on an sm_90 part (cuBLASLt or Triton as XLA picks; the only published BF16 sweep over
        # one dimension at a time). torch.bmm rows of an H100 whose variant is not stated (0.40 of peak at 4096x4096x11k
        # against 0.79 here) are left out: they are not this SKU's.
        "gemm": [("H100-class sm_90 (SKU not stated)", "bf16 (bf16xbf16->bf16)", "bf16"),
                 ("H100 SXM", "fp8_e4m3", "e4m3")],
        # Attention, causal forward+backward at head dimension 128 (Llama's), one curve per backend: cuDNN's fused
        # attention (Transformer Engine's FusedAttention on this SKU; cudnn-frontend's own sweep on the H200, the same
        # GH100 die, clocks and 700 W) and FlashAttention-2 (through Transformer Engine on this SKU; PyTorch SDPA's
        # default backend in the same H200 sweep). FlashAttention-2's README sweep is at head dimension 64 only, and
        # the FlashAttention-3 paper's cuDNN rows give the causal forward alone.
        "attention": [("H100 SXM", "TE FusedAttention (cuDNN sub-backend 1)", "cudnn"),
                      ("H200 SXM", "cuDNN fused attention (cudnn-frontend graph)", "cudnn"),
                      ("H100 SXM", "TE FlashAttention (flash-attn 2.x)", "flash2"),
                      ("H200 SXM", "PyTorch SDPA (default backend; FlashAttention-2 kernels in PyTorch 2.4)",
                       "flash2")],
    },
}


def number(x: str) -> float:
    return float(x) if x.strip() else 0.0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gpu", required=True, choices=sorted(SELECTION), help="the csv's gpu column")
    ap.add_argument("--csv", default=str(ROOT / "data/reference/published_kernels_by_shape.csv"))
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    sel = SELECTION[a.gpu]
    rows = list(csv.DictReader(open(a.csv, encoding="utf-8")))
    doc = {"format": FORMAT, "version": VERSION, "kind": "published",
           "machine": {"gpu": sel["machine"]},
           "method": "rows of data/reference/published_kernels_by_shape.csv chosen by "
                     "tools/scripts/published_kernel_curves.py (its SELECTION says which and why); each row cites its "
                     "source",
           "gemm": [], "attention": []}
    for gpu, dtype, name in sel["gemm"]:
        for r in rows:
            if r["kernel"] == "gemm" and r["gpu"] == gpu and r["dtype"] == dtype:
                doc["gemm"].append({"m": int(r["m"]), "n": int(r["n"]), "k": int(r["k"]), "dtype": name,
                                    "tflops": number(r["TFLOPs"]), "library": r["library"],
                                    "source": r["source"], "software": r["software"]})
    for gpu, library, backend in sel["attention"]:
        for r in rows:
            if (r["kernel"] == "attention" and r["gpu"] == gpu and r["library"] == library and r["dtype"] == "bf16"
                    and r["head_dim"] == "128" and r["direction"] == "fwd+bwd" and r["causal"] == "True"):
                doc["attention"].append({"backend": backend, "seq": int(r["seq"]), "head_dim": int(r["head_dim"]),
                                         "heads": int(r["heads"]), "batch": int(r["batch"]), "causal": True,
                                         "fwd_bwd_tflops": number(r["TFLOPs"]), "source": r["source"],
                                         "software": r["software"]})
    if not doc["gemm"] or not doc["attention"]:
        print(f"published_kernel_curves: no rows for {a.gpu}", file=sys.stderr)
        return 2
    pathlib.Path(a.out).write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {a.out}: {len(doc['gemm'])} GEMM rows, {len(doc['attention'])} attention rows")
    return 0


if __name__ == "__main__":
    sys.exit(main())
