"""One of tools/scripts/ imported as a module, for the tests of its functions."""
import importlib.util
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[2]


def script_path(name):
    """tools/scripts/<name>.py."""
    return ROOT / "tools" / "scripts" / f"{name}.py"


def load_script(name):
    """tools/scripts/<name>.py as the module headroom_<name>."""
    spec = importlib.util.spec_from_file_location(f"headroom_{name}", script_path(name))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
