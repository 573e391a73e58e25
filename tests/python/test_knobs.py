"""The one vocabulary of layout knobs: the stubs, the command functions, the Planner's keywords and the JSON layout
block all follow the knob table; a keyword of the wrong type is a ValueError naming it, never a silent cast."""
import json
import math
from pathlib import Path

import headroom
import numpy as np
import pytest
from headroom import _stubs

JOB = dict(model="llama3.1-8b", gpu="h100-94gb", seq=8192, tp=2, gpus=8, gbs=1024)


@pytest.fixture(scope="module")
def planner():
    return headroom.Planner(model="llama3.1-8b", gpu="h100-94gb")


def test_stubs_are_the_generated_ones():
    """The shipped stubs list every command's flags and every knob, typed (python -m headroom._stubs FILE)."""
    stubs = Path(headroom.__file__).with_name("__init__.pyi").read_text()
    assert _stubs.generate(stubs) == stubs
    assert "**" not in stubs.replace("**layout", "")  # no catch-all keywords


def test_every_knob_has_a_json_path_that_estimate_prints():
    """Each knob's JSON path (knobs()'s "json") is in estimate --json's document."""
    doc = headroom.estimate(**JOB)
    for knob in headroom.knobs():
        if not knob["json"]:
            continue
        node = doc
        for part in knob["json"].split("."):
            assert part in node, (knob["name"], knob["json"])
            node = node[part]
            if node is None:  # a section that is off (layout.lora without LoRA) is null
                break


def test_a_flag_false_is_its_off_spelling():
    """sequence_parallel=False prices SP off (--no-sp), as True prices it on: no False is dropped."""
    off = headroom.estimate(**JOB, sequence_parallel=False)
    on = headroom.estimate(**JOB, sequence_parallel=True)
    cli_off = json.loads(headroom.run("estimate", "--model", "llama3.1-8b", "--gpu", "h100-94gb", "--seq", "8192",
                                      "--tp", "2", "--gpus", "8", "--gbs", "1024", "--no-sp", "--json"))
    assert off == cli_off
    assert off["layout"]["sequence_parallel"] is False and on["layout"]["sequence_parallel"] is True
    assert headroom.estimate(**JOB, no_sp=True) == cli_off  # the older spelling still works
    with pytest.raises(ValueError, match="sequence_parallel 'no' is not True or False"):
        headroom.estimate(**JOB, sequence_parallel="no")


def test_the_planner_takes_the_same_names_as_the_json(planner):
    """A layout read back from estimate --json's layout block under the knob names prices the same."""
    doc = headroom.estimate(**JOB, recompute="full", flash_attention=False)
    layout = doc["layout"]
    again = planner.estimate(**{k: layout[k] for k in ("seq", "tp", "cp", "pp", "gpus", "gbs", "mbs", "recompute",
                                                        "sequence_parallel", "flash_attention")})
    assert again.perf.step_time_s == doc["perf"]["step_time_s"]
    assert again.memory.peak_gib == doc["memory"]["peak_gib"]


@pytest.mark.parametrize("keyword, value, message", [
    ("tp", 2.0, "tp 2.0 is not an integer"),
    ("tp", True, "tp True is not an integer"),
    ("tp", 2 ** 70, "tp 1180591620717411303424 is too large"),
    ("tp", "2", "tp '2' is not an integer"),
    ("recompute", 1, "recompute 1 is not a string (valid: none|selective|full|op)"),
    ("recompute", ["full"], "recompute ['full'] is not a string"),
    ("recompute", "most", "recompute 'most' is not priced (valid: none|selective|full|op)"),
    ("sequence_parallel", 1, "sequence_parallel 1 is not True or False"),
    ("moe_expert_capacity_factor", float("nan"), "moe_expert_capacity_factor nan must be a number from 1"),
    ("lora_targets", [1, 2], "lora_targets [1, 2] is not names"),
])
def test_a_keyword_of_the_wrong_kind_names_it(planner, keyword, value, message):
    layout = dict(seq=8192, tp=2, gpus=8, gbs=1024)
    layout[keyword] = value
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]").replace("(", r"\(")
                       .replace(")", r"\)").replace("|", r"\|")):
        planner.estimate(**layout)


@pytest.mark.parametrize("column, message", [
    ([1.9, 2.0], "row 0: tp 1.9 is not an integer"),
    ([2, 2.5], "row 1: tp 2.5 is not an integer"),
    (np.array([2.0, 4.0]), "row 0: tp 2.0 is not an integer"),
    ([2, math.nan], "row 1: tp nan is not an integer"),
    ([2, True], "row 1: tp True is not an integer"),
    (np.array([2, 0]), "row 1: tp 0 must be a positive integer"),
])
def test_estimate_many_refuses_what_estimate_refuses_naming_the_row(planner, column, message):
    with pytest.raises(ValueError, match=message):
        planner.estimate_many({"tp": column, "seq": 8192, "gpus": 8, "gbs": 1024})


def test_an_offload_fraction_needs_the_offload(planner):
    """Megatron-LM's --optimizer-offload-fraction does nothing without --optimizer-cpu-offload: refused everywhere."""
    with pytest.raises(ValueError, match="optimizer_offload_fraction needs optimizer_cpu_offload"):
        planner.estimate(seq=8192, gpus=8, optimizer_offload_fraction=0.5)
    with pytest.raises(ValueError, match="--optimizer-offload-fraction needs --optimizer-cpu-offload"):
        headroom.estimate(**JOB, optimizer_offload_fraction=0.5)


def test_one_result_type_pickles_and_equals_the_cli_document(planner):
    """The Planner returns the library's result type: the JSON's fields, a repr, and pickling that keeps them."""
    import pickle
    r = planner.estimate(seq=8192, tp=2, gpus=8, gbs=1024)
    doc = headroom.estimate(**JOB)
    assert json.loads(r.to_json()) == {"memory": doc["memory"], "perf": doc["perf"]}
    again = pickle.loads(pickle.dumps(r))
    assert again == r and again.memory.stages[0].total == r.memory.stages[0].total
    assert repr(r).startswith("Estimate(peak_gib=") and "verdict='fits'" in repr(r)


def test_a_profile_carries_no_band_it_was_not_scored_for():
    """A calibration profile's measurements were not held out: its estimate has no step-time band, and says so."""
    profile = Path(__file__).resolve().parents[2] / "data" / "profiles" / "cpu-example-quick.json"
    doc = headroom.estimate(**JOB, profile=str(profile))
    assert doc["perf"]["step_time_s_interval"] is None
    assert doc["perf"]["interval_source"].startswith("none: no held-out data behind the coefficients profile")
