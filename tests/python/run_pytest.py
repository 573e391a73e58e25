"""Runs the Python tests; exits 77 (CTest's skip code here) when pytest is not installed."""
import importlib.util
import pathlib
import sys

if importlib.util.find_spec("pytest") is None:
    print("pytest is not installed: python tests skipped (tools/setup.sh installs it)")
    sys.exit(77)

import pytest  # noqa: E402

sys.exit(pytest.main(["-q", "-p", "no:cacheprovider", str(pathlib.Path(__file__).parent)]))
