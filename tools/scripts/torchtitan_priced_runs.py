#!/usr/bin/env python3
"""Write data/reference/published_torchtitan_priced.csv from published_torchtitan_runs.csv.

The collected file keeps every torchtitan run as its source prints it; this one holds the runs headroom can price,
as `headroom validate` reads them (the columns of published_runs.csv plus compile, tp_comm_overlap, the pipeline
split, outcome and peak memory), each with the rule that mapped it. A run is left out, with the reason printed,
when it uses something headroom does not price: layer-selective checkpointing, FP8 under per-op checkpointing,
rowwise or MX FP8 recipes, NVFP4, models with experts, torchtitan's generated split of a multi-stage pipeline
schedule (unequal layers per virtual stage), a GPU without a spec, or a setting its source does not state.

    python3 tools/scripts/torchtitan_priced_runs.py [--check]
"""

import argparse
import csv
import io
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
SOURCE = ROOT / "data" / "reference" / "published_torchtitan_runs.csv"
TARGET = ROOT / "data" / "reference" / "published_torchtitan_priced.csv"

# The GPU of each collected row and the cluster that prices it.
CLUSTERS = {
    "h100-96gb-hbm2e": "grand-teton-h100",  # Meta's hosts: the h100-94gb HBM2e part, 8 per host on NVSwitch
    "a100-80gb": "dgx-a100-80gb",  # 8 per host on NVSwitch (torchtitan's 2024 A100 runs; form factor not stated)
    "h200": "dgx-h200",
    "b200": "dgx-b200",
}

# The first words of a citation, as validate groups runs by source.
SOURCES = (
    ("Liang et al.", "Liang et al. 2025 (TorchTitan paper)"),
    ("pytorch/torchtitan@820504e", "torchtitan benchmarks 2024-12"),
    ("pytorch/torchtitan@3faaa1a", "torchtitan performance.md 2024-08"),
    ("pytorch/torchtitan@1ea476e", "torchtitan performance.md 2024-04"),
    ("pytorch/torchtitan@395a526", "torchtitan performance.md 2024-04"),
    ("pytorch/torchtitan@6a6f755", "torchtitan performance.md 2024-04"),
    ("pytorch/torchtitan@2887250", "torchtitan async TP benchmark 2025-06"),
    ("pytorch/torchtitan@cbccb38", "torchtitan Trainy H200 benchmark 2025-06"),
    ("pytorch/torchtitan@b3da1a2", "torchtitan MXFP8 note 2025"),
)

COLUMNS = ("source,id,model,gpu,cluster,gpus,tp,pp,vpp,cp,dp,mbs,gbs,seq,recompute,sequence_parallel,flash_attention,"
           "grad_overlap,sharding,compile,tp_comm_overlap,decoder_first_pipeline_num_layers,"
           "decoder_last_pipeline_num_layers,precision,outcome,measured,measured_unit,peak_memory_gib,notes").split(",")


def short_source(citation):
    for prefix, name in SOURCES:
        if citation.startswith(prefix):
            return name
    return None


def integer(text, default=None):
    return int(text) if text.strip() else default


def first_last_layers(layers, pp):
    """torchtitan's generate_split_points for one stage per rank (parallelisms/pipelining_utils.py at 9dec370ad2):
    the first and last stages get layers // pp, the middle ones one more while the remainder lasts. Returns the
    first and last stages' layers when the middle ones are equal (what headroom's uneven split prices), else None."""
    base, extra = divmod(layers, pp)
    middle = [base + 1 if i < extra else base for i in range(pp - 2)]
    if base * 2 + sum(middle) != layers or len(set(middle)) > 1:
        return None
    return base, base


LAYERS = {"llama3.1-8b": 32, "llama3.1-70b": 80, "llama3.1-405b": 126, "llama2-13b": 40, "llama2-70b": 80}


def priced(row):
    """The priced row of a collected one, or the reason it is left out."""
    source = short_source(row["source"])
    if source is None:
        return None, "source not mapped"
    if row["gpu"] not in CLUSTERS:
        return None, f"no GPU spec for {row['gpu']}"
    if row["model"] not in LAYERS:
        return None, f"model {row['model']} not priced here (experts, or no spec)"
    if row["id"].endswith("-sel-layer") or "sel-layer-" in row["id"]:
        return None, "layer-selective checkpointing is not priced"
    fp8 = row["float8"] == "TRUE"
    # Unstated: the job config's, which the notes quote ("config-derived (...): ... compile=false"), unless the notes
    # say the row's own state is not stated.
    compile_on = row["compile"] == "TRUE"
    if row["compile"] == "":
        if "compile=false" in row["notes"]:
            compile_on = False
        elif "compile=true" in row["notes"] and (fp8 or "compile state not stated" not in row["notes"]):
            compile_on = True
        else:
            return None, "torch.compile not stated"
    recipe = row["float8_recipe"]
    if fp8 and recipe not in ("", "tensorwise"):
        return None, f"FP8 recipe {recipe} is not priced"
    if row["activation_checkpoint"] == "selective":
        recompute = "op"  # torchtitan's Llama recipes' selective_ac_option 'op' (the row's notes say where unstated)
    elif row["activation_checkpoint"] in ("full", "none"):
        recompute = row["activation_checkpoint"]
    else:
        return None, "activation checkpointing not stated"
    if fp8 and recompute == "op":
        return None, "FP8 under per-op checkpointing is not priced"
    if row["pp_schedule"] not in ("", "1F1B"):
        return None, f"{row['pp_schedule']}: torchtitan's generated split gives unequal layers per virtual stage"
    tp, pp, cp = integer(row["tp"], 1), integer(row["pp"], 1), integer(row["cp"], 1)
    replicate, gpus = integer(row["dp_replicate"], 1), integer(row["gpus"])
    # An unstated shard degree is the recipe's data_parallel_shard_degree -1: the GPUs the other degrees leave.
    shard = integer(row["dp_shard"], gpus // (tp * pp * cp * replicate) if gpus else None) or 1
    dp = shard * replicate
    if gpus is None or gpus != tp * pp * cp * dp:
        return None, "GPU count not stated or inconsistent"
    local = integer(row["local_batch_size"])
    gbs = integer(row["global_batch_size"], local * dp if local else None)
    if local is None or gbs is None:
        return None, "batch not stated"
    # torchtitan's default pipeline_parallel_microbatches is the pipeline degree (pipeline_llama.py at 9dec370ad2).
    mbs = local // pp if pp > 1 else local
    seq = integer(row["seq"], 8192)  # unstated: the recipe's seq_len 8192 (each row's notes name the config file)
    first = last = ""
    if pp > 1:
        split = first_last_layers(LAYERS[row["model"]], pp)
        if split is None:
            return None, "torchtitan's generated split has unequal middle stages"
        if LAYERS[row["model"]] % pp != 0:
            first, last = split
    # FSDP2: every block resharded after forward without PP, none with it; a replicate degree is HSDP.
    sharding = ("NII" if pp > 1 else "III") if replicate > 1 else ("NGG" if pp > 1 else "GGG")
    oom = row["id"].endswith("-OOM")
    if not oom and not row["tokens_per_s_per_gpu"]:
        return None, "no throughput printed"
    return {
        "source": f"{source} ({row['source']})",
        "id": row["id"], "model": row["model"], "gpu": row["gpu"], "cluster": CLUSTERS[row["gpu"]],
        "gpus": gpus, "tp": tp, "pp": pp, "vpp": 1, "cp": cp, "dp": dp, "mbs": mbs, "gbs": gbs, "seq": seq,
        "recompute": recompute, "sequence_parallel": "True", "flash_attention": "True", "grad_overlap": "True",
        "sharding": sharding, "compile": "True" if compile_on else "False",
        "tp_comm_overlap": "True" if row["async_tp"] == "TRUE" else "False",
        "decoder_first_pipeline_num_layers": first, "decoder_last_pipeline_num_layers": last,
        "precision": "fp8-tensorwise" if fp8 else "bf16", "outcome": "oom" if oom else "ok",
        "measured": "" if oom else row["tokens_per_s_per_gpu"], "measured_unit": "" if oom else "tokens/s per GPU",
        "peak_memory_gib": row["memory_gib"], "notes": row["notes"],
    }, None


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if the file differs from what would be written")
    args = parser.parse_args()
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=COLUMNS, lineterminator="\n")
    writer.writeheader()
    with SOURCE.open(newline="") as f:
        for row in csv.DictReader(f):
            p, why = priced(row)
            if p is None:
                print(f"left out {row['id']}: {why}", file=sys.stderr)
            else:
                writer.writerow(p)
    if args.check:
        if TARGET.read_text() != out.getvalue():
            sys.exit(f"{TARGET} is not what {pathlib.Path(__file__).name} writes: run it")
        return
    TARGET.write_text(out.getvalue())


if __name__ == "__main__":
    main()
