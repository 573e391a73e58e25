"""headroom: memory and throughput planning for large-language-model training.

``Planner`` is the typed API: the model, cluster and framework are resolved once, then each layout is priced by the
estimator directly (microseconds, not the command line's milliseconds), with objects whose fields equal
``headroom estimate --json``'s:

    >>> import headroom
    >>> p = headroom.Planner(model="llama3.1-8b", gpu="h100-94gb", framework="megatron")
    >>> r = p.estimate(seq=8192, tp=2, gpus=8, gbs=1024)
    >>> r.memory.verdict, round(r.memory.peak_gib, 2) == round(r.memory.stages[0].total / 2**30, 2)
    ('fits', True)
    >>> cols = p.estimate_many({"tp": [1, 2, 4, 8], "seq": 8192, "gpus": 64, "gbs": 1024})
    >>> cols["memory.verdict"].tolist()
    ['uncertain', 'fits', 'fits', 'fits']

The functions below take the command line's flags as keyword arguments (``tp=2`` for ``--tp 2``; a layout setting
under its knob name, ``sequence_parallel=False`` for ``--no-sp``; lists for comma-separated values or repeated flags
such as ``constraint=[...]``) and return the
plain ``dict`` that the same command prints with ``--json``. Bad input raises ``ValueError`` with the command
line's one-line message; a failure of headroom itself raises ``InternalError``.

    >>> import headroom
    >>> r = headroom.estimate(model="llama3.1-8b", gpu="h100-94gb", seq=8192, tp=2, cp=1, pp=1, mbs=1,
    ...                       gpus=8, gbs=1024, framework="megatron")
    >>> r["memory"]["verdict"]
    'fits'
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

_PACKAGE_DATA = Path(__file__).resolve().parent / "data"
if _PACKAGE_DATA.is_dir() and not os.environ.get("HEADROOM_DATA_DIR"):
    # an installed wheel carries its specs; a build tree uses the source tree's
    os.environ["HEADROOM_DATA_DIR"] = str(_PACKAGE_DATA)

from . import _headroom  # noqa: E402

__all__ = [
    "Estimate",
    "InternalError",
    "Planner",
    "calibrate",
    "comm",
    "estimate",
    "help",
    "knobs",
    "launch",
    "load_profile",
    "mtsl",
    "rank",
    "run",
    "simulate",
    "validate",
]


class InternalError(RuntimeError):
    """A failure of headroom itself (the command line's exit code 1), not of the input: please report it."""


class CheckFailed(RuntimeError):
    """``validate`` ran and a published table no longer reproduces."""


# Flags a command takes several times (``--constraint A --constraint B``); other lists are comma-separated.
_REPEATED = {"constraint", "ingest", "from_runs", "model"}
__version__ = "0.1.0"
# The knob table (knobs.hpp): a layout keyword by its knob name or an older one, and the flags that spell it.
_KNOBS = {name: knob for knob in json.loads(_headroom.describe())["knobs"]
          for name in [knob["name"], *knob["aliases"]]}


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def _knob_arguments(name: str, value: Any) -> list[str] | None:
    """A knob's keyword as flags: True/False as the flag's on or off spelling (none: the default, nothing); other
    values after the knob's first flag. None when the keyword is not a knob's."""
    knob = _KNOBS.get(name)
    if knob is None:
        return None
    if knob["type"] == "flag":
        if not isinstance(value, bool):
            raise ValueError(f"{knob['name']} {value!r} is not True or False")
        spelling = knob["flags"] if value else knob["off_flags"]
        return spelling[:1]
    if isinstance(value, (list, tuple)):
        value = ",".join(str(v) for v in value)
    return [knob["flags"][0], str(value)]


def _arguments(command: str, kwargs: dict[str, Any]) -> list[str]:
    args = [command]
    for name, value in kwargs.items():
        if value is None:
            continue
        knob = _knob_arguments(name, value)
        if knob is not None:
            args += knob
        elif value is False:
            continue
        elif value is True:
            args.append(_flag(name))
        elif isinstance(value, (list, tuple)) and name in _REPEATED:
            for v in value:
                args += [_flag(name), str(v)]
        elif isinstance(value, (list, tuple)):
            args += [_flag(name), ",".join(str(v) for v in value)]
        else:
            args += [_flag(name), str(value)]
    return args


def run(*args: str) -> str:
    """Runs ``headroom ARGS...`` and returns what it printed; raises ValueError on bad input."""
    code, out, err = _headroom.run([str(a) for a in args])
    out = out.decode("utf-8", "backslashreplace")
    err = err.decode("utf-8", "backslashreplace").strip()
    if code == 2:
        raise ValueError(err.removeprefix("error: "))
    if code == 1 and err.startswith("internal error: "):
        raise InternalError(err.removeprefix("internal error: "))
    if code != 0:
        raise CheckFailed(err or f"headroom exited with code {code}")
    return out


def help(command: str = "") -> str:  # noqa: A001 (the command line's --help)
    """The command line's ``--help`` text of ``command`` (or of headroom)."""
    return run(*([command] if command else []), "--help")


def _json(command: str, kwargs: dict[str, Any]) -> dict:
    if kwargs.get("help"):
        raise ValueError(f"help=True: the help text is headroom.help({command!r})")
    return json.loads(run(*_arguments(command, {**kwargs, "json": True})))


def estimate(**kwargs: Any) -> dict:
    """``headroom estimate``: memory per stage, verdict and predicted speed of one layout."""
    return _json("estimate", kwargs)


def mtsl(**kwargs: Any) -> dict:
    """``headroom mtsl``: the maximum trainable sequence length of a layout."""
    return _json("mtsl", kwargs)


def rank(**kwargs: Any) -> dict:
    """``headroom rank``: every valid layout that fits, fastest first."""
    return _json("rank", kwargs)


def launch(**kwargs: Any) -> dict:
    """``headroom launch``: Megatron-LM arguments, torchtitan TOML and a PyTorch FSDP2 snippet of one layout."""
    return _json("launch", kwargs)


def comm(**kwargs: Any) -> dict:
    """``headroom comm``: memory and communication volume of a sharding strategy (PaRO)."""
    return _json("comm", kwargs)


def simulate(**kwargs: Any) -> dict:
    """``headroom simulate``: a collective or a training step on the cluster's topology."""
    return _json("simulate", kwargs)


def calibrate(**kwargs: Any) -> dict:
    """``headroom calibrate``: run the microkernels and fit a profile."""
    return _json("calibrate", kwargs)


def validate(**kwargs: Any) -> dict:
    """``headroom validate``: the published tables reproduced; raises CheckFailed if a check fails."""
    return _json("validate", kwargs)


Estimate = _headroom.Estimate


class Planner(_headroom.Planner):
    """A model on a cluster under a framework, resolved once (specs, coefficients, calibration profile).

    ``estimate(**layout)`` returns an ``Estimate`` (``r.memory.peak_gib``, ``r.memory.verdict``,
    ``r.memory.stages[i].activations``, ``r.perf.step_time_s``, ``r.perf.breakdown.dp_comm_s``, ...), equal to
    ``headroom estimate --json``; ``estimate_many(columns)`` prices many layouts at once into NumPy columns keyed
    like the JSON paths; ``mtsl(**layout)`` the longest trainable sequence; ``rank(**search)`` the command line's
    ``rank`` document for this model, cluster and framework. Layout keywords are the knobs (``knobs()`` lists them:
    ``seq``, ``tp``, ``gpus``, ``sequence_parallel``, ``recompute``, ...), typed: an integer knob takes an ``int``,
    not ``2.0``; a flag a ``bool``. Bad values raise ``ValueError`` naming the keyword; an unknown keyword
    ``TypeError``.
    """

    def __init__(self, *, model: str, cluster: str = "", gpu: str = "", framework: str = "megatron",
                 profile: str | os.PathLike = "", data_dir: str | os.PathLike = "") -> None:
        profile, data_dir = os.fspath(profile), os.fspath(data_dir)
        super().__init__(model=model, cluster=cluster, gpu=gpu, framework=framework, profile=profile,
                         data_dir=data_dir)
        self._specs = {key: value for key, value in dict(model=model, cluster=cluster, gpu=gpu, framework=framework,
                                                         profile=profile, data_dir=data_dir).items() if value}

    def rank(self, **search: Any) -> dict:
        """``headroom rank`` for this planner's model, cluster and framework: every valid layout that fits."""
        return rank(**self._specs, **search)


def knobs() -> list[dict]:
    """The knob table: every layout setting's name (the keyword), type, default, unit, command-line flags, run-file
    column (its name, or an older alias), Megatron-LM log key and JSON path."""
    return json.loads(_headroom.describe())["knobs"]


def load_profile(path: str | os.PathLike) -> dict:
    """A calibration profile (``headroom calibrate --out``), checked exactly as ``--profile`` checks it."""
    return json.loads(_headroom.load_profile(os.fspath(path)))
