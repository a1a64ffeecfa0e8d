"""hoh as a new user installs it: a fresh venv made from pyproject.toml alone, once with today's
releases and once with every dependency at its declared floor. Every module imports, the demo
runs, and each usage error is typer's usage message with exit 2, never a traceback.

The floors are read from pyproject.toml itself (`name>=X` becomes `name==X`), so raising or
lowering one in the declaration is what gets tested.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from conftest import DEMO, REPO

IMPORT_ALL = """
import importlib, pkgutil, hoh
# hoh.harbor is the Harbor extra (Python >= 3.12): without it, importing it says what to install.
names = [m.name for m in pkgutil.walk_packages(hoh.__path__, "hoh.", onerror=lambda name: None)
         if not m.name.endswith("__main__") and not m.name.startswith("hoh.harbor")]
for name in names:
    importlib.import_module(name)
try:
    import hoh.harbor
except ImportError as err:
    assert str(err) == "hoh.harbor needs Harbor: pip install 'hoh[harbor]' (Python >= 3.12)", err
else:
    raise AssertionError("hoh.harbor imported without Harbor")
print(len(names))
"""

USAGE_ERRORS = [
    ["build", "--no-such-option"], ["nope"], ["show"], ["status", "-w"], ["resume"], ["resume", "-w"],
    ["build", "spec.md", "--loops", "abc"], ["doctor", "--harness"], ["mock-llm", "--port", "abc"],
    ["bench", "run"], ["bench", "run", "--no-such-option", "x"], ["bench", "report"], ["bench", "nope"],
    ["report"], ["report", "-w"], ["stop"], ["resume", "-w", "x", "--set"],
]


def declared_floors() -> list[str]:
    deps = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    floors = []
    for dep in deps:
        match = re.fullmatch(r"([A-Za-z0-9_.-]+)(?:\[[^\]]*\])?\s*>=\s*([\w.]+)\s*(;.*)?", dep)
        assert match, f"dependency {dep!r} must declare a floor as name>=X"
        floors.append(f"{match[1]}=={match[2]}{match[3] or ''}")  # an environment marker is kept
    return floors


def make_venv(root: Path, constraints: list[str]) -> Path:
    """A venv with the machine's site-packages hidden, holding hoh installed the way users install it."""
    subprocess.run([sys.executable, "-m", "venv", str(root)], check=True)
    pip = [str(root / "bin" / "python"), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    if constraints:
        (root / "constraints.txt").write_text("\n".join(constraints) + "\n")
        pip += ["--constraint", str(root / "constraints.txt")]
    proc = subprocess.run([*pip, str(REPO)], capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        if os.environ.get("HOH_CI") or "No matching distribution" in proc.stderr:
            pytest.fail(f"pip install failed:\n{proc.stderr[-3000:]}")
        pytest.skip(f"no package index reachable here: {proc.stderr.strip().splitlines()[-1:]}")
    return root / "bin"


@pytest.fixture(scope="module", params=["latest", "floors"])
def fresh_bin(request, tmp_path_factory) -> Path:
    constraints = declared_floors() if request.param == "floors" else []
    return make_venv(tmp_path_factory.mktemp(f"venv-{request.param}") / "v", constraints)


def _run(bin_dir: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(cwd), "COLUMNS": "100", "LANG": "C.UTF-8"}
    return subprocess.run([str(bin_dir / "hoh"), *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=120, stdin=subprocess.DEVNULL)


def test_every_module_imports_with_the_declared_dependencies_alone(fresh_bin, tmp_path):
    proc = subprocess.run([str(fresh_bin / "python"), "-I", "-c", IMPORT_ALL], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert int(proc.stdout) > 30


@pytest.mark.parametrize("args", USAGE_ERRORS, ids=" ".join)
def test_usage_errors_are_a_usage_message_and_exit_2(fresh_bin, tmp_path, args):
    result = _run(fresh_bin, *args, cwd=tmp_path)
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr + result.stdout
    assert "Usage: hoh" in result.stderr


def test_help_and_the_demo_run(fresh_bin, tmp_path):
    assert _run(fresh_bin, "--help", cwd=tmp_path).returncode == 0
    result = _run(fresh_bin, "build", str(DEMO / "spec.md"), "--harness", "scripted", "--loops", "1", "-w", "ws", "-q",
                  cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    status = _run(fresh_bin, "status", "-w", "ws", cwd=tmp_path)
    assert status.returncode == 0 and "loop-0001-" in status.stdout
