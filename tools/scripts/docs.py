#!/usr/bin/env python3
"""The generated blocks of the documentation, from the program itself so that they cannot drift:

    <!-- generated: headroom validate -->   the text `headroom validate` prints (the validation tables)
    <!-- generated: headroom --help -->     `headroom --help` and every command's `--help` (the CLI reference)
    <!-- generated: knobs -->               the knob table (`headroom._stubs` is its Python side)

each closed by `<!-- end generated -->`, in the Markdown files under the source tree.

    tools/scripts/docs.py --headroom build/bin/headroom            # rewrite them
    tools/scripts/docs.py --headroom build/bin/headroom --check    # exit 1 naming the first stale block (ctest)
"""
from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
END = "<!-- end generated -->"
COMMANDS = ("estimate", "rank", "mtsl", "comm", "launch", "simulate", "calibrate", "validate")


def run(headroom: str, *args: str) -> str:
    done = subprocess.run([headroom, *args], capture_output=True, text=True, cwd=ROOT)
    if done.returncode != 0:
        raise SystemExit(f"docs.py: headroom {' '.join(args)} exited {done.returncode}: {done.stderr.strip()}")
    return done.stdout


def fenced(text: str) -> str:
    return "```\n" + text.rstrip("\n") + "\n```"


def knob_table(headroom: str) -> str:
    """The knob table as Markdown, read from the Python package when the build has it, else from the C++ reference
    the CLI prints (both come from estimator/core/src/knobs.cpp)."""
    sys.path.insert(0, str(Path(headroom).resolve().parents[1] / "python"))
    import headroom as hr  # noqa: PLC0415 (the build's package, found only now)

    rows = ["| knob (keyword, run column) | type | default | CLI | Megatron-LM log key | JSON | what it means |",
            "|---|---|---|---|---|---|---|"]
    for k in hr.knobs():
        kind = k["type"] + (": " + "\\|".join(k["choices"]) if k["choices"] else "")
        flags = ", ".join(f"`{f}`" for f in k["flags"] + k["off_flags"])
        name = f"`{k['name']}`" + (" (" + ", ".join(f"`{a}`" for a in k["aliases"]) + ")" if k["aliases"] else "")
        unit = f" {k['unit']}" if k["unit"] and k["default"][:1].isdigit() else ""
        rows.append(f"| {name} | {kind} | {k['default']}{unit} | {flags} | {k['log_key'] and '`' + k['log_key'] + '`'}"
                    f" | {k['json'] and '`' + k['json'] + '`'} | {k['help'].replace('|', '/')} |")
    return "\n".join(rows)


def blocks(headroom: str) -> dict[str, str]:
    helps = [f"$ headroom --help\n{run(headroom, '--help')}"]
    helps += [f"$ headroom {c} --help\n{run(headroom, c, '--help')}" for c in COMMANDS]
    return {"headroom validate": fenced(run(headroom, "validate")),
            "headroom --help": fenced("\n".join(helps)),
            "knobs": knob_table(headroom)}


def regenerate(text: str, generated: dict[str, str]) -> str:
    out, rest = [], text
    while True:
        start = rest.find("<!-- generated: ")
        if start < 0:
            out.append(rest)
            return "".join(out)
        head_end = rest.index("-->", start) + 3
        name = rest[start + len("<!-- generated: "):head_end - 3].strip()
        if name not in generated:
            raise SystemExit(f"docs.py: unknown generated block '{name}' (known: {', '.join(generated)})")
        end = rest.index(END, head_end)
        out.append(rest[:head_end] + "\n" + generated[name] + "\n")
        rest = rest[end:]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--headroom", required=True, help="the built headroom binary")
    parser.add_argument("--check", action="store_true", help="exit 1 when a generated block is stale")
    args = parser.parse_args()
    generated = blocks(args.headroom)
    stale = []
    for path in sorted(ROOT.glob("**/*.md")):
        if any(part.startswith(("build", ".")) for part in path.relative_to(ROOT).parts):
            continue
        text = path.read_text()
        if "<!-- generated: " not in text:
            continue
        new = regenerate(text, generated)
        if new != text:
            stale.append(path.relative_to(ROOT))
            if not args.check:
                path.write_text(new)
    if args.check and stale:
        print(f"docs.py: stale generated blocks in {', '.join(map(str, stale))}: run tools/scripts/docs.py "
              f"--headroom {args.headroom}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
