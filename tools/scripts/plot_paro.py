#!/usr/bin/env python3
"""Draw PaRO Figure 5 from `headroom comm --compare --json`: an alias of `tools/scripts/plot.py paro`.

    build/bin/headroom comm --compare --params 7e9 --gpus 64 --group-size 8 --accum 8 --json > fig5.json
    tools/scripts/plot_paro.py fig5.json -o fig5.png    # or: ... --json | tools/scripts/plot_paro.py - -o fig5.png
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import plot  # noqa: E402

if __name__ == "__main__":
    args = sys.argv[1:]
    if "-o" not in args and "--output" not in args:
        args += ["-o", "paro_figure5.png"]  # the name this script always wrote
    sys.exit(plot.main(["paro", *args]))
