"""Every plot of tools/scripts/plot.py, drawn from the headroom package's JSON into a temporary directory, and the
launch export of the package."""
import json
import struct
import subprocess
import sys

import headroom
import pytest
from script_module import ROOT, load_script, script_path

pytest.importorskip("matplotlib")

PLOT_PY = script_path("plot")
PROFILE = ROOT / "data" / "profiles" / "cpu-example-quick.json"

plot = load_script("plot")


def check_png(path, min_bytes=20_000, min_size=(600, 400)):
    """A real, non-trivial PNG: the signature, a plausible size in pixels and enough bytes to hold a plot."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", path
    width, height = struct.unpack(">II", data[16:24])
    assert width >= min_size[0] and height >= min_size[1], (width, height)
    assert len(data) >= min_bytes, len(data)
    assert not list(path.parent.glob(".plot-*")), "temporary file left behind"


def test_memory(tmp_path):
    doc = headroom.estimate(model="llama3.1-70b", gpu="h100-94gb", seq=8192, tp=4, pp=4, gpus=64, gbs=256)
    out = tmp_path / "memory.png"
    plot.plot_memory(doc, str(out))
    check_png(out)


def test_mtsl_curves_over_lora_rank_and_gpus(tmp_path):
    ranks = [8, 64, 256, 1024]
    docs = [headroom.mtsl(model="llama3.1-8b", gpu="h100-94gb", gpus=8, tp=tp, sweep="lora-rank=" +
                          ",".join(map(str, ranks))) for tp in (2, 4)]
    out = tmp_path / "mtsl.png"
    plot.plot_mtsl(docs, str(out))
    check_png(out)
    gpus = headroom.mtsl(model="llama3.1-70b", gpu="h100-94gb", gpus=8, tp=8, sweep="gpus=8,16,32,64")
    out = tmp_path / "mtsl_gpus.png"
    plot.plot_mtsl([gpus], str(out))
    check_png(out)
    with pytest.raises(ValueError, match="same variable"):
        plot.plot_mtsl([docs[0], gpus], str(tmp_path / "mixed.png"))


def test_rank(tmp_path):
    doc = headroom.rank(model="llama3.1-8b", cluster="h100-94gb-x4", gpus=16, seq=8192, gbs=128, top=300)
    out = tmp_path / "rank.png"
    plot.plot_rank(doc, str(out))
    check_png(out)


def test_paro_and_its_alias(tmp_path):
    doc = headroom.comm(compare=True, params=7e9, gpus=64, group_size=8, accum=8)
    out = tmp_path / "paro.png"
    plot.plot_paro(doc, str(out))
    check_png(out)
    src = tmp_path / "fig5.json"
    src.write_text(json.dumps(doc))
    alias = tmp_path / "alias.png"
    script = ROOT / "tools" / "scripts" / "plot_paro.py"
    subprocess.run([sys.executable, str(script), str(src), "-o", str(alias)], check=True)
    check_png(alias)


def test_calibration(tmp_path):
    out = tmp_path / "calibration.png"
    plot.plot_calibration(json.loads(PROFILE.read_text()), str(out))
    check_png(out, min_size=(1200, 400))


def test_command_line_reads_stdin_or_runs_headroom(tmp_path):
    doc = headroom.estimate(model="llama3.1-8b", gpu="h100-94gb", seq=8192, tp=2, gpus=8)
    out = tmp_path / "stdin.png"
    subprocess.run([sys.executable, str(PLOT_PY), "memory", "-", "-o", str(out)], input=json.dumps(doc), text=True,
                   check=True)
    check_png(out)
    out = tmp_path / "run.png"
    subprocess.run([sys.executable, str(PLOT_PY), "memory", "-o", str(out), "--", "--model", "llama3.1-8b", "--gpu",
                    "h100-94gb", "--seq", "8192", "--tp", "2", "--gpus", "8"], check=True)
    check_png(out)
    wrong = subprocess.run([sys.executable, str(PLOT_PY), "rank", "-", "-o", str(tmp_path / "x.png")],
                           input=json.dumps(doc), text=True, capture_output=True)
    assert wrong.returncode == 2 and "headroom rank --json" in wrong.stderr
    assert not (tmp_path / "x.png").exists()


def test_launch_export():
    r = headroom.launch(model="llama3.1-8b", cluster="dgx-h100", seq=8192, tp=2, pp=2, gpus=16, gbs=64)
    args = r["megatron"]
    assert args[args.index("--tensor-model-parallel-size") + 1] == "2"
    assert "[parallelism]" in r["torchtitan_toml"]
    assert "init_device_mesh" in r["fsdp_python"]
    assert r == json.loads(headroom.run("launch", "--model", "llama3.1-8b", "--cluster", "dgx-h100", "--seq", "8192",
                                        "--tp", "2", "--pp", "2", "--gpus", "16", "--gbs", "64", "--json"))
    with pytest.raises(ValueError, match="--export"):
        headroom.launch(model="llama3.1-8b", cluster="dgx-h100", seq=8192, gpus=8, export="colossalai")


def test_outputs_that_are_not_files_are_refused_or_written_into(tmp_path):
    """-o /dev/null (as root) replaced the system's /dev/null; a directory or a missing input gave a
    traceback. A FIFO is written into and stays a FIFO; a directory, a missing directory and a missing input
    are one line and exit 2."""
    import os
    import stat
    import threading

    doc = tmp_path / "est.json"
    doc.write_text(headroom.run("estimate", "--model", "llama3.1-8b", "--gpu", "h100-94gb", "--seq", "8192",
                                "--tp", "2", "--gpus", "8", "--json"))
    for out, expected in ((tmp_path, "is a directory"), (tmp_path / "no" / "m.png", "does not exist")):
        r = subprocess.run([sys.executable, str(PLOT_PY), "memory", str(doc), "-o", str(out)],
                           capture_output=True, text=True)
        assert r.returncode == 2 and expected in r.stderr and "Traceback" not in r.stderr, r.stderr
    r = subprocess.run([sys.executable, str(PLOT_PY), "memory", str(tmp_path / "missing.json"), "-o",
                        str(tmp_path / "m.png")], capture_output=True, text=True)
    assert r.returncode == 2 and "missing.json" in r.stderr and "Traceback" not in r.stderr, r.stderr
    fifo = tmp_path / "pipe.png"
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()))
    reader.start()
    r = subprocess.run([sys.executable, str(PLOT_PY), "memory", str(doc), "-o", str(fifo)],
                       capture_output=True, text=True)
    reader.join()
    assert r.returncode == 0, r.stderr
    assert got and got[0].startswith(b"\x89PNG")
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
