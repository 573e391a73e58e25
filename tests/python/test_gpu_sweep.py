"""The prepared GPU run's shape lists and its sustained-rate loop (tools/scripts/gpu_kernel_sweep.py), without a GPU
or PyTorch: the loop runs against a stand-in for the few torch calls it makes."""
import json
import math
import types

from script_module import ROOT, load_script

sweep = load_script("gpu_kernel_sweep")


def models():
    return [json.loads(p.read_text()) for p in sorted((ROOT / "data" / "models").glob("*.json"))]


def test_each_weight_gives_its_forward_and_both_gradient_gemms_once():
    seen = {}
    sweep.add_gemm_roles(seen, "w", 300, 200, [100, 400])
    assert set(seen) == {(100, 300, 200), (100, 200, 300), (200, 300, 100),
                         (400, 300, 200), (400, 200, 300), (200, 300, 400)}
    sweep.add_gemm_roles(seen, "v", 300, 200, [100])  # the same weight shape again: no new shape, one more use
    assert len(seen) == 6 and seen[(100, 300, 200)]["uses"] == ["w fwd", "v fwd"]


def test_the_dense_sweep_covers_every_dense_models_layer_largest_first():
    shapes = sweep.gemm_shapes([1024, 8192], [1, 2])
    keys = {(s["m"], s["n"], s["k"]) for s in shapes}
    assert len(keys) == len(shapes)
    sizes = [s["m"] * s["n"] * s["k"] for s in shapes]
    assert sizes == sorted(sizes, reverse=True)
    dense = [m for m in models() if not m.get("num_experts") and not m.get("q_lora_rank") and "hidden_size" in m]
    assert dense
    for m in dense:
        for name, n, k in sweep.layer_gemms(m, 1):
            assert (1024, n, k) in keys and (k, n, 8192) in keys, (m["name"], name)


def test_the_expert_sweep_covers_every_moe_models_experts():
    shapes = sweep.expert_gemm_shapes([128, 16384], [1, 2])
    keys = {(s["m"], s["n"], s["k"]) for s in shapes}
    moe = [m for m in models() if m.get("num_experts") and m.get("moe_ffn_hidden_size")]
    assert moe
    for m in moe:
        h, f = m["hidden_size"], m["moe_ffn_hidden_size"]
        fc1 = (2 if m.get("activation", "swiglu") in ("swiglu", "geglu") else 1) * f
        assert (128, fc1, h) in keys and (128, h, f) in keys and (f, h, 16384) in keys, m["name"]


def test_the_sustained_loop_records_each_precision_every_second():
    class Tensor:
        def to(self, *args):
            return self

        def t(self):
            return self

        def contiguous(self):
            return self

    torch = types.SimpleNamespace(
        randn=lambda *a, **k: Tensor(), matmul=lambda a, b: Tensor(), _scaled_mm=lambda *a, **k: Tensor(),
        tensor=lambda *a, **k: Tensor(), bfloat16="bf16", float8_e4m3fn="e4m3")
    rows = sweep.sustained_rows(torch, "cpu", 1.0, True)
    assert [r["dtype"] for r in rows] == ["bf16", "e4m3"]
    assert all(math.isfinite(r["tflops"]) and r["tflops"] > 0 and r["t_s"] >= 1.0 for r in rows)
    assert [r["dtype"] for r in sweep.sustained_rows(torch, "cpu", 1.0, False)] == ["bf16"]
