"""``headroom`` on PATH after ``pip install .``, and ``python -m headroom``: the command line, run in-process."""
from __future__ import annotations

import sys

from . import _headroom


def main(argv: list[str] | None = None) -> int:
    code, out, err = _headroom.run(list(sys.argv[1:] if argv is None else argv))
    sys.stdout.write(out.decode("utf-8", "backslashreplace"))
    sys.stderr.write(err.decode("utf-8", "backslashreplace"))
    return code


if __name__ == "__main__":
    sys.exit(main())
