#!/usr/bin/env python3
"""The plan page as a person uses it: `rank --html` writes one self-contained file (no network, no external script or
style), and so does `check --html`; headless Chromium opens them, a click on a layout row (the page's #select=N runs
the row's click handler) fills the selected layout's numbers, and every number the DOM shows is compared with `rank
--json` (and `check --json`); with `--mtsl-curve` the selected layout's MTSL is `mtsl --json`'s for that layout. A
screenshot is kept.

    tests/cli/plan_page_test.py --headroom build/bin/headroom [--chromium chromium] [--screenshot FILE]

Exits 77 (skipped) where no Chromium is installed.
"""
import argparse
import html.parser
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

JOB = ["rank", "--model", "llama3.1-70b", "--cluster", "dgx-h100", "--gpus", "64", "--seq", "8192", "--gbs", "512",
       "--top", "8"]


class Dom(html.parser.HTMLParser):
    """The text of the elements with an id, and the rows of the ranked table (their cells' data-value)."""

    def __init__(self):
        super().__init__()
        self.by_id, self.rows, self.stack, self.selected = {}, [], [], None
        self.in_tbody = False

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.stack.append(a.get("id"))
        if tag == "tbody":
            self.in_tbody = True
        if self.in_tbody and tag == "tr":
            self.rows.append({"index": int(a["data-index"]), "cells": []})
            if "selected" in (a.get("class") or ""):
                self.selected = int(a["data-index"])
        if self.in_tbody and tag == "td":
            self.rows[-1]["cells"].append(a.get("data-value"))

    def handle_endtag(self, tag):
        if tag == "tbody":
            self.in_tbody = False
        if self.stack:
            self.stack.pop()

    def handle_data(self, data):
        if self.stack and self.stack[-1]:
            self.by_id[self.stack[-1]] = self.by_id.get(self.stack[-1], "") + data


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--headroom", required=True)
    p.add_argument("--chromium", default=shutil.which("chromium") or shutil.which("chromium-browser"))
    p.add_argument("--screenshot", default="plan_page.png")
    o = p.parse_args()
    if not o.chromium:
        print("skipped: no chromium")
        return 77
    failures = []

    def expect(ok, what):
        if not ok:
            failures.append(what)

    with tempfile.TemporaryDirectory() as tmp:
        page = os.path.join(tmp, "plan.html")
        r = subprocess.run([o.headroom, *JOB, "--json", "--html", page, "--mtsl-curve"], capture_output=True, text=True,
                           check=True)
        doc = json.loads(r.stdout)
        text = open(page, encoding="utf-8").read()
        # Self-contained: no URL but the SVG namespace, no external script, style, image or font.
        urls = set(re.findall(r"https?://[^\s\"'<>)]+", text)) - {"http://www.w3.org/2000/svg"}
        expect(not urls, f"the page names URLs: {sorted(urls)[:5]}")
        expect(not re.search(r"<(script|link|img)[^>]*\b(src|href)=", text), "an external resource")
        for n in (0, 2, len(doc["layouts"]) - 1):
            out = subprocess.run([o.chromium, "--headless", "--no-sandbox", "--disable-gpu", "--user-data-dir=" + tmp,
                                  "--virtual-time-budget=5000", "--dump-dom", f"file://{page}#select={n}"],
                                 capture_output=True, text=True, timeout=120).stdout
            dom = Dom()
            dom.feed(out)
            x = doc["layouts"][n]
            expect(len(dom.rows) == len(doc["layouts"]), f"{len(dom.rows)} rows, rank --json has {len(doc['layouts'])}")
            expect(dom.selected == n, f"#select={n}: row {dom.selected} selected")
            shown = {k: dom.by_id.get("sel-" + k, "").strip() for k in ("step", "tokens", "mfu", "peak", "verdict")}
            want = {"step": f"{x['step_time_s']:.3f}", "tokens": f"{x['tokens_per_s']:.0f}",
                    "mfu": f"{100 * x['mfu']:.1f}", "peak": f"{x['peak_gib']:.2f}", "verdict": x["verdict"]}
            expect(shown == want, f"row {n}: the page shows {shown}, rank --json {want}")
            for row in dom.rows:  # every cell's value is the JSON's
                y = doc["layouts"][row["index"]]
                cells = row["cells"]
                expect(abs(float(cells[2]) - y["step_time_s"]) <= 1e-9 * y["step_time_s"] and
                       abs(float(cells[6]) - y["peak_gib"]) <= 1e-9 * y["peak_gib"] and cells[8] == y["verdict"],
                       f"row {row['index']}: cells {cells}")
            name = dom.by_id.get("sel-name", "")
            expect(f"tp{x['layout']['tp']} " in name and f"pp{x['layout']['pp']}" in name, f"row {n}: the name {name}")
            expect("--tensor-model-parallel-size" in dom.by_id.get("launch", ""), f"row {n}: no launch command")
            lay = x["layout"]
            mtsl = json.loads(subprocess.run(
                [o.headroom, "mtsl", *JOB[1:5], "--gpus", str(lay["gpus"]), "--gbs", str(lay["gbs"]), "--mbs",
                 str(lay["mbs"]), "--tp", str(lay["tp"]), "--cp", str(lay["cp"]), "--pp", str(lay["pp"]), "--vpp",
                 str(lay["vpp"]), "--sharding", lay["sharding_code"], "--recompute", lay["recompute"], "--schedule",
                 lay["schedule"], "--sp" if lay["sequence_parallel"] else "--no-sp", "--json"],
                capture_output=True, text=True, check=True).stdout)
            lo, hi = mtsl["mtsl_tokens_interval"]
            want_mtsl = f"MTSL {mtsl['mtsl_tokens']} tokens (band {lo}-{hi})"
            shown_mtsl = dom.by_id.get("mtsl-text", "")
            expect(shown_mtsl.startswith(want_mtsl), f"row {n}: the page says {shown_mtsl!r}, mtsl --json {want_mtsl}")
        # check --html: the same page of the command's job, the command's layout first and selected.
        command = ["torchrun", "--nproc_per_node", "8", "pretrain_gpt.py", "--num-layers", "32", "--hidden-size",
                   "4096", "--num-attention-heads", "32", "--group-query-attention", "--num-query-groups", "8",
                   "--ffn-hidden-size", "14336", "--seq-length", "8192", "--swiglu", "--normalization", "RMSNorm",
                   "--disable-bias-linear", "--untie-embeddings-and-output-weights", "--position-embedding-type",
                   "rope", "--attention-dropout", "0", "--bf16", "--vocab-size", "128256",
                   "--tensor-model-parallel-size", "2", "--sequence-parallel", "--global-batch-size", "32",
                   "--recompute-granularity", "selective", "--use-distributed-optimizer", "--overlap-grad-reduce"]
        page2 = os.path.join(tmp, "check.html")
        r = subprocess.run([o.headroom, "check", "--cluster", "dgx-h100", "--json", "--html", page2, "--", *command],
                           capture_output=True, text=True)
        expect(r.returncode in (0, 3, 4), f"check exited {r.returncode}: {r.stderr}")
        out = subprocess.run([o.chromium, "--headless", "--no-sandbox", "--disable-gpu", "--user-data-dir=" + tmp,
                              "--virtual-time-budget=5000", "--dump-dom", f"file://{page2}"],
                             capture_output=True, text=True, timeout=120).stdout
        dom = Dom()
        dom.feed(out)
        check = json.loads(r.stdout)
        expect(dom.by_id.get("sel-name", "").startswith("the command: "), f"check page: {dom.by_id.get('sel-name')}")
        expect(dom.by_id.get("sel-step", "").strip() == f"{check['perf']['step_time_s']:.3f}",
               f"check page: step {dom.by_id.get('sel-step')}, check --json {check['perf']['step_time_s']}")
        subprocess.run([o.chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                        "--user-data-dir=" + tmp, "--window-size=1250,2200", "--screenshot=" + os.path.abspath(
                            o.screenshot), f"file://{page}#select=1"], capture_output=True, timeout=120)
        expect(os.path.exists(o.screenshot), "no screenshot")
    for f in failures:
        print("FAIL", f)
    print(f"{len(failures)} failed" if failures else f"the page agrees with rank --json; screenshot {o.screenshot}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
