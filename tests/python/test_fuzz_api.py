"""The Python API fuzzed with a fixed seed: every layout keyword of Planner.estimate, Planner.mtsl and
estimate_many's columns gets values of every Python type (huge and negative integers, floats with and without a
fraction, NaN, infinities, booleans, strings, bytes, lists, dicts, None, NumPy scalars and arrays). Each call either
returns, or raises ValueError or TypeError naming the keyword; never another exception, a crash, or a silent cast of
a float or bool to an integer."""
import math
import random

import headroom
import numpy as np
import pytest

BASE = dict(seq=8192, tp=2, gpus=8, gbs=64)

VALUES = [
    0, 1, 2, 3, 7, 8, -1, -(2**63), 2**31, 2**62, 2**63, 2**70, 10**12, 10**12 + 1,
    0.0, 1.5, 2.0, -2.0, 1e300, -1e300, math.nan, math.inf, -math.inf,
    True, False, None, "", "2", "2.0", "none", "full", "zero3", "bf16", "\x00", "é" * 100,
    b"2", [], [2], [2, 4], ["q", "v"], {}, {"tp": 2}, (1,), object(),
    np.int64(2), np.int32(4), np.uint64(2**63), np.float64(2.0), np.float32(math.nan), np.bool_(True),
    np.array(2), np.array([2, 4]),
]


@pytest.fixture(scope="module")
def planner():
    return headroom.Planner(model="llama3.1-8b", gpu="h100-94gb")


# The knob table, read once: headroom.knobs() describes the whole spec library on each call.
KNOBS = {k["name"]: k for k in headroom.knobs()}


def knob_names():
    return list(KNOBS)


def named(error, keyword):
    """A refusal names what it refuses: the keyword or its value."""
    return keyword in str(error) or "keyword" in str(error)


def well_typed(name, value):
    """The value is of the knob's type: an integer (Python's, NumPy's, a 0-d integer array, not a bool) for a count,
    a bool for a flag, a real number for a number, a string for a name."""
    kind = KNOBS[name]["type"]
    if isinstance(value, (bool, np.bool_)):
        return kind == "flag"
    if kind in ("count", "whole"):
        return isinstance(value, (int, np.integer)) or (
            isinstance(value, np.ndarray) and value.ndim == 0 and value.dtype.kind in "iu")
    if kind == "flag":
        return False
    if kind == "number":
        return isinstance(value, (int, float, np.integer, np.floating)) or (
            isinstance(value, np.ndarray) and value.ndim == 0)
    if kind == "list":
        return isinstance(value, str) or (isinstance(value, (list, tuple)) and all(isinstance(x, str) for x in value))
    return isinstance(value, str)


@pytest.mark.parametrize("method", ["estimate", "mtsl"])
def test_every_keyword_with_every_type(planner, method):
    rng = random.Random(20261126)
    for name in knob_names():
        for value in VALUES:
            layout = dict(BASE)
            if method == "mtsl":
                layout.pop("seq")
                if name == "seq":
                    continue
            layout[name] = value
            try:
                result = getattr(planner, method)(**layout)
            except (ValueError, TypeError) as e:
                # One line; a value of the wrong type is refused naming its keyword (a rule joining two sizes, "t·c·p
                # does not divide gpus", names them by their symbols).
                assert str(e) and "\n" not in str(e), (name, repr(value), str(e))
                if not well_typed(name, value):
                    assert named(e, name), (name, repr(value), str(e))
                continue
            # Accepted: a float, a bool or a string was not taken for an integer knob, nor a non-bool for a flag.
            assert value is None or well_typed(name, value), (name, repr(value))
            assert result is not None
        # A few random combinations of two keywords.
        for _ in range(3):
            other = rng.choice(knob_names())
            layout = dict(BASE)
            layout[name], layout[other] = rng.choice(VALUES), rng.choice(VALUES)
            if method == "mtsl":
                layout.pop("seq", None)
            try:
                getattr(planner, method)(**layout)
            except (ValueError, TypeError):
                pass


def test_estimate_many_columns_of_every_type(planner):
    for name in ("tp", "pp", "gpus", "gbs", "seq", "mbs", "cp"):
        for column in ([1.9, 2.0], [2, None], [2, "2"], [2, True], [2, math.nan], np.array([2.0, 4.0]),
                       np.array([2, -1]), np.array([2, 2**62]), [2**70, 2], np.array([[2, 4]]), [], "24"):
            columns = dict(BASE, **{name: column})
            try:
                out = planner.estimate_many(columns)
            except (ValueError, TypeError) as e:
                assert name in str(e) or "row" in str(e) or "column" in str(e), (name, repr(column), str(e))
                continue
            assert len(out["perf.step_time_s"]) >= 1
        rows = planner.estimate_many(dict(BASE, **{name: np.array([1, 2, 3, 2**40])}), on_error="nan")
        assert list(rows["memory.verdict"]).count("invalid") >= 1 or name in ("gbs", "gpus", "seq")
