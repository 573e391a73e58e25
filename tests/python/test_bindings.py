"""The Python module returns exactly the CLI's JSON and raises ValueError with the CLI's message."""
import json
import pathlib
import subprocess

import headroom
import pytest

ESTIMATE = dict(model="llama3.1-8b", gpu="h100-94gb", seq=8192, tp=2, cp=1, pp=1, mbs=1, gpus=8, gbs=1024,
                framework="megatron")


def cli_json(*args):
    return json.loads(headroom.run(*args, "--json"))


def test_estimate_matches_the_cli_document():
    r = headroom.estimate(**ESTIMATE)
    assert r == cli_json("estimate", "--model", "llama3.1-8b", "--gpu", "h100-94gb", "--seq", "8192", "--tp", "2",
                         "--cp", "1", "--pp", "1", "--mbs", "1", "--gpus", "8", "--gbs", "1024",
                         "--framework", "megatron")
    assert r["memory"]["verdict"] in ("fits", "oom")
    assert r["memory"]["paper_total_gib"] == pytest.approx(56.30, abs=0.01)  # 4D paper Table 7


def test_flags_from_keywords():
    full = headroom.estimate(**ESTIMATE, recompute="full", no_sp=True)
    assert full["layout"]["recompute"] == "full"
    assert full["layout"]["sequence_parallel"] is False


def test_bad_input_raises_value_error_with_the_cli_message():
    with pytest.raises(ValueError, match=r"--tp 3 does not divide the 32 attention heads"):
        headroom.estimate(**{**ESTIMATE, "tp": 3, "gpus": 6, "gbs": 6})
    with pytest.raises(ValueError, match=r"unknown model 'llama9'"):
        headroom.estimate(**{**ESTIMATE, "model": "llama9"})


def test_comm_and_rank():
    c = headroom.comm(strategy="zero3", params=7e9, gpus=64, group_size=8, accum=8)
    assert c["memory_bytes"]["params"] == pytest.approx(2 * 7e9 / 64)
    r = headroom.rank(model="llama3.1-8b", cluster="h100-94gb-x4", gpus=8, seq=8192, gbs=64, top=3)
    assert r["evaluated"] > 0 and len(r["layouts"]) <= 3


def test_mtsl():
    m = headroom.mtsl(model="llama3.1-8b", gpu="h100-94gb", gpus=8, tp=2, dp=4)
    assert m["mtsl_tokens"] > 0


def test_the_command_line_program_agrees(tmp_path):
    """The installed console program (when on PATH via the build tree) prints the same document."""
    exe = pathlib.Path(headroom.__file__).parents[2] / "bin" / "headroom"  # build/python/headroom -> build/bin
    if not exe.is_file():
        pytest.skip("an installed package, not a build tree: no headroom program beside it")
    out = subprocess.run([str(exe), "estimate", "--model", "llama3.1-8b", "--gpu", "h100-94gb", "--seq", "8192",
                          "--tp", "2", "--gpus", "8", "--gbs", "1024", "--json"], capture_output=True, text=True)
    assert json.loads(out.stdout) == headroom.estimate(**ESTIMATE)


def test_load_profile(tmp_path):
    root = pathlib.Path(__file__).resolve().parents[2]
    p = headroom.load_profile(root / "data" / "profiles" / "cpu-example-quick.json")
    assert "gemm" in p and "collectives" in p
    bad = tmp_path / "bad.json"
    bad.write_text('{"version": 1')
    with pytest.raises(ValueError, match="bad.json"):
        headroom.load_profile(bad)


def test_first_hour_python_fixes(tmp_path):
    """A list of constraints is repeated flags, a binary profile is a ValueError (not a
    UnicodeDecodeError), help=True says where the help is (not a JSONDecodeError), and the help text is there."""
    r = headroom.rank(model="llama3.1-8b", gpu="h100-94gb", gpus=8, seq=4096, gbs=64, top=3,
                      constraint=["pp=1", "tp<=2"])
    assert r["layouts"] and all(x["layout"]["pp"] == 1 and x["layout"]["tp"] <= 2 for x in r["layouts"])
    binary = tmp_path / "profile.bin"
    binary.write_bytes(b"\x89PNG\r\n\x1a\n\x00\xff\xfe" * 10)
    with pytest.raises(ValueError):
        headroom.load_profile(binary)
    with pytest.raises(ValueError, match="headroom.help"):
        headroom.estimate(help=True)
    assert "Examples:" in headroom.help("estimate")
    assert issubclass(headroom.InternalError, RuntimeError)


def test_python_m_headroom_is_the_command_line():
    """``python -m headroom`` (and the ``headroom`` script pip installs) run the command line: same output, same
    exit codes."""
    import sys

    r = subprocess.run([sys.executable, "-m", "headroom", "estimate", "--model", "llama3.1-8b", "--gpu", "h100-94gb",
                        "--seq", "8192", "--gpus", "8", "--json"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["memory"]["verdict"] in ("fits", "oom")
    r = subprocess.run([sys.executable, "-m", "headroom", "estimat"], capture_output=True, text=True)
    assert r.returncode == 2 and "did you mean 'estimate'" in r.stderr
