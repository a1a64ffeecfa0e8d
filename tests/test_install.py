"""hoh as a new user installs it: a fresh venv made from pyproject.toml alone with the README's own install
line, once with today's releases and once with every dependency at its declared floor. Every module
imports, the README's "Try it" block runs command by command (read from README.md, so the test cannot
drift from it), `hoh view` is there, and each usage error is typer's usage message with exit 2, never a
traceback.

The floors are read from pyproject.toml itself (`name>=X` becomes `name==X`), so raising or
lowering one in the declaration is what gets tested.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
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
    ["build", "--no-such-option"], ["nope"], ["show"], ["status", "-w"], ["resume", "-w"],
    ["build", "spec.md", "--loops", "abc"], ["doctor", "--harness"], ["mock-llm", "--port", "abc"],
    ["bench", "run"], ["bench", "run", "--no-such-option", "x"], ["bench", "report"], ["bench", "nope"],
    ["report", "-w"], ["resume", "-w", "x", "--set"],
]
"""`hoh resume`, `report`, `stop` with no -w look for the workspace from the current directory; finding none is
hoh's own one-line error, exit 2 (test_cli.py)."""


def declared_floors() -> list[str]:
    deps = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    floors = []
    for dep in deps:
        match = re.fullmatch(r"([A-Za-z0-9_.-]+)(?:\[[^\]]*\])?\s*>=\s*([\w.]+)\s*(;.*)?", dep)
        assert match, f"dependency {dep!r} must declare a floor as name>=X"
        floors.append(f"{match[1]}=={match[2]}{match[3] or ''}")  # an environment marker is kept
    return floors


def readme_block(heading: str) -> list[str]:
    """The commands of the first ```bash block under a README heading, comments cut off."""
    text = (REPO / "README.md").read_text()
    section = text.split(f"\n## {heading}", 1)[1]
    block = section.split("```bash\n", 1)[1].split("```", 1)[0]
    return [line.split("  #", 1)[0].strip() for line in block.splitlines() if line.strip()]


def install_line() -> list[str]:
    """The README's plain install line (its first), as pip arguments: `pip install .` is `install .`."""
    words = shlex.split(readme_block("Install")[0])
    assert words == ["pip", "install", "."], f"the README's first install line is no plain `pip install .`: {words}"
    return words[1:]


def make_venv(root: Path, constraints: list[str]) -> Path:
    """A venv with the machine's site-packages hidden, holding hoh installed the way users install it: the
    README's install line, run in the checkout."""
    subprocess.run([sys.executable, "-m", "venv", str(root)], check=True)
    pip = [str(root / "bin" / "python"), "-m", "pip", *install_line(), "--quiet", "--disable-pip-version-check"]
    if constraints:
        (root / "constraints.txt").write_text("\n".join(constraints) + "\n")
        pip += ["--constraint", str(root / "constraints.txt")]
    proc = subprocess.run(pip, cwd=REPO, capture_output=True, text=True, timeout=600)
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


def test_the_readme_try_it_block_runs_in_order_and_hoh_view_is_there(fresh_bin, tmp_path):
    """Issue 25's must-show 3: after the plain install, each command of "Try it" exits 0, in the README's order,
    from a directory laid out as the checkout is (its examples/); then `hoh view` is installed too."""
    assert _run(fresh_bin, "--help", cwd=tmp_path).returncode == 0
    shutil.copytree(REPO / "examples", tmp_path / "examples")
    commands = readme_block("Try it")
    assert len(commands) >= 5 and all(c.startswith("hoh ") for c in commands), commands
    for command in commands:
        result = _run(fresh_bin, *shlex.split(command)[1:], cwd=tmp_path)
        assert result.returncode == 0, (command, result.stdout[-2000:], result.stderr[-2000:])
        assert "Traceback" not in result.stderr, (command, result.stderr)
    status = _run(fresh_bin, "status", "-w", "demo-ws", "--json", cwd=tmp_path)
    assert status.returncode == 0 and json.loads(status.stdout)["loops_finished"] == 4  # 3 built, 1 resumed
    if any(c.startswith("hoh report") for c in commands):
        assert (tmp_path / "demo-ws" / "report.html").stat().st_size > 10_000
    view = _run(fresh_bin, "view", "--help", cwd=tmp_path)  # needs the `view` branch merged
    assert view.returncode == 0 and view.stdout.startswith("Usage: hoh view"), (view.stdout, view.stderr)
