"""The user's terminal gets text, never control sequences: what roles wrote (an issue's title, a finding, a file
name, a tool call, a role's error, a check's directory) is printed by `hoh show`, `hoh status`, the live line,
the error and log lines, `hoh replay` and `hoh doctor` with its controls made visible (`hoh/terminal.py`), on a
real terminal (a pty: rich's styled output, the live line) and in a pipe (the plain text).

The hostile text holds OSC 52 (writes the user's clipboard), OSC 0 (sets the window title), CSI 2J (clears the
screen), a bare CR (goes back over the line), a C1 CSI (U+009B) and a bidi override (U+202E); each test checks
that none of those reaches the terminal as it is, and that the text is there, shown as escapes.
"""

from __future__ import annotations

import json
import os
import pty
import re
import select
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from conftest import mini_script

from hoh.terminal import terminal_text

HOSTILE = "T\x1b]52;c;cHduZWQ=\x07\x1b]0;pwned\x07\x1b[2J\rX\x9bY\u202eZ"
"""A title a role writes: OSC 52, OSC 0, CSI 2J, a bare CR, a C1 CSI, a bidi override."""
SHOWN = r"T\x1b]52;c;cHduZWQ=\x07\x1b]0;pwned\x07\x1b[2J\rX\x9bY\u202eZ"
"""How hoh shows it."""
NAME = "n\x1b]0;pwned\x07\x1b[2J\rX.txt"
"""A file name a role writes."""
NAME_SHOWN = r"n\x1b]0;pwned\x07\x1b[2J\rX.txt"
RAW = [b"\x1b]52;", b"\x1b]0;", b"\x1b[2J", b"\x07", "\x9b".encode(), "\u202e".encode()]
"""What must never reach the terminal as it is (a CR is checked apart: a terminal's newline is CR LF)."""
ENTRY = ["-m", "hoh"]
TYPER_APP = ["-c", "from hoh.cli.main import main; main()"]
TIMEOUT = 120


# ---- a terminal ------------------------------------------------------------------------------------------------
class Terminal:
    """A program run on a pty (its stdin, stdout and stderr), 300 columns wide; what it writes, read as it comes."""

    def __init__(self, program: list[str], args: list[str], cwd: Path, extra_env: dict[str, str] | None = None):
        env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "NO_COLOR", "TTY_COMPATIBLE")}
        env.update(TERM="xterm-256color", COLUMNS="300", LINES="50", **(extra_env or {}))
        argv = [sys.executable, *program, *map(str, args)]
        self.pid, self.fd = pty.fork()
        if self.pid == 0:  # the child: the pty is its terminal
            try:
                os.chdir(cwd)
                os.execve(sys.executable, argv, env)
            finally:
                os._exit(127)
        self.out = b""
        self.code: int | None = None

    def _read(self, until: float) -> bool:
        """Read what is there by `until`; False once the program closed the terminal."""
        ready, _, _ = select.select([self.fd], [], [], max(0.0, until - time.monotonic()))
        if not ready:
            return True
        try:
            chunk = os.read(self.fd, 65536)
        except OSError:  # EIO: every end of the pty is closed
            return False
        self.out += chunk
        return bool(chunk)

    def expect(self, text: bytes, timeout: float = TIMEOUT) -> None:
        """Wait until the terminal shows `text` (its styles aside)."""
        deadline = time.monotonic() + timeout
        while text not in unstyled(self.out):
            if time.monotonic() > deadline or not self._read(deadline):
                raise AssertionError(f"the terminal never showed {text!r}; it shows:\n{self.out[-3000:]!r}")

    def finish(self, timeout: float = TIMEOUT) -> tuple[int, bytes]:
        """Everything the program writes until it exits, and its exit code."""
        deadline = time.monotonic() + timeout
        while self._read(deadline):
            if time.monotonic() > deadline:
                os.kill(self.pid, 9)
                raise AssertionError(f"still running after {timeout}s; it shows:\n{self.out[-3000:]!r}")
        os.close(self.fd)
        _, status = os.waitpid(self.pid, 0)
        self.code = os.waitstatus_to_exitcode(status)
        return self.code, self.out


def on_a_terminal(program: list[str], args: list[str], cwd: Path) -> tuple[int, bytes]:
    return Terminal(program, args, cwd).finish()


def in_a_pipe(program: list[str], args: list[str], cwd: Path) -> tuple[int, bytes]:
    proc = subprocess.run([sys.executable, *program, *map(str, args)], cwd=cwd, capture_output=True,
                          timeout=TIMEOUT, stdin=subprocess.DEVNULL, env={**os.environ, "COLUMNS": "300"})
    return proc.returncode, proc.stdout + proc.stderr


def unstyled(out: bytes) -> bytes:
    """The text a terminal shows: rich's colours (SGR sequences) taken out."""
    return re.sub(rb"\x1b\[[0-9;]*m", b"", out)


def assert_text_only(out: bytes, *shown: str) -> None:
    """Nothing of the hostile text reached the terminal as it is; each of `shown` is there to read."""
    for raw in RAW:
        assert raw not in out, (raw, out[-3000:])
    assert re.search(rb"\r(?!\n)", out) is None, out[-3000:]  # a bare CR; the pty sends each newline as CR LF
    text = unstyled(out).decode("utf-8", "replace")
    for words in shown:
        assert words in text, (words, text[-3000:])


# ---- workspaces a hostile role left ----------------------------------------------------------------------------
def write_project(root: Path, script: dict) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "spec.md").write_text("# Greeter\n\nPrint a greeting.\n")
    (root / "script.yaml").write_text(yaml.safe_dump(script, sort_keys=False))
    return root / "spec.md"


def build(spec: Path, loops: int) -> Path:
    ws = spec.parent / "ws"
    proc = in_a_pipe(ENTRY, ["build", spec, "--harness", "scripted", "--loops", loops, "-w", ws, "-q"], spec.parent)
    assert proc[0] == 0, proc[1].decode(errors="replace")
    return ws


@pytest.fixture(scope="module")
def hostile_ws(tmp_path_factory) -> Path:
    """One loop whose QA left an evidence file with a hostile name and a finding titled with the hostile text."""
    script = mini_script(1)
    qa = script["loops"][1]["qa"]
    qa["actions"] = [{"write": {"path": "${evidence_dir}/" + NAME, "content": "named by QA\n"}}]
    qa["reply"] = {"findings": [{"title": HOSTILE, "severity": "major", "repro": "true " + shlex.quote(HOSTILE),
                                 "evidence": [{"kind": "file", "ref": NAME, "detail": "a name"}]}]}
    return build(write_project(tmp_path_factory.mktemp("hostile"), script), 1)


def test_the_visible_form_of_each_hidden_character():
    assert terminal_text(HOSTILE) == SHOWN
    hidden = "a\x00b\x7fc\x85d\u2066e\u200bf\ufeffg\udcffh"  # NUL, DEL, C1, an isolate, zero-width, BOM, not UTF-8
    assert terminal_text(hidden) == r"a\x00b\x7fc\x85d\u2066e\u200bf\ufeffg\udcffh"
    assert terminal_text("one\ntwo\tthree") == r"one\ntwo\tthree"  # a one-line field cannot fake a line
    assert terminal_text("one\r\ntwo\tthree\x1b[2J", lines=True) == "one\ntwo\tthree\\x1b[2J"
    plain = r"C:\temp\new · 名前 · ümlaut · [bold] · ✓"
    assert terminal_text(plain) == plain and terminal_text(plain, lines=True) == plain


def test_show_prints_a_role_s_title_and_file_name_as_text(hostile_ws):
    args = ["show", "I-0001", "-w", hostile_ws]
    ledger = json.loads((hostile_ws / "state" / "ledger.json").read_text())
    assert [i["title"] for i in ledger["issues"]] == [HOSTILE]  # the ledger keeps what QA wrote
    for program in (ENTRY, TYPER_APP):
        for run in (on_a_terminal, in_a_pipe):
            code, out = run(program, args, hostile_ws)
            assert code == 0, out
            assert_text_only(out, f"I-0001 {SHOWN}", f"file:{NAME_SHOWN}")
    code, out = on_a_terminal(ENTRY, [*args, "--json"], hostile_ws)
    assert code == 0
    assert_text_only(out, "pwned")


def test_status_prints_a_role_s_words_as_text(hostile_ws):
    """The fast path (rich's bytes on a terminal, plain text in a pipe) and the typer app alike."""
    reason = f"loop 1 partial: I-0001 opened: {SHOWN}"
    outputs = {}
    for program in (ENTRY, TYPER_APP):
        for run in (on_a_terminal, in_a_pipe):
            code, out = run(program, ["status", "-w", hostile_ws], hostile_ws)
            assert code == 0, out
            assert_text_only(out, reason)
            outputs[program[0], run.__name__] = out
    assert outputs["-m", "in_a_pipe"] == outputs["-c", "in_a_pipe"]
    assert outputs["-m", "on_a_terminal"] == outputs["-c", "on_a_terminal"]
    for program in (ENTRY, TYPER_APP):
        code, out = on_a_terminal(program, ["status", "-w", hostile_ws, "--json"], hostile_ws)
        assert code == 0
        assert_text_only(out, "I-0001 opened: T")


def test_the_live_line_the_log_and_the_errors_print_a_role_s_words_as_text(tmp_path):
    """`hoh -v build` on a terminal: the live line while the Developer's hostile tool call is its last, then QA
    citing a file whose name is hostile in every attempt, so the run fails on it: the error line, the log on
    stderr and in --log-file, and `hoh status`'s stop reason all quote it."""
    script = mini_script(1)
    developer = script["loops"][1]["developer"]
    waits = "while [ ! -e go ]; do sleep 0.05; done; rm go"  # the live line is read while this runs
    developer["actions"] = [{"run": "true " + shlex.quote(HOSTILE)}, {"run": waits}, *developer["actions"]]
    script["loops"][1]["qa"]["reply"] = {"findings": [{
        "title": HOSTILE, "severity": "major", "repro": "true",
        "evidence": [{"kind": "file", "ref": NAME, "detail": "never written"}]}]}
    spec = write_project(tmp_path, script)
    ws, log = tmp_path / "ws", tmp_path / "hoh.log"
    terminal = Terminal(ENTRY, ["-v", "--log-file", log, "build", spec, "--harness", "scripted", "--loops", 1,
                                "-w", ws], tmp_path)
    terminal.expect(b"last: run true 'T ]52;c;cHduZWQ= ]0;pwned [2J X Y Z'")  # the live line, drawn by rich
    (ws / "project" / "go").touch()
    code, out = terminal.finish()
    assert code == 1, out
    assert b"\rX" not in out and b"\x1b[?25l" in out  # the planted CR; rich's own live display, hiding the cursor
    why = f"qa failed in loop 1 after all attempts: file evidence '{NAME_SHOWN}' does not exist"
    assert_text_only(out.replace(b"\r", b""), f"hoh: failed after 0/1 loops: {why}",
                     f"hoh: run failed after 0/1 loops: {why}")
    assert_text_only(log.read_bytes(), f"run failed after 0/1 loops: {why}")
    for program in (ENTRY, TYPER_APP):
        code, out = on_a_terminal(program, ["status", "-w", ws], tmp_path)
        assert code == 0
        assert_text_only(out, f"stop reason: failed: {why}")


def test_replay_prints_a_check_s_directory_name_as_text(tmp_path):
    """QA attaches a check that runs in a directory the Developer named; replayed on the loop before it, the check
    cannot run there, and the reason quotes that name."""
    directory = "d\x1b]0;pwned\x07\x1b[2J\rX"
    script = mini_script(2)
    script["loops"][2]["developer"]["actions"].append({"write": {"path": f"{directory}/kept", "content": "x\n"}})
    script["loops"][2]["qa"]["checks"][0].update(run="echo hello bob", attach={"cwd": directory})
    ws = build(write_project(tmp_path, script), 2)
    checks = json.loads((ws / "state" / "checks.json").read_text())["checks"]
    assert [c["spec"]["cwd"] for c in checks] == [directory]  # admitted as QA wrote it
    reason = r"its cwd 'd\x1b]0;pwned\x07\x1b[2J\rX' is not a directory of the candidate (added in loop 2"
    for run in (on_a_terminal, in_a_pipe):
        code, out = run(ENTRY, ["replay", "-w", ws, "--loop", 1], tmp_path)
        assert code == 1, out
        assert_text_only(out, "C-0001  V-0001  error", reason)
    code, out = on_a_terminal(ENTRY, ["replay", "-w", ws, "--loop", 1, "--json"], tmp_path)
    assert code == 1
    assert_text_only(out, "is not a directory of the candidate")


def test_doctor_prints_a_workspace_s_settings_as_text(tmp_path):
    """Doctor quotes a workspace's hoh.yaml (here the harness's command) in its table and its error line."""
    command = "codex\x1b]0;pwned\x07\x1b[2J\rX"
    (tmp_path / "hoh.yaml").write_text(yaml.safe_dump({"harness": {"name": "codex", "command": command}}))
    code, out = on_a_terminal(ENTRY, ["doctor", "-w", tmp_path, "--harness", "codex"], tmp_path)
    assert code == 1, out
    shown = r"'codex\x1b]0;pwned\x07\x1b[2J\rX' is not installed or does not run"
    assert_text_only(out, shown, f"hoh: codex: {shown}; install it with: ")
    assert unstyled(out).count(shown.encode()) == 2  # the table's cell, then the error line
