"""headroom.Planner: typed results equal to the command line's JSON, NumPy columns equal to single estimates,
errors naming keywords."""
import json

import headroom
import numpy as np
import pytest

SPECS = dict(model="llama3.1-8b", gpu="h100-94gb", framework="megatron")
LAYOUTS = [dict(seq=8192, tp=2, gpus=8, gbs=1024),
           dict(seq=8192, tp=4, pp=2, gpus=64, gbs=512, recompute="full"),
           dict(seq=32768, tp=2, cp=2, pp=2, vpp=2, gpus=32, gbs=64, sharding="zero1"),
           dict(seq=4096, tp=1, gpus=16, gbs=64, sequence_parallel=False, flash_attention=False)]


@pytest.fixture(scope="module")
def planner():
    return headroom.Planner(**SPECS)


def cli_estimate(layout):
    args = ["estimate", "--model", SPECS["model"], "--gpu", SPECS["gpu"], "--framework", SPECS["framework"], "--json"]
    for key, value in layout.items():
        if key == "sequence_parallel":
            args.append("--sp" if value else "--no-sp")
        elif key == "flash_attention":
            args.append("--use-flash-attn" if value else "--no-flash-attn")
        else:
            args += ["--" + key.replace("_", "-"), str(value)]
    return json.loads(headroom.run(*args))


@pytest.mark.parametrize("layout", LAYOUTS)
def test_estimate_equals_the_cli_document(planner, layout):
    r, doc = planner.estimate(**layout), cli_estimate(layout)
    m, memory = r.memory, doc["memory"]
    assert (m.peak_gib, m.peak_stage, m.capacity_gib, m.margin_gib, m.verdict, m.paper_total_gib) == (
        memory["peak_gib"], memory["peak_stage"], memory["capacity_gib"], memory["margin_gib"], memory["verdict"],
        memory["paper_total_gib"])
    assert (list(m.peak_gib_interval) if m.peak_gib_interval else None) == memory["peak_gib_interval"]
    assert [(s.stage, s.params, s.grads, s.optimizer, s.activations, s.residual, s.total) for s in m.stages] == [
        (s["stage"], s["params"], s["grads"], s["optimizer"], s["activations"], s["residual"], s["total"])
        for s in memory["stages"]]
    assert (planner.cluster, planner.cluster_assumed, planner.cluster_source) == (
        doc["cluster"], doc["cluster_assumed"], doc["cluster_source"])
    p, perf = r.perf, doc["perf"]
    for key in ("step_time_s", "tokens_per_s", "tflops_per_gpu", "mfu", "pts_s", "coefficients",
                "coefficients_source", "coefficients_gpu", "coefficients_fitted_under", "coefficients_scale",
                "link_coefficients_source",
                "interval_source"):
        assert getattr(p, key) == perf[key], key
    assert p.model_flops_per_step == perf["model_flops_per_step"]
    assert (list(p.step_time_s_interval) if p.step_time_s_interval else None) == perf["step_time_s_interval"]
    for key, value in perf["breakdown"].items():
        assert getattr(p.breakdown, key) == value, key


def test_experts_equal_the_cli_document():
    """A model with experts: ep and etp are keywords, the EP time is in the breakdown."""
    moe = headroom.Planner(model="mixtral-8x7b", cluster="dgx-h100")
    r = moe.estimate(seq=4096, gpus=64, pp=2, gbs=512, ep=8, etp=1)
    doc = json.loads(headroom.run("estimate", "--model", "mixtral-8x7b", "--cluster", "dgx-h100", "--seq", "4096",
                                  "--gpus", "64", "--pp", "2", "--gbs", "512", "--ep", "8", "--etp", "1", "--json"))
    assert r.memory.paper_total_gib is None and doc["memory"]["paper_total_gib"] is None
    assert r.memory.peak_gib == doc["memory"]["peak_gib"]
    assert r.perf.step_time_s == doc["perf"]["step_time_s"]
    assert r.perf.breakdown.ep_comm_s == doc["perf"]["breakdown"]["ep_comm_s"] > 0
    out = moe.estimate_many({"ep": np.array([1, 2, 4, 8]), "seq": 4096, "gpus": 64, "pp": 2, "gbs": 512, "etp": 1})
    assert out["perf.step_time_s"][3] == r.perf.step_time_s
    flex = moe.estimate(seq=4096, gpus=64, pp=2, gbs=512, ep=8, etp=1, moe_token_dispatcher_type="flex",
                        moe_expert_capacity_factor=1.2)
    assert flex.memory.peak_gib > r.memory.peak_gib
    with pytest.raises(ValueError, match="ep 3 does not divide the 8 experts"):
        moe.estimate(seq=4096, gpus=64, ep=3)


def test_fp8_and_offloading_equal_the_cli_document():
    """FP8 and offloading: keywords named as the JSON's, the offload time in the breakdown."""
    h100 = headroom.Planner(model="llama3.1-8b", cluster="dgx-h100")
    r = h100.estimate(seq=8192, gpus=8, gbs=64, precision="fp8", fp8_recipe="tensorwise", optimizer_cpu_offload=True,
                      optimizer_offload_fraction=0.5, cpu_offloading_num_layers=2)
    doc = json.loads(headroom.run("estimate", "--model", "llama3.1-8b", "--cluster", "dgx-h100", "--seq", "8192",
                                  "--gpus", "8", "--gbs", "64", "--precision", "fp8", "--fp8-recipe", "tensorwise",
                                  "--optimizer-cpu-offload", "--optimizer-offload-fraction", "0.5",
                                  "--cpu-offloading-num-layers", "2", "--json"))
    assert r.memory.peak_gib == doc["memory"]["peak_gib"]
    assert r.perf.step_time_s == doc["perf"]["step_time_s"]
    assert r.perf.breakdown.offload_s == doc["perf"]["breakdown"]["offload_s"] > 0
    with pytest.raises(ValueError, match="no FP8"):
        headroom.Planner(model="llama3.1-8b", cluster="dgx-a100-80gb").estimate(seq=8192, gpus=8, precision="fp8")


def test_tp_comm_overlap_equals_the_cli_document():
    """Megatron-LM's --tp-comm-overlap: the keyword, the JSON's name, the same price as the CLI's."""
    h100 = headroom.Planner(model="llama3.1-70b", cluster="dgx-h100")
    r = h100.estimate(seq=8192, gpus=32, tp=4, pp=4, gbs=64, tp_comm_overlap=True)
    doc = json.loads(headroom.run("estimate", "--model", "llama3.1-70b", "--cluster", "dgx-h100", "--seq", "8192",
                                  "--gpus", "32", "--tp", "4", "--pp", "4", "--gbs", "64", "--tp-comm-overlap",
                                  "--json"))
    assert doc["layout"]["tp_comm_overlap"] is True
    assert r.perf.step_time_s == doc["perf"]["step_time_s"]
    assert r.perf.breakdown.tp_comm_s < h100.estimate(seq=8192, gpus=32, tp=4, pp=4, gbs=64).perf.breakdown.tp_comm_s


def test_pipeline_send_overlap_equals_the_cli_document():
    """Megatron-LM's overlap_p2p_comm: the JSON's name; False is --no-overlap-p2p-communication."""
    h100 = headroom.Planner(model="llama3.1-8b", cluster="dgx-h100")
    r = h100.estimate(seq=8192, gpus=32, tp=2, pp=4, vpp=2, gbs=64, overlap_p2p_comm=False)
    doc = json.loads(headroom.run("estimate", "--model", "llama3.1-8b", "--cluster", "dgx-h100", "--seq", "8192",
                                  "--gpus", "32", "--tp", "2", "--pp", "4", "--vpp", "2", "--gbs", "64",
                                  "--no-overlap-p2p-communication", "--json"))
    assert doc["layout"]["overlap_p2p_comm"] is False
    assert r.perf.step_time_s == doc["perf"]["step_time_s"]
    overlapped = h100.estimate(seq=8192, gpus=32, tp=2, pp=4, vpp=2, gbs=64)
    assert r.perf.breakdown.pp_comm_s > overlapped.perf.breakdown.pp_comm_s


def test_estimate_many_equals_single_estimates(planner):
    rng = np.random.default_rng(7)
    n = 300
    columns = {"tp": rng.choice([1, 2, 4, 8], n), "pp": rng.choice([1, 2, 4], n), "mbs": rng.choice([1, 2], n),
               "seq": 8192, "gpus": 64, "gbs": 1024}
    out = planner.estimate_many(columns)
    assert set(out) >= {"memory.peak_gib", "memory.verdict", "memory.fits", "perf.step_time_s", "perf.mfu"}
    for i in range(n):
        r = planner.estimate(seq=8192, gpus=64, gbs=1024, tp=int(columns["tp"][i]), pp=int(columns["pp"][i]),
                             mbs=int(columns["mbs"][i]))
        assert out["memory.peak_gib"][i] == r.memory.peak_gib
        assert out["memory.verdict"][i] == r.memory.verdict
        assert out["perf.step_time_s"][i] == r.perf.step_time_s
    assert out["memory.fits"].dtype == bool and out["perf.step_time_s"].dtype == np.float64


def test_estimate_many_errors(planner):
    with pytest.raises(ValueError, match=r"row 1: tp 3 does not divide the 32 attention heads"):
        planner.estimate_many({"tp": [1, 3], "seq": 8192, "gpus": 8})
    out = planner.estimate_many({"tp": [1, 3], "seq": 8192, "gpus": 8}, on_error="nan")
    assert list(out["memory.verdict"]) != ["invalid", "invalid"] and out["memory.verdict"][1] == "invalid"
    assert np.isnan(out["perf.step_time_s"][1])
    with pytest.raises(ValueError, match=r"column 'pp' has 3 values, another 2"):
        planner.estimate_many({"tp": [1, 2], "pp": [1, 2, 4], "seq": 8192, "gpus": 8})
    with pytest.raises(TypeError, match=r"unexpected keyword 'tq'"):
        planner.estimate_many({"tq": [1, 2], "seq": 8192, "gpus": 8})


def test_errors_name_keywords_not_flags(planner):
    with pytest.raises(ValueError, match=r"^tp 3 does not divide the 32 attention heads of llama3.1-8b"):
        planner.estimate(seq=8192, tp=3, gpus=6)
    with pytest.raises(ValueError, match=r"seq is required"):
        planner.estimate(tp=2, gpus=8)
    with pytest.raises(TypeError, match=r"unexpected keyword 'tq'"):
        planner.estimate(seq=8192, tq=2, gpus=8)
    with pytest.raises(ValueError, match=r"unknown model 'llama9'"):
        headroom.Planner(model="llama9", gpu="h100-94gb")


def test_mtsl_and_rank(planner):
    m = planner.mtsl(tp=8, gpus=8, gbs=8)
    doc = json.loads(headroom.run("mtsl", "--model", "llama3.1-8b", "--gpu", "h100-94gb", "--tp", "8", "--gpus", "8",
                                  "--gbs", "8", "--json"))
    assert m == {key: doc[key] for key in m}
    ranked = planner.rank(gpus=8, seq=8192, gbs=64, top=3)
    assert ranked["model"] == "llama3.1-8b" and ranked["layouts"][0]["step_time_s"] > 0


def test_rank_keeps_the_jobs_flag_knobs_off(planner):
    # A flag knob with an off switch (overlap_grad_reduce's --no-overlap-grad-reduce) is one keyword; False reaches
    # every layout rank returns, as True does for fp16.
    ranked = planner.rank(gpus=8, seq=8192, gbs=64, top=3, overlap_grad_reduce=False, fp16=True)
    assert ranked["layouts"]
    assert all(not x["layout"]["overlap_grad_reduce"] and x["layout"]["fp16"] for x in ranked["layouts"])


def test_mtsl_says_which_batch_it_holds(planner):
    """A batch not given is p micro-batches per pipeline (1F1B then holds p in flight, as any run with m >= p does):
    the MTSL of the default is that of a larger given batch, and the result says which batch it is."""
    default = planner.mtsl(tp=2, pp=2, gpus=8)
    given = planner.mtsl(tp=2, pp=2, gpus=8, gbs=64)
    assert not default["gbs_given"] and given["gbs_given"]
    assert default["microbatches"] == 2 and default["gbs"] == 2 * 2  # dp 2 x mbs 1 x pp 2
    assert given["microbatches"] == 32
    assert default["mtsl_tokens"] == given["mtsl_tokens"]
    doc = json.loads(headroom.run("mtsl", "--model", "llama3.1-8b", "--gpu", "h100-94gb", "--tp", "2", "--pp", "2",
                                  "--gpus", "8", "--json"))
    assert default == {key: doc[key] for key in default}
