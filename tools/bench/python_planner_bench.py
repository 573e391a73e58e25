#!/usr/bin/env python3
"""Speed of the Python API, measured in one run (not part of the tests): headroom.Planner.estimate,
Planner.estimate_many per layout, the command line run in-process (headroom.estimate), and, with --megatron
CHECKOUT, Megatron-LM's own Python formula (megatron/training/theoretical_memory_usage.py: weights, optimizer and
activations) on the same Llama 3.1 8B layout, for the ratios the README reports.

    PYTHONPATH=build/python python3 tools/bench/python_planner_bench.py [--megatron /path/to/Megatron-LM]
"""
import argparse
import importlib.util
import math
import sys
import timeit
import types

import numpy as np

import headroom


def megatron_formula(checkout):
    """compute_weight_and_optimizer_memory + compute_activation_memory, imported without Megatron's package."""
    utils = types.ModuleType("megatron.training.utils")
    utils.is_hybrid_model = lambda args: False
    utils.print_rank_0 = lambda *a, **k: None
    for name in ("megatron", "megatron.training"):
        sys.modules.setdefault(name, types.ModuleType(name))
    sys.modules["megatron.training.utils"] = utils
    spec = importlib.util.spec_from_file_location("megatron.training.theoretical_memory_usage",
                                                  f"{checkout}/megatron/training/theoretical_memory_usage.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    args = types.SimpleNamespace(
        kv_channels=128, num_attention_heads=32, hidden_size=4096, group_query_attention=True, num_query_groups=8,
        num_experts=None, swiglu=True, moe_shared_expert_intermediate_size=None, num_layers=32, mtp_num_layers=None,
        normalization="RMSNorm", multi_latent_attention=False, padded_vocab_size=math.ceil(128256 / 256) * 256,
        untie_embeddings_and_output_weights=True, ffn_hidden_size=14336, moe_latent_size=None, add_bias_linear=False,
        expert_tensor_parallel_size=2, expert_model_parallel_size=1, pipeline_model_parallel_size=1, world_size=8,
        tensor_model_parallel_size=2, use_distributed_optimizer=True, data_parallel_size=4, seq_length=8192,
        micro_batch_size=1, virtual_pipeline_model_parallel_size=None, moe_router_topk=None)
    return lambda: (module.compute_weight_and_optimizer_memory(args) + module.compute_activation_memory(args, 256))


def per_call_us(timed, rounds=15):
    """Microseconds per call of each (function, calls per round), the best of `rounds` rounds taken in turn: a shared
    machine's slow spells then fall on every function alike, and the ratios hold."""
    best = [math.inf] * len(timed)
    for _ in range(rounds):
        for i, (f, number) in enumerate(timed):
            best[i] = min(best[i], timeit.timeit(f, number=number) / number * 1e6)
    return best


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--megatron", help="a Megatron-LM checkout, to time its theoretical_memory_usage.py")
    parser.add_argument("--rows", type=int, default=100_000)
    o = parser.parse_args()
    planner = headroom.Planner(model="llama3.1-8b", gpu="h100-94gb", framework="megatron")
    layout = dict(seq=8192, tp=2, gpus=8, gbs=1024)
    rng = np.random.default_rng(1)
    columns = {"tp": rng.choice([1, 2, 4, 8], o.rows), "pp": rng.choice([1, 2, 4], o.rows), "seq": 8192,
               "gpus": 64, "gbs": 1024}
    timed = {"Planner.estimate": (lambda: planner.estimate(**layout), 10_000),
             "Planner.estimate_many, per layout": (lambda: planner.estimate_many(columns), 1),
             "headroom.estimate (command line in-process)": (
                 lambda: headroom.estimate(model="llama3.1-8b", gpu="h100-94gb", **layout), 10)}
    if o.megatron:
        timed["Megatron-LM theoretical_memory_usage.py"] = (megatron_formula(o.megatron), 10_000)
    results = dict(zip(timed, per_call_us(list(timed.values()))))
    results["Planner.estimate_many, per layout"] /= o.rows
    reference = results.get("Megatron-LM theoretical_memory_usage.py")
    for name, us in results.items():
        ratio = ""
        if reference and us < reference:
            ratio = f"  ({reference / us:.1f}x faster than Megatron-LM's formula)"
        elif reference and us > reference:
            ratio = f"  ({us / reference:.0f}x slower than Megatron-LM's formula)"
        print(f"{name:48s} {us:10.3f} us{ratio}")


if __name__ == "__main__":
    main()
