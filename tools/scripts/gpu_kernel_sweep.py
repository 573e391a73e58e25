#!/usr/bin/env python3
"""Measure one GPU's kernels as training frameworks call them, by shape, and write a kernel-curve profile.

The kernels are the libraries Megatron-LM, Transformer Engine, torchtitan and FSDP reach on NVIDIA GPUs, called
through PyTorch (present on a bare GPU machine; nothing to build): BF16 GEMMs through torch.matmul (cuBLASLt), FP8
GEMMs through torch._scaled_mm (cuBLASLt with per-tensor scales, E4M3 x E4M3 forward and E5M2 x E4M3 as the hybrid
format's gradients), causal attention with GQA through scaled_dot_product_attention on its cuDNN and FlashAttention-2
backends (forward and backward), and an HBM copy. First a self-test against a float64 CPU reference; a failure stops
before the sweep.

Shapes: every GEMM of the shipped dense models' layers (data/models/*.json: QKV, attention output, MLP in and out,
forward and the two backward GEMMs of each) at TP 1, 2, 4 and 8 and micro-batch token counts 1k-128k, spread over the
range within a time budget; attention over sequence 1k-128k for head dims 64, 128 and 256. Each shape's time is the
median of batches of CUDA-event-timed iterations (5 of about 20 ms for attention and the reference GEMMs, 3 of about
10 ms in the GEMM sweep). The profile is written after every step, so a run cut short leaves what it measured.

    python3 tools/scripts/gpu_kernel_sweep.py --out DIR [--budget-s 420] [--device cuda|cpu] [--quick]

DIR/kernel_profile.json: format headroom-kernel-curves, the GPU (name, driver, clocks before and after, power
limit), the software (PyTorch, CUDA runtime, cuBLASLt, cuDNN), the self-test, and per kernel the rows measured (shape,
seconds, TFLOP/s or GB/s). --device cpu --quick is the dry run of every step on a machine without a GPU.
"""
from __future__ import annotations

import argparse
import ctypes
import glob
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
FORMAT = "headroom-kernel-curves"
VERSION = 1


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


# ---------------------------------------------------------------- provenance


def nvidia_smi(fields: str) -> dict[str, str]:
    try:
        out = subprocess.run(["nvidia-smi", f"--query-gpu={fields}", "--format=csv,noheader"], capture_output=True,
                             text=True, timeout=20).stdout.strip().splitlines()
    except (OSError, subprocess.TimeoutExpired):
        return {}
    if not out:
        return {}
    return dict(zip(fields.split(","), (v.strip() for v in out[0].split(",")), strict=False))


def cublaslt_version(torch: Any) -> str | None:
    """cublasLtGetVersion() of the libcublasLt PyTorch loads (its own wheel's, or the system's)."""
    candidates = glob.glob(os.path.join(os.path.dirname(torch.__file__), "..", "nvidia", "cublas", "lib",
                                        "libcublasLt.so*"))
    candidates += ["libcublasLt.so", "libcublasLt.so.13", "libcublasLt.so.12"]
    for name in candidates:
        try:
            lib = ctypes.CDLL(name)
        except OSError:
            continue
        lib.cublasLtGetVersion.restype = ctypes.c_size_t
        v = int(lib.cublasLtGetVersion())
        return f"{v // 10000}.{v // 100 % 100}.{v % 100}"
    return None


def machine(torch: Any, device: str) -> dict[str, Any]:
    info: dict[str, Any] = {"host": platform.node(), "device": device, "torch": torch.__version__,
                            "python": platform.python_version()}
    if device == "cuda":
        p = torch.cuda.get_device_properties(0)
        info.update({"gpu": p.name, "multiprocessors": p.multi_processor_count,
                     "memory_bytes": int(p.total_memory), "compute_capability": f"{p.major}.{p.minor}",
                     "cuda_runtime": torch.version.cuda, "cudnn": torch.backends.cudnn.version(),
                     "cublaslt": cublaslt_version(torch)})
        info["smi"] = nvidia_smi("driver_version,clocks.sm,clocks.max.sm,clocks.mem,clocks.max.mem,power.limit,"
                                 "temperature.gpu,pstate")
    else:
        info["cpu"] = platform.processor() or platform.machine()
    return info


# ---------------------------------------------------------------- timing


class Timer:
    """Median seconds per call: warm-up calls, then batches sized to about `batch_s` each."""

    def __init__(self, torch: Any, device: str, batch_s: float = 0.02, batches: int = 5) -> None:
        self.torch, self.device, self.batch_s, self.batches = torch, device, batch_s, batches

    def sync(self) -> None:
        if self.device == "cuda":
            self.torch.cuda.synchronize()

    def once(self, fn: Any, iters: int) -> float:
        if self.device == "cuda":
            start, end = self.torch.cuda.Event(enable_timing=True), self.torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(iters):
                fn()
            end.record()
            end.synchronize()
            return float(start.elapsed_time(end)) / 1e3 / iters
        t0 = time.perf_counter()
        for _ in range(iters):
            fn()
        return (time.perf_counter() - t0) / iters

    def __call__(self, fn: Any) -> float:
        fn()
        self.sync()
        probe = self.once(fn, 1)
        iters = max(1, min(200, int(self.batch_s / max(probe, 1e-7))))
        return statistics.median(self.once(fn, iters) for _ in range(self.batches))


# ---------------------------------------------------------------- shapes


def layer_gemms(model: dict[str, Any], tp: int) -> list[tuple[str, int, int]]:
    """(name, n, k) of the forward GEMMs of one dense layer on one TP rank: y[m, n] = x[m, k] · W[k, n]."""
    h, a = model["hidden_size"], model["num_attention_heads"]
    kv = model.get("num_kv_heads", a)
    d = model.get("head_dim", h // a)
    f = model["ffn_hidden_size"]
    if a % tp or kv % tp or f % tp:
        return []
    gated = model.get("activation", "swiglu") in ("swiglu", "geglu")
    return [("qkv", (a + 2 * kv) * d // tp, h), ("proj", h, a * d // tp),
            ("fc1", (2 if gated else 1) * f // tp, h), ("fc2", h, f // tp)]


def add_gemm_roles(seen: dict[tuple[int, int, int], dict[str, Any]], use: str, n: int, k: int,
                   tokens: list[int]) -> None:
    """A weight's GEMMs at each token count m, forward (m, n, k), data gradient (m, k, n) and weight gradient (k, n, m)
    as cuBLASLt sees them, into `seen` (a shape once, with up to four of its uses)."""
    for m in tokens:
        for role, shape in (("fwd", (m, n, k)), ("dgrad", (m, k, n)), ("wgrad", (k, n, m))):
            entry = seen.setdefault(shape, {"m": shape[0], "n": shape[1], "k": shape[2], "uses": []})
            if len(entry["uses"]) < 4:
                entry["uses"].append(f"{use} {role}")


def by_size(seen: dict[tuple[int, int, int], dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(seen.values(), key=lambda e: (-e["m"] * e["n"] * e["k"]))


def gemm_shapes(tokens: list[int], tps: list[int]) -> list[dict[str, Any]]:
    """Every GEMM of the shipped dense models' layers, each role (add_gemm_roles), deduplicated, largest first."""
    seen: dict[tuple[int, int, int], dict[str, Any]] = {}
    for path in sorted(glob.glob(str(ROOT / "data" / "models" / "*.json"))):
        model = json.loads(Path(path).read_text())
        if model.get("num_experts") or model.get("q_lora_rank") or "hidden_size" not in model:
            continue  # dense layers only: expert and latent-attention GEMMs are another sweep
        for tp in tps:
            for name, n, k in layer_gemms(model, tp):
                add_gemm_roles(seen, f"{model['name']} tp{tp} {name}", n, k, tokens)
    return by_size(seen)


def expert_gemm_shapes(tokens: list[int], etps: list[int]) -> list[dict[str, Any]]:
    """The routed experts' GEMMs of the shipped MoE models (data/models/*.json with num_experts): fc1 (gated: both
    projections in one GEMM) and fc2 of one expert on one expert-TP rank, each role (add_gemm_roles), at `tokens`
    routed to the expert (a rank's tokens x top-k x EP / experts: 128 to 16k where training runs), largest first."""
    seen: dict[tuple[int, int, int], dict[str, Any]] = {}
    for path in sorted(glob.glob(str(ROOT / "data" / "models" / "*.json"))):
        model = json.loads(Path(path).read_text())
        if not model.get("num_experts") or not model.get("moe_ffn_hidden_size"):
            continue
        h, f = model["hidden_size"], model["moe_ffn_hidden_size"]
        gated = model.get("activation", "swiglu") in ("swiglu", "geglu")
        for etp in etps:
            if f % etp == 0:
                add_gemm_roles(seen, f"{model['name']} etp{etp} expert fc1", (2 if gated else 1) * f // etp, h, tokens)
                add_gemm_roles(seen, f"{model['name']} etp{etp} expert fc2", h, f // etp, tokens)
    return by_size(seen)


# ---------------------------------------------------------------- kernels


def selftest(torch: Any, device: str, fp8: bool) -> list[dict[str, Any]]:
    """The kernels against a float64 CPU reference on small shapes."""
    import torch.nn.functional as F

    g = torch.Generator().manual_seed(1)
    out: list[dict[str, Any]] = []

    def rel(x: Any, ref: Any) -> float:
        x, ref = x.detach().double().cpu(), ref.detach()
        return float((x - ref).abs().max() / ref.abs().max().clamp_min(1e-30))

    a, b = torch.randn(256, 384, generator=g, dtype=torch.float64), torch.randn(384, 320, generator=g,
                                                                              dtype=torch.float64)
    y = torch.matmul(a.to(device, torch.bfloat16), b.to(device, torch.bfloat16))
    out.append({"kernel": "gemm bf16", "error": rel(y, a.bfloat16().double() @ b.bfloat16().double()),
                "tolerance": 2e-2})
    if fp8:
        a8, b8 = a.to(torch.float8_e4m3fn), b.t().contiguous().to(torch.float8_e4m3fn)
        one = torch.tensor(1.0, device=device)
        y = torch._scaled_mm(a8.to(device), b8.to(device).t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
        out.append({"kernel": "gemm fp8 e4m3", "error": rel(y, a8.double() @ b8.double().t()), "tolerance": 2e-2})
    for backend in sdpa_backends(torch, device):
        q = torch.randn(1, 8, 256, 128, generator=g, dtype=torch.float64)
        k, v = torch.randn(1, 2, 256, 128, generator=g, dtype=torch.float64), torch.randn(1, 2, 256, 128, generator=g,
                                                                                          dtype=torch.float64)
        dout = torch.randn(1, 8, 256, 128, generator=g, dtype=torch.float64)
        ref_in = [x.clone().requires_grad_() for x in (q, k, v)]
        ref = F.scaled_dot_product_attention(ref_in[0], ref_in[1].repeat_interleave(4, 1),
                                             ref_in[2].repeat_interleave(4, 1), is_causal=True)
        ref.backward(dout)
        dev_in = [x.to(device, torch.bfloat16).requires_grad_() for x in (q, k, v)]
        try:
            with sdpa_context(torch, backend):
                y = F.scaled_dot_product_attention(*dev_in, is_causal=True, enable_gqa=True)
                y.backward(dout.to(device, torch.bfloat16))
        except RuntimeError as e:
            out.append({"kernel": f"attention {backend}", "error": None, "unsupported": str(e).splitlines()[0]})
            continue
        err = max(rel(y, ref.detach()), *(rel(x.grad, r.grad) for x, r in zip(dev_in, ref_in, strict=True)))
        out.append({"kernel": f"attention {backend} fwd+bwd", "error": err, "tolerance": 5e-2})
    return out


def sdpa_backends(torch: Any, device: str) -> list[str]:
    return ["cudnn", "flash"] if device == "cuda" else ["math"]


def sdpa_context(torch: Any, backend: str) -> Any:
    from torch.nn.attention import SDPBackend, sdpa_kernel

    return sdpa_kernel({"cudnn": SDPBackend.CUDNN_ATTENTION, "flash": SDPBackend.FLASH_ATTENTION,
                        "math": SDPBackend.MATH}[backend])


def gemm_row(torch: Any, timer: Timer, device: str, shape: dict[str, Any], fp8: str | None) -> dict[str, Any]:
    m, n, k = shape["m"], shape["n"], shape["k"]
    if fp8 is None:
        a = torch.randn(m, k, device=device, dtype=torch.bfloat16)
        b = torch.randn(k, n, device=device, dtype=torch.bfloat16)
        c = torch.empty(m, n, device=device, dtype=torch.bfloat16)
        seconds = timer(lambda: torch.matmul(a, b, out=c))
        del a, b, c
    else:
        left = torch.float8_e5m2 if fp8 == "e5m2xe4m3" else torch.float8_e4m3fn
        a = torch.randn(m, k, device=device, dtype=torch.bfloat16).to(left)
        b = torch.randn(n, k, device=device, dtype=torch.bfloat16).to(torch.float8_e4m3fn).t()  # column-major
        one = torch.tensor(1.0, device=device)
        seconds = timer(lambda: torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16))
        del a, b
    return {"m": m, "n": n, "k": k, "dtype": fp8 or "bf16", "seconds": seconds,
            "tflops": 2.0 * m * n * k / seconds / 1e12, "uses": shape.get("uses", [])}


def attention_row(torch: Any, timer: Timer, device: str, backend: str, seq: int, head_dim: int, heads: int,
                  kv_heads: int, tokens: int) -> dict[str, Any]:
    import torch.nn.functional as F

    batch = max(1, tokens // seq)
    q = torch.randn(batch, heads, seq, head_dim, device=device, dtype=torch.bfloat16, requires_grad=True)
    k = torch.randn(batch, kv_heads, seq, head_dim, device=device, dtype=torch.bfloat16, requires_grad=True)
    v = torch.randn(batch, kv_heads, seq, head_dim, device=device, dtype=torch.bfloat16, requires_grad=True)
    dout = torch.randn(batch, heads, seq, head_dim, device=device, dtype=torch.bfloat16)
    row: dict[str, Any] = {"backend": backend, "seq": seq, "head_dim": head_dim, "heads": heads, "kv_heads": kv_heads,
                           "batch": batch, "causal": True}
    # FlashAttention-2's count (Dao 2023 Sec. 4): 4·s²·d per head forward, half with a causal mask; backward 2.5x.
    fwd_flops = 4.0 * batch * heads * seq * seq * head_dim * 0.5
    try:
        with sdpa_context(torch, backend):
            def fwd() -> Any:
                return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=kv_heads != heads)
            row["fwd_seconds"] = timer(lambda: fwd())
            y = fwd()
            row["fwd_bwd_seconds"] = timer(lambda: torch.autograd.grad(fwd(), (q, k, v), dout))
            del y
    except RuntimeError as e:
        return {**row, "unsupported": str(e).splitlines()[0][:200]}
    row["bwd_seconds"] = max(row["fwd_bwd_seconds"] - row["fwd_seconds"], 0.0)
    row["fwd_tflops"] = fwd_flops / row["fwd_seconds"] / 1e12
    row["bwd_tflops"] = 2.5 * fwd_flops / row["bwd_seconds"] / 1e12 if row["bwd_seconds"] > 0 else None
    return row


def sustained_rows(torch: Any, device: str, seconds: float, fp8: bool) -> list[dict[str, Any]]:
    """The 8192^3 GEMM run back to back for `seconds` in BF16 and then in FP8 E4M3 (each after a rest), TFLOP/s and the
    SM clock, power and throttle reasons read every second: how far each precision's sustained rate falls below its
    burst under the power cap (a training step runs sustained; the sweep's rows are bursts)."""
    n = 8192 if device == "cuda" else 512
    a = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    b = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    calls: list[tuple[str, Any]] = [("bf16", lambda: torch.matmul(a, b))]
    if fp8:
        a8, b8 = a.to(torch.float8_e4m3fn), b.t().contiguous().to(torch.float8_e4m3fn).t()  # b8 column-major
        one = torch.tensor(1.0, device=device)
        calls.append(("e4m3", lambda: torch._scaled_mm(a8, b8, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)))
    rows: list[dict[str, Any]] = []
    for dtype, call in calls:
        time.sleep(5.0 if device == "cuda" else 0.0)  # rest: the clocks climb back to the boost clock
        start = time.monotonic()
        while time.monotonic() - start < seconds:
            t0, done = time.monotonic(), 0
            while time.monotonic() - t0 < 1.0:
                for _ in range(20):
                    call()
                done += 20
                if device == "cuda":
                    torch.cuda.synchronize()
            tflops = 2.0 * n**3 * done / (time.monotonic() - t0) / 1e12
            row = {"dtype": dtype, "t_s": round(time.monotonic() - start, 2), "tflops": tflops}
            if device == "cuda":
                row["smi"] = nvidia_smi("clocks.sm,power.draw,temperature.gpu,clocks_throttle_reasons.active")
            rows.append(row)
            log(f"sustained {dtype}: {tflops:.0f} TFLOP/s {row.get('smi', '')}")
    return rows


def copy_row(torch: Any, timer: Timer, device: str, mib: int) -> dict[str, Any]:
    src = torch.empty(mib << 20, device=device, dtype=torch.uint8)
    dst = torch.empty_like(src)
    seconds = timer(lambda: dst.copy_(src))
    return {"bytes": mib << 20, "seconds": seconds, "gb_per_s": 2.0 * (mib << 20) / seconds / 1e9}


# ---------------------------------------------------------------- driver


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True, help="folder for kernel_profile.json")
    p.add_argument("--budget-s", type=float, default=420.0, help="stop starting new shapes after this many seconds")
    p.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    p.add_argument("--quick", action="store_true", help="small shapes only (the CPU dry run)")
    p.add_argument("--only", choices=("all", "experts", "sustained"), default="all",
                   help="experts: the reference GEMMs, then the MoE models' expert GEMMs alone (no attention, no dense "
                        "sweep); sustained: the reference GEMMs, then 8192^3 GEMMs back to back in BF16 and FP8 for "
                        "--sustained-s each, with the clocks")
    p.add_argument("--sustained-s", type=float, default=20.0, help="seconds of each precision in --only sustained")
    p.add_argument("--fp8", choices=("auto", "on", "off"), default="auto",
                   help="FP8 GEMMs: auto = on a GPU of compute capability 8.9 or later; on = also on the CPU (dry run)")
    o = p.parse_args()
    import torch

    start = time.monotonic()
    out = Path(o.out)
    out.mkdir(parents=True, exist_ok=True)
    if o.device == "cuda" and not torch.cuda.is_available():
        print("error: --device cuda but PyTorch sees no GPU (give --device cpu for the dry run)", file=sys.stderr)
        return 2
    fp8 = o.fp8 == "on" or (o.fp8 == "auto" and o.device == "cuda" and torch.cuda.get_device_capability(0) >= (8, 9))
    doc: dict[str, Any] = {"format": FORMAT, "version": VERSION, "date": time.strftime("%Y-%m-%dT%H:%M:%SZ",
                                                                                         time.gmtime()),
                           "machine": machine(torch, o.device), "complete": False,
                           "method": "median of 5 batches of CUDA-event-timed calls after a warm-up call; BF16 "
                                     "inputs from torch.randn; FP8 per-tensor scale 1"}
    path = out / "kernel_profile.json"

    def save() -> None:
        doc["elapsed_s"] = round(time.monotonic() - start, 1)
        tmp = path.with_suffix(".partial")
        tmp.write_text(json.dumps(doc, indent=1) + "\n")
        tmp.replace(path)

    def left() -> float:
        return o.budget_s - (time.monotonic() - start)

    log(f"machine: {json.dumps(doc['machine'])}")
    doc["selftest"] = selftest(torch, o.device, fp8)
    save()
    failed = [t for t in doc["selftest"] if t.get("error") is not None and t["error"] > t["tolerance"]]
    for t in doc["selftest"]:
        log(f"selftest {t['kernel']}: error {t.get('error')} (tolerance {t.get('tolerance')}) "
            f"{t.get('unsupported', '')}")
    if failed:
        print(f"error: the self-test failed: {failed}", file=sys.stderr)
        return 1
    timer = Timer(torch, o.device, batch_s=0.005 if o.quick else 0.02, batches=3 if o.quick else 5)
    doc["copy"] = [copy_row(torch, timer, o.device, 64 if o.quick else 2048)]
    log(f"copy: {doc['copy'][0]['gb_per_s']:.0f} GB/s")
    big = 512 if o.quick else 8192
    warm_a = torch.randn(big, big, device=o.device, dtype=torch.bfloat16)
    warm_end = time.monotonic() + (0.1 if o.quick else 2.0)  # raise the clocks from idle before the reference GEMMs
    while time.monotonic() < warm_end:
        torch.matmul(warm_a, warm_a)
        timer.sync()
    del warm_a
    doc["gemm"] = [gemm_row(torch, timer, o.device, {"m": big, "n": big, "k": big, "uses": ["square"]}, None)]
    log(f"gemm {big}^3 bf16: {doc['gemm'][0]['tflops']:.1f} TFLOP/s")
    if fp8:
        for fmt in ("e4m3", "e5m2xe4m3"):
            doc["gemm"].append(gemm_row(torch, timer, o.device, {"m": big, "n": big, "k": big, "uses": ["square"]},
                                        fmt))
            log(f"gemm {big}^3 fp8 {fmt}: {doc['gemm'][-1]['tflops']:.1f} TFLOP/s")
    save()
    # Attention: per head dim, sequences 1k-128k at 32k tokens a call (GQA 8:1 and MHA), both backends.
    doc["attention"] = []
    if o.only == "sustained":
        doc["sustained"] = sustained_rows(torch, o.device, 2.0 if o.quick else o.sustained_s, fp8)
        doc["complete"] = True
        save()
        return 0
    if o.only == "experts":
        return sweep_gemms(doc, torch, o, fp8, expert_gemm_shapes([128, 256, 512, 1024, 2048, 4096, 8192, 16384]
                                                                  if not o.quick else [64, 128], [1, 2]),
                           left, save, path)
    seqs = [256, 512] if o.quick else [1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072]
    tokens = 1024 if o.quick else 32768
    for head_dim in (64, 128, 256):
        for backend in sdpa_backends(torch, o.device):
            for seq in seqs:
                for heads, kv in ((8, 1), (8, 8)) if not o.quick else ((4, 1),):
                    if left() < o.budget_s * 0.55:
                        break
                    row = attention_row(torch, timer, o.device, backend, seq, head_dim, heads, kv, max(tokens, seq))
                    doc["attention"].append(row)
        save()
        log(f"attention d={head_dim}: {len(doc['attention'])} rows, {left():.0f} s left")
    # GEMMs of the models' layers, the rest of the budget; FP8 on every fourth shape.
    tps = [1, 2] if o.quick else [1, 2, 4, 8]
    token_counts = [256, 512] if o.quick else [1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072]
    return sweep_gemms(doc, torch, o, fp8, gemm_shapes(token_counts, tps), left, save, path)


def sweep_gemms(doc: dict[str, Any], torch: Any, o: Any, fp8: bool, shapes: list[dict[str, Any]], left: Any,
                save: Any, path: Path) -> int:
    """The shapes' BF16 GEMMs (FP8 on every fourth) for the rest of the budget, then the closing record."""
    max_flops = 2e9 if o.quick else 4e13  # beyond this efficiency has long saturated; a call would take > 50 ms
    shapes = [s for s in shapes if 2.0 * s["m"] * s["n"] * s["k"] <= max_flops]
    # Spread over the range: every shape in a strided order, so that a cut-short run still covers small and large.
    order = shapes[::7] + [s for i, s in enumerate(shapes) if i % 7]
    log(f"gemm sweep: {len(order)} shapes, {left():.0f} s left")
    timer = Timer(torch, o.device, batch_s=0.005 if o.quick else 0.01, batches=3)  # thousands of shapes
    for i, shape in enumerate(order):
        if left() <= 0:
            break
        doc["gemm"].append(gemm_row(torch, timer, o.device, shape, None))
        if fp8 and i % 4 == 0 and not (shape["m"] | shape["n"] | shape["k"]) % 16:  # cuBLASLt FP8: multiples of 16
            doc["gemm"].append(gemm_row(torch, timer, o.device, shape, "e4m3"))
        if i % 50 == 0:
            save()
            log(f"gemm {i}/{len(order)}: {left():.0f} s left")
    doc["complete"] = len(doc["gemm"]) >= len(order)
    doc["machine"]["smi_after"] = nvidia_smi("clocks.sm,clocks.mem,temperature.gpu,power.draw") if o.device == "cuda" \
        else {}
    save()
    log(f"wrote {path}: {len(doc['gemm'])} GEMM rows, {len(doc['attention'])} attention rows, "
        f"{'complete' if doc['complete'] else 'cut at the budget'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
