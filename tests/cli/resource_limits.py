#!/usr/bin/env python3
"""Every command under a memory and a time cap on hostile inputs: each must finish within the cap, with exit code 0
or 2 (a refusal is one line on stderr and nothing on stdout), never hang, grow without bound or die by a signal.

    tests/cli/resource_limits.py --headroom build/bin/headroom [--memory-mib 1024] [--seconds 20]

The inputs are those that once hung or ran away (a ring with fewer bytes than GPUs, unbounded reads of /dev/zero, a
FIFO with no writer, micro-batch counts in the millions, searches over 10^6 GPUs, byte counts past int64, thousands
of runs to fit) and others of their kind for every command.
"""
import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time

MODEL = ["--model", "llama3.1-8b", "--cluster", "dgx-h100"]


def cases(tmp):
    fifo = os.path.join(tmp, "fifo")
    os.mkfifo(fifo)
    runs = os.path.join(tmp, "runs.csv")
    with open(runs, "w") as f:
        f.write("model,cluster,gpus,tp,pp,mbs,gbs,seq,recompute,outcome,tflops_per_gpu,peak_memory_gib\n")
        for i in range(3000):
            tp = (1, 2, 4)[i % 3]
            f.write(f"llama3.1-8b,dgx-a100-80gb,8,{tp},1,1,{64 * (1 + i % 16)},{1024 * (4 + i % 5)},none,ok,"
                    f"{150 + i % 40},{40 + i % 30}\n")
    huge_json = os.path.join(tmp, "deep.json")
    with open(huge_json, "w") as f:
        f.write("[" * 200_000)
    return [
        ("simulate ring, 1 byte", ["simulate", "--collective", "all-gather", "--bytes", "1", "--cluster", "dgx-h100"]),
        ("simulate all-reduce, 1 byte, 4 nodes",
         ["simulate", "--collective", "all-reduce", "--bytes", "1", "--cluster", "dgx-h100", "--nodes", "4"]),
        ("simulate 2,000,000 micro-batches",
         ["simulate", *MODEL, "--tp", "2", "--pp", "2", "--gpus", "16", "--gbs", "2000000", "--seq", "8192"]),
        ("simulate trace to a FIFO",
         ["simulate", *MODEL, "--tp", "2", "--gpus", "8", "--gbs", "8", "--seq", "8192", "--trace", fifo]),
        ("estimate --profile /dev/zero",
         ["estimate", *MODEL, "--seq", "8192", "--gpus", "8", "--profile", "/dev/zero"]),
        ("estimate --profile /dev/urandom",
         ["estimate", *MODEL, "--seq", "8192", "--gpus", "8", "--profile", "/dev/urandom"]),
        ("estimate --profile FIFO", ["estimate", *MODEL, "--seq", "8192", "--gpus", "8", "--profile", fifo]),
        ("estimate --profile deeply nested JSON",
         ["estimate", *MODEL, "--seq", "8192", "--gpus", "8", "--profile", huge_json]),
        ("estimate --model deeply nested JSON", ["estimate", "--model", huge_json, "--seq", "8192", "--gpus", "8"]),
        ("estimate seq 10^12", ["estimate", "--model", "llama3.1-405b", "--cluster", "dgx-h100", "--seq",
                                "1000000000000", "--gpus", "8", "--json"]),
        ("estimate gpus 10^12", ["estimate", *MODEL, "--seq", "8192", "--gpus", "1000000000000"]),
        ("rank 405B on 16,384 GPUs, every sharding",
         ["rank", "--model", "llama3.1-405b", "--cluster", "dgx-h100", "--gpus", "16384", "--seq", "8192", "--gbs",
          "2048", "--all-shardings", "--top", "100000", "--json"]),
        ("rank on 10^12 GPUs", ["rank", *MODEL, "--gpus", "1000000000000", "--seq", "8192", "--gbs", "1024"]),
        ("mtsl --target-seq 10^9 over 10^6 GPUs",
         ["mtsl", *MODEL, "--target-seq", "1000000000", "--max-gpus", "1000000"]),
        ("mtsl --max-gpus 10^12", ["mtsl", *MODEL, "--target-seq", "8192", "--max-gpus", "1000000000000"]),
        ("mtsl --any-layout on 65,536 GPUs",
         ["mtsl", "--model", "llama3.1-405b", "--cluster", "dgx-h100", "--gpus", "65536", "--any-layout"]),
        ("mtsl sweep of 10,000 GPU counts",
         ["mtsl", *MODEL, "--gpus", "8", "--sweep", "gpus=" + ",".join(str(8 * i) for i in range(1, 10001))]),
        ("comm --optimizer-bytes 1e300",
         ["comm", "--strategy", "zero3", "--params", "7e9", "--gpus", "64", "--group-size", "8", "--optimizer-bytes",
          "1e300", "--json"]),
        ("comm on 10^12 GPUs",
         ["comm", "--strategy", "paro-igg", "--params", "1e15", "--gpus", "1000000000000", "--group-size", "8"]),
        ("launch 10^12 GPUs", ["launch", *MODEL, "--seq", "8192", "--gpus", "1000000000000"]),
        ("calibrate --from-runs /dev/zero", ["calibrate", "--from-runs", "/dev/zero", "--out",
                                             os.path.join(tmp, "p1.json")]),
        ("calibrate --from-runs FIFO", ["calibrate", "--from-runs", fifo, "--out", os.path.join(tmp, "p2.json")]),
        ("calibrate --ingest /dev/zero", ["calibrate", "--ingest", "/dev/zero", "--out", os.path.join(tmp, "p3.json")]),
        ("calibrate --out FIFO", ["calibrate", "--backend", "cpu", "--quick", "--out", fifo]),
        ("calibrate --from-runs 3,000 rows", ["calibrate", "--from-runs", runs, "--out", os.path.join(tmp, "p4.json")]),
        ("validate --framework pytorch-fsdp", ["validate", "--framework", "pytorch-fsdp"]),
        ("progress interval -1", ["calibrate", "--backend", "cpu", "--quick", "--progress-interval", "-1", "--out",
                                  os.path.join(tmp, "p5.json")]),
    ]


def limit(memory_bytes):
    def apply():
        if memory_bytes > 0:  # 0: no address-space cap (AddressSanitizer reserves terabytes for its shadow)
            resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    return apply


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--headroom", required=True)
    parser.add_argument("--memory-mib", type=int, default=1024)
    parser.add_argument("--seconds", type=float, default=30)
    o = parser.parse_args()
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        for name, args in cases(tmp):
            start = time.monotonic()
            try:
                r = subprocess.run([o.headroom, *args], capture_output=True, text=True, timeout=o.seconds,
                                   stdin=subprocess.DEVNULL, preexec_fn=limit(o.memory_mib << 20))
            except subprocess.TimeoutExpired:
                print(f"FAIL {name}: still running after {o.seconds:.0f} s")
                failures += 1
                continue
            seconds = time.monotonic() - start
            problem = ""
            if r.returncode not in (0, 2):
                problem = f"exit code {r.returncode}"
            elif r.returncode == 2 and (r.stdout or r.stderr.count("\n") != 1):
                problem = "a refusal that is not one line on stderr with nothing on stdout"
            first = (r.stderr.strip().splitlines() or [""])[0][:110]
            if problem:
                failures += 1
                print(f"FAIL {name}: {problem} ({seconds:.1f} s): {first}")
            else:
                print(f"ok   {name}: exit {r.returncode} in {seconds:.1f} s{': ' + first if first else ''}")
    print(f"{failures} failed" if failures else "every command within the caps")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
