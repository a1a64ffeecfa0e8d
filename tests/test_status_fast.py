"""The fast `hoh status` (`hoh/cli/entry.py`, `plaintext.py`): the same bytes, errors and exit codes as the typer
app and rich, over real workspaces, widths, environments and command lines; and it loads neither typer nor rich."""

from __future__ import annotations

import copy
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO
from long_run import make_long_workspace
from rich.console import Console

from hoh import api
from hoh.cli import plaintext
from hoh.cli.entry import StatusCall, parse_status
from hoh.cli.status import SHOWN_LOOPS, render_status, status_layout
from hoh.paths import WorkspacePaths
from hoh.store import fold

WIDTHS = (12, 30, 45, 60, 79, 80, 81, 100, 120, 200)


@pytest.fixture(scope="module")
def long_ws(tmp_path_factory) -> Path:
    ws = make_long_workspace(tmp_path_factory.mktemp("fast") / "ws", loops=28)
    assert fold.save(WorkspacePaths(ws))
    return ws


def _odd_lines(data: dict) -> None:
    data.update(sandbox="off", paused_until="2026-01-02 03:04",
                stop_reason={"status": "stopped", "message": "stopped by hoh stop (pid 7) [bold]x[/bold]"},
                budget={"tokens": {"limit": 100, "spent": 150, "overrun": 50.0},
                        "cost_usd": {"limit": 1.0, "spent": 0.05, "overrun": 0}},
                patience={"limit": 3, "loops_without_progress": 2}, eta={"seconds": 4000, "at": "2026-01-02 05:00"},
                notes=[{"id": "N-0001", "loop": 2, "text": "fix I-0002 first, then the rest " * 3},
                       {"id": None, "loop": None, "text": "a [note] in brackets"},
                       {"id": "N-0003", "loop": None, "text": None}])


def _odd_loops(data: dict) -> None:
    for n, loop in enumerate(data["loops"]):
        loop["violations"] = {"developer": n % 2, "between roles": 1 if n % 3 == 0 else 0}
        loop["checks"] = {"replayed": n, "failed": n % 2, "flaky": 0, "added": 2, "retired": n % 3, "skipped": 1}
        loop["reason"] = ["regressed I-0001 [red] and V-0002", None,
                          "a reason long enough to wrap at eighty columns and then some more words to fold " * 2,
                          "criterion C2 failed:   spaced    out   "][n % 4]


def _unusual(text: str):
    def change(data: dict) -> None:
        data["roles"]["qa"]["model"] = text
        data["loops"][-1]["candidate_id"] = f"loop-0001-{text}"
        data["workspace"] = f"/tmp/{text}"
        data["loops"][-1]["reason"] = text
    return change


CHANGES = {"as it is": lambda data: None, "odd lines": _odd_lines, "odd loops": _odd_loops,
           **{f"unusual {text!r}": _unusual(text) for text in (
               "[yellow]", "a\\b", ":thumbs_up:", ":clock:", ":100:", "名前", "ümlaut", "tab\there", "new\nline",
               "  spaced  out  ", "x" * 150, "·…–—→")}}
"""Every kind of line the text can have: agents' words in unusual characters, rich markup, emoji codes, long
and unbreakable words, a guard, no sandbox; each alone, so the plain text is compared wherever it can print."""


def variants(data: dict) -> dict[str, dict]:
    out = {}
    for name, change in CHANGES.items():
        out[name] = copy.deepcopy(data)
        change(out[name])
    return out


def rich_text(data: dict, show_all: bool, width: int) -> str:
    buffer = io.StringIO()
    render_status(Console(file=buffer, width=width, _environ={}), data, show_all)
    return buffer.getvalue()


def test_the_plain_text_is_the_text_rich_prints(demo_ws, long_ws):
    printed: dict[str, set[int]] = {name: set() for name in CHANGES}
    for ws in (demo_ws, long_ws):
        for name, data in variants(api.status(ws)).items():
            for show_all in (False, True):
                blocks = status_layout(data, show_all)
                for width in WIDTHS:
                    plain = plaintext.render(blocks, width)
                    if plain is not None:
                        assert plain == rich_text(data, show_all, width), (ws, name, width, show_all)
                        printed[name].add(width)
    # what only rich can print is left to it; everything else is printed plain at the usual widths
    assert {name for name, widths in printed.items() if 120 in widths} == {
        "as it is", "odd lines", "odd loops", "unusual '  spaced  out  '", "unusual '·…–—→'",
        "unusual ':clock:'"}
    assert all(12 not in widths for widths in printed.values())
    assert printed["odd lines"] >= {80, 100, 120, 200} and printed["as it is"] >= {80, 200}
    assert printed["odd loops"] >= {100, 120, 200} and 80 not in printed["odd loops"]  # its checks column is wide


def test_the_text_of_the_shown_loops_alone_is_the_text_of_all(demo_ws, long_ws):
    for ws in (demo_ws, long_ws):
        shown = api.status(ws, SHOWN_LOOPS)
        full = api.status(ws)
        assert {k: v for k, v in shown.items() if k != "earlier_loops"} == \
            {**full, "loops": full["loops"][-SHOWN_LOOPS:]}
        for name, data in variants(full).items():
            trimmed = {**data, "loops": data["loops"][-SHOWN_LOOPS:], "earlier_loops": shown["earlier_loops"]}
            if name != "odd loops":  # its loops are not the workspace's, which `earlier_loops` is of
                assert status_layout(trimmed, False) == status_layout(data, False), name
    assert api.status(long_ws, SHOWN_LOOPS)["earlier_loops"].count == 28 - SHOWN_LOOPS


@pytest.mark.parametrize("environ", [{}, {"COLUMNS": "132"}, {"COLUMNS": "0"}, {"COLUMNS": "wide"},
                                     {"FORCE_COLOR": "1"}, {"FORCE_COLOR": ""}, {"TTY_COMPATIBLE": "1"},
                                     {"TTY_COMPATIBLE": "0", "FORCE_COLOR": "1"}, {"NO_COLOR": "1"}])
def test_width_and_styles_are_decided_as_rich_decides(environ):
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    for stream in (io.StringIO(), Terminal()):
        console = Console(file=stream, _environ=environ)
        assert plaintext.styled(stream, environ) is console.is_terminal, (environ, stream)
        if not console.is_terminal:
            assert plaintext.width(environ) == console.width, environ


def test_the_plain_command_lines_and_the_others():
    ws = Path("ws")
    assert parse_status(["status"]) == StatusCall(None)
    assert parse_status(["-q", "status", "-w", "ws", "--json"]) == StatusCall(ws, as_json=True, quiet=True)
    assert parse_status(["--quiet", "status", "--all", "--workspace=ws"]) == StatusCall(ws, show_all=True, quiet=True)
    assert parse_status(["status", "--workspace", "ws", "--all", "--json"]) == StatusCall(ws, True, True)
    for typer_s in (["--help"], [], ["status", "-h"], ["status", "--verify"], ["-v", "status"], ["status", "-w"],
                    ["status", "-w", "--json"], ["status", "-w", ""], ["status", "--json", "--json"],
                    ["status", "-w", "a", "-w", "b"], ["status", "-wws"], ["status", "--", "x"], ["status", "x"],
                    ["--log-file", "l", "status"], ["-q", "-q", "status"], ["show", "I-0001"], ["status", "--bogus"]):
        assert parse_status(typer_s) is None, typer_s


def hoh(args: list[str], cwd: Path, env: dict[str, str], typer_app: bool) -> tuple[int, str, str]:
    """`python -m hoh ARGS` (the entry), or the same through the typer app alone."""
    program = ["-c", "from hoh.cli.main import main; main()"] if typer_app else ["-m", "hoh"]
    proc = subprocess.run([sys.executable, *program, *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=120, stdin=subprocess.DEVNULL)
    return proc.returncode, proc.stdout, proc.stderr


def test_the_fast_path_prints_what_the_typer_app_prints(demo_ws, long_ws, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    base = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "FORCE_COLOR", "TTY_COMPATIBLE", "NO_COLOR")}
    cases = [(["status", "-w", str(long_ws)], REPO, {}), (["status", "-w", str(long_ws), "--all"], REPO, {}),
             (["-q", "status", "--workspace", str(demo_ws), "--json"], REPO, {}),
             (["--quiet", "status", f"--workspace={demo_ws}"], REPO, {"COLUMNS": "200"}),
             (["status"], demo_ws / "project", {}), (["status", "--json"], demo_ws, {}),
             (["status", "-w", str(long_ws)], REPO, {"COLUMNS": "30"}),  # too narrow: rich folds
             (["status", "-w", str(long_ws)], REPO, {"FORCE_COLOR": "1"}),  # rich's styles
             (["status", "-w", str(demo_ws)], REPO, {"TTY_COMPATIBLE": "1", "NO_COLOR": "1"}),
             (["status", "-w", str(demo_ws)], REPO, {"PYTHONIOENCODING": "ascii"}),  # stdout cannot print it
             (["status"], elsewhere, {}), (["status", "-w", "/nonexistent"], REPO, {}),
             (["status", "-w", str(tmp_path)], REPO, {}), (["status", "--bogus"], REPO, {}),
             (["status", "-w"], REPO, {}), (["-q", "status", "-w", str(demo_ws), "--all", "--json"], REPO, {})]
    for args, cwd, extra in cases:
        env = {**base, **extra}
        fast, typer_app = hoh(args, cwd, env, typer_app=False), hoh(args, cwd, env, typer_app=True)
        assert fast == typer_app, (args, cwd, extra)
    assert hoh(["status", "-w", str(demo_ws)], REPO, base, typer_app=False)[0] == 0
    assert hoh(["status", "-w", "/nonexistent"], REPO, base, typer_app=False)[0] == 2


def test_the_fast_path_loads_neither_typer_nor_rich(long_ws):
    heavy = ["typer", "click", "rich", "pydantic", "yaml", "jinja2"]
    for extra in ([], ["--json"], ["--all"]):
        argv = ["hoh", "status", "-w", str(long_ws), *extra]
        code = ("import atexit, json, runpy, sys\n"
                f"atexit.register(lambda: print(json.dumps(sorted({{m.split('.')[0] for m in sys.modules}} & "
                f"set({heavy!r}))), file=sys.stderr))\n"
                f"sys.argv = {argv!r}\n"
                "runpy.run_module('hoh', run_name='__main__', alter_sys=True)\n")
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                              stdin=subprocess.DEVNULL)
        assert proc.returncode == 0 and proc.stdout.startswith("{" if extra == ["--json"] else str(long_ws))
        assert json.loads(proc.stderr.strip().splitlines()[-1]) == [], (extra, proc.stderr)


def on_a_terminal(program: list[str], args: list[str]) -> bytes:
    """What `python PROGRAM ARGS` writes to a real terminal (a pty): rich's styles, its highlighted JSON."""
    import pty
    pid, fd = pty.fork()
    if pid == 0:  # the child: the pty is its stdin, stdout and stderr
        os.environ["COLUMNS"] = "100"
        for name in ("FORCE_COLOR", "TTY_COMPATIBLE", "NO_COLOR"):
            os.environ.pop(name, None)
        os.execv(sys.executable, [sys.executable, *program, *args])
    out = b""
    while True:
        try:
            chunk = os.read(fd, 65536)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
    os.waitpid(pid, 0)
    return out


def test_on_a_terminal_the_fast_path_prints_rich_s_bytes_without_typer(demo_ws, tmp_path):
    typer_app = ["-c", "from hoh.cli.main import main; main()"]
    for extra in ([], ["--json"], ["--all"]):
        args = ["status", "-w", str(demo_ws), *extra]
        fast = on_a_terminal(["-m", "hoh"], args)
        assert fast == on_a_terminal(typer_app, args), extra
        assert b"\x1b[" in fast  # styled: a terminal's
    loaded = tmp_path / "loaded"
    code = ("import atexit, runpy, sys\n"
            f"atexit.register(lambda: open({str(loaded)!r}, 'w').write(' '.join(sorted({{m.split('.')[0] for m in "
            "sys.modules} & {'typer', 'click', 'pydantic'}))))\n"
            f"sys.argv = ['hoh', 'status', '-w', {str(demo_ws)!r}]\n"
            "runpy.run_module('hoh', run_name='__main__', alter_sys=True)\n")
    assert on_a_terminal(["-c", code], []).startswith(str(demo_ws).encode())
    assert loaded.read_text() == ""  # rich, but neither typer nor pydantic
