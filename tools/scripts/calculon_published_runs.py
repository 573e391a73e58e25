#!/usr/bin/env python3
"""Runs Calculon (Isaev et al. 2023, github.com/calculon-ai/calculon) on the published runs of
data/reference/published_runs.csv and writes its predicted step times next to them, for `headroom validate`'s
peer comparison (data/reference/published_runs_calculon.csv).

Calculon is not a dependency of headroom: fetch it and pass its checkout (pure Python, needs pandas):
    tools/scripts/calculon_published_runs.py --calculon /path/to/calculon

Each row is expressed as Calculon's own validation expresses Korthikanti et al. 2022 Table 5
(validation/seqsel/tab5/*.json, system a100_80g.json): TP inside a node, PP and DP on the network, no
FlashAttention (fused_activation false), no optimizer sharding (Megatron-LM 2021/2022), full recompute as
"full", selective as "attn_only" with sequence parallelism ("rs_ag", seq_par_ag_redo).
"""
import argparse
import csv
import io
import logging
import os
import sys


def execution(row):
    full = row["recompute"] == "full"
    sp = row["sequence_parallel"] == "True"
    gpus, tp, pp, dp = (int(row[k]) for k in ("gpus", "tp", "pp", "dp"))
    return {
        "num_procs": gpus, "tensor_par": tp, "pipeline_par": pp, "data_par": dp,
        "tensor_par_net": 0, "pipeline_par_net": 1, "data_par_net": 1,
        "batch_size": int(row["gbs"]), "microbatch_size": int(row["mbs"]), "datatype": "float16",
        "fused_activation": False, "attention_type": "multihead",
        "activation_recompute": "full" if full else ("attn_only" if row["recompute"] == "selective" else "none"),
        "pipeline_interleaving": int(row["vpp"]), "optimizer_sharding": False,
        "tensor_par_comm_type": "rs_ag" if sp else "ar", "tensor_par_overlap": "none",
        "seq_par_ag_redo": sp and not full, "data_par_overlap": False,
        "weight_offload": False, "activations_offload": False, "optimizer_offload": False, "training": True,
    }


def application(row):
    h, heads = int(row["hidden_size"]), int(row["num_attention_heads"])
    return {"hidden": h, "feedforward": 4 * h, "seq_size": int(row["seq"]), "attn_heads": heads,
            "attn_size": h // heads, "num_blocks": int(row["num_layers"])}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--calculon", required=True, help="a checkout of github.com/calculon-ai/calculon")
    ap.add_argument("--runs", default="data/reference/published_runs.csv")
    ap.add_argument("--out", default="data/reference/published_runs_calculon.csv")
    ap.add_argument("--commit", default="caa4b11", help="the Calculon commit, written beside each row")
    args = ap.parse_args()
    sys.path.insert(0, args.calculon)
    import calculon  # noqa: E402
    from calculon.llm import Llm  # noqa: E402
    system = calculon.System(calculon.io.read_json_file(os.path.join(args.calculon, "systems", "a100_80g.json")))
    logger = logging.getLogger("calculon")
    with open(args.runs, newline="") as f:
        rows = list(csv.DictReader(f))
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(["id", "calculon_step_time_s", "calculon_note"])
    for row in rows:
        try:
            m = Llm(Llm.Application(application(row)), logger)
            m.compile(system, Llm.Execution.from_json(execution(row)))
            m.run(system)
            w.writerow([row["id"], f"{m.get_stats_json(False)['total_time']:.6g}",
                        f"Calculon {args.commit} systems/a100_80g.json"])
        except Exception as e:  # Calculon refuses what it cannot express: say so, per row
            w.writerow([row["id"], "", f"Calculon cannot express it: {type(e).__name__}: {e}".replace("\n", " ")])
        print(row["id"], file=sys.stderr, flush=True)
    tmp = args.out + ".tmp"
    with open(tmp, "w") as f:
        f.write(out.getvalue())
    os.replace(tmp, args.out)


if __name__ == "__main__":
    main()
