"""Transcripts as Harbor's Agent Trajectory Interchange Format (ATIF), for `hoh export atif`.

One role attempt is one trajectory: the prompt is the user step; the agent's messages, thinking and tool calls
are agent steps, each tool's output the observation of the step that called it (ATIF ties a result to a call
of its own step); the CLI's errors and hoh's rejection of a reply are system steps; the attempt's tokens and
cost are the final metrics (the CLIs report usage per run, not per model call, so steps carry none).

Harbor's models (`harbor.models.trajectories`) define the format; hoh's core runs without Harbor (and on
Python 3.11), so the JSON is written here and checked against Harbor's own classes by the tests. The export
is read-only on the workspace and written whole or not at all: into a temporary directory renamed into place.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import UsageError
from ..fsutil import dump_json
from ..store.workspace import is_workspace
from .reader import AttemptRef, EntryKind, Transcript, TranscriptEntry, attempts_of, read_transcript

ATIF_VERSION = "ATIF-v1.6"
JOBS = "harbor-jobs"
"""The export as a Harbor jobs folder, for `harbor view DIR/harbor-jobs`: one job (the workspace), one trial per
attempt with the trial result Harbor's viewer lists (`result.json`) and the trajectory (`agent/trajectory.json`,
a hard link to the flat file)."""
INDEX = "index.json"
"""The export's own index: every trajectory file in the order the attempts ran; it also marks a directory as
an earlier hoh export, which a new export may replace."""
SHELL_TOOLS = {"shell", "bash", "Bash", "run"}
"""Tools whose transcript text is a command line: exported as `{"command": ...}`."""
PATH_TOOLS = {"write", "delete"}
"""The scripted agent's file tools, whose transcript text is the path."""


@dataclass(frozen=True)
class Exported:
    directory: Path
    files: list[str]
    live: int
    """Attempts exported while still running (no result.json)."""


def trajectory(t: Transcript, ref: AttemptRef | None = None) -> dict[str, Any]:
    """One transcript as an ATIF trajectory (a JSON-ready dict)."""
    steps = _Steps()
    for entry in t.entries:
        steps.add(entry)
    steps.flush()
    interrupted = t.interrupted or (ref is not None and ref.interrupted)
    name = _stem(t, ref)
    usage = t.usage
    return {
        "schema_version": ATIF_VERSION,
        "session_id": t.session_id or f"hoh-{name}",
        "trajectory_id": name,
        "agent": {"name": f"hoh/{t.harness}", "version": _hoh_version(), "model_name": t.model,
                  "extra": {"harness": t.harness, "role": t.role, "loop": t.loop, "attempt": t.attempt}},
        "steps": steps.steps,
        "notes": (f"hoh loop {t.loop}, {t.role} attempt {t.attempt} on {t.harness}"
                  + (" (interrupted, set aside on resume)" if interrupted else "")
                  + (" (still running when exported)" if t.live else "")
                  + ". Steps carry no metrics: the CLI reports usage per run; final_metrics has the attempt's."),
        "final_metrics": {"total_prompt_tokens": usage.input_tokens, "total_completion_tokens": usage.output_tokens,
                          "total_cached_tokens": usage.cached_input_tokens, "total_cost_usd": usage.cost_usd,
                          "total_steps": len(steps.steps),
                          "extra": {"reasoning_tokens": usage.reasoning_tokens, "duration_s": t.duration_s}},
        "extra": {"hoh": {"outcome": t.outcome, "ok": t.ok, "errors": t.errors, "live": t.live,
                          "interrupted": interrupted, "final_message": t.final_message}},
    }


class _Steps:
    """Entries folded into ATIF steps, in order."""

    def __init__(self) -> None:
        self.steps: list[dict[str, Any]] = []
        self.current: dict[str, Any] | None = None
        self.calls = 0

    def add(self, entry: TranscriptEntry) -> None:
        kind = entry.kind
        if kind in (EntryKind.PROMPT, EntryKind.ERROR, EntryKind.REASK):
            self.flush()
            source = "user" if kind is EntryKind.PROMPT else "system"
            text = entry.text if kind is not EntryKind.ERROR else f"error: {entry.text}"
            self._append({"source": source, "message": text}, entry)
            return
        step = self.current
        if kind is EntryKind.TOOL_RESULT:
            self._result(entry)
            return
        observed = step is not None and "observation" in step
        if step is None or observed or (kind is EntryKind.MESSAGE and (step["message"] or "tool_calls" in step)) or (
                kind is EntryKind.THINKING and (step["message"] or "tool_calls" in step)):
            self.flush()
            step = self.current = {"source": "agent", "message": ""}
            if entry.at:
                step["timestamp"] = entry.at
        if kind is EntryKind.MESSAGE:
            step["message"] = entry.text
        elif kind is EntryKind.THINKING:
            step["reasoning_content"] = "\n\n".join(filter(None, [step.get("reasoning_content"), entry.text]))
        elif kind is EntryKind.TOOL_CALL:
            self.calls += 1
            call_id = entry.call_id or f"hoh-call-{self.calls}"
            step.setdefault("tool_calls", []).append({"tool_call_id": call_id, "function_name": entry.tool or "tool",
                                                      "arguments": _arguments(entry)})

    def _result(self, entry: TranscriptEntry) -> None:
        result: dict[str, Any] = {"content": entry.text}
        if entry.is_error:
            result["content"] = f"[error] {entry.text}"
        step = self.current
        ids = {call["tool_call_id"] for call in step.get("tool_calls", [])} if step else set()
        if step is not None and entry.call_id in ids:
            result["source_call_id"] = entry.call_id
            step.setdefault("observation", {"results": []})["results"].append(result)
            return
        # A result whose call is not in the step at hand (a cut stream, an agent's odd order): a step of its own.
        self.flush()
        self._append({"source": "system", "message": f"output of {entry.tool or 'a tool'} "
                                                     f"({entry.call_id or 'no call id'})",
                      "observation": {"results": [result]}}, entry)

    def _append(self, step: dict[str, Any], entry: TranscriptEntry) -> None:
        if entry.at:
            step["timestamp"] = entry.at
        self.steps.append({"step_id": len(self.steps) + 1, **step})

    def flush(self) -> None:
        if self.current is not None:
            self.steps.append({"step_id": len(self.steps) + 1, **self.current})
            self.current = None


def _arguments(entry: TranscriptEntry) -> dict[str, Any]:
    """A call's arguments as the object ATIF requires: the JSON object the CLI sent, else the command line
    of a shell tool, else the text as `input`."""
    try:
        value = json.loads(entry.text)
    except (ValueError, RecursionError):
        value = None
    if isinstance(value, dict):
        return value
    key = "command" if entry.tool in SHELL_TOOLS else "path" if entry.tool in PATH_TOOLS else "input"
    return {key: entry.text}


def _stem(t: Transcript, ref: AttemptRef | None) -> str:
    aside = f"-interrupted-{ref.set_aside}" if ref is not None and ref.interrupted else ""
    package = f"-{ref.package}" if ref is not None and ref.package else ""
    return f"loop-{t.loop:04d}-{t.role}{package}{aside}-attempt-{t.attempt}"


def _hoh_version() -> str:
    from .. import __version__
    return __version__


# ---- the export ----------------------------------------------------------------------------------------------
def export_workspace(workspace: Path, out: Path) -> Exported:
    """Every role attempt of `workspace` as one ATIF file in `out`, with `index.json`. Raises UsageError, having
    written nothing, for a path that is not a workspace, an `out` that is a file or a foreign non-empty
    directory, or a workspace with no attempt yet."""
    root = workspace.expanduser().resolve()
    if not is_workspace(root):
        raise UsageError(f"{root} is not a hoh workspace (no state/workspace.json)")
    out = out.expanduser().resolve()
    if out == root or root in out.parents:
        raise UsageError(f"{out} is inside the workspace; hoh export never writes the workspace: choose another -o")
    if out.exists() and not out.is_dir():
        raise UsageError(f"{out} is a file; -o names a directory to write the trajectories into")
    if out.is_dir() and any(out.iterdir()) and not (out / INDEX).is_file():
        raise UsageError(f"{out} is not empty and is not an earlier hoh export (no {INDEX}); choose an empty or new "
                         "directory")
    loops = root / "state" / "loops"
    refs = [ref for loop in sorted(loops.iterdir() if loops.is_dir() else []) if loop.name.isdigit()
            for ref in attempts_of(loop)]
    if not refs:
        raise UsageError(f"nothing to export: {root} has no role attempt yet")
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        files, index, live = [], [], 0
        for ref in refs:
            t = read_transcript(ref.path)
            name = _stem(t, ref) + ".json"
            doc = trajectory(t, ref)
            (staging / name).write_bytes(dump_json(doc).encode("utf-8", errors="replace"))
            _harbor_trial(staging / JOBS / f"hoh-{root.name}", staging / name, t, root, out)
            files.append(name)
            live += t.live
            index.append({"file": name, "loop": t.loop, "role": t.role, "attempt": t.attempt, "harness": t.harness,
                          "outcome": t.outcome, "ok": t.ok, "live": t.live, "interrupted": ref.interrupted,
                          "steps": len(doc["steps"])})
        (staging / INDEX).write_bytes(dump_json({"schema_version": 1, "format": ATIF_VERSION, "workspace": str(root),
                                                 "trajectories": index}).encode("utf-8", errors="replace"))
        _swap_in(staging, out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return Exported(out, files, live)


def _harbor_trial(job: Path, trajectory_file: Path, t: Transcript, root: Path, out: Path) -> None:
    """One attempt as a Harbor trial dir. Only the fields Harbor's `TrialResult` requires, and what its viewer
    lists (agent, model, tokens, cost, times): a hoh attempt has no Harbor task, so the workspace stands in as the
    task's path and the loop as its name, which groups a loop's attempts."""
    trial = job / trajectory_file.stem
    final = out / JOBS / job.name / trial.name  # where the trial will be once the export is renamed into place
    (trial / "agent").mkdir(parents=True)
    try:
        os.link(trajectory_file, trial / "agent" / "trajectory.json")
    except OSError:  # a filesystem without hard links
        shutil.copyfile(trajectory_file, trial / "agent" / "trajectory.json")
    usage = t.usage
    started = t.entries[0].at if t.entries and t.entries[0].kind is EntryKind.PROMPT else None
    result = {
        "task_name": f"loop-{t.loop:04d}", "trial_name": trial.name, "trial_uri": final.as_uri(),
        "task_id": {"path": str(root)}, "task_checksum": "", "config": {"task": {"path": str(root)}},
        "agent_info": {"name": f"hoh/{t.harness}", "version": _hoh_version(),
                       "model_info": {"name": t.model} if t.model else None},
        "agent_result": {"n_input_tokens": usage.input_tokens, "n_cache_tokens": usage.cached_input_tokens,
                         "n_output_tokens": usage.output_tokens, "cost_usd": usage.cost_usd},
        "started_at": started, "finished_at": _finished(t),
    }
    (trial / "result.json").write_bytes(dump_json(result).encode("utf-8", errors="replace"))


def _finished(t: Transcript) -> str | None:
    result = t.path / "result.json" if t.path is not None else None
    if result is None or t.live:
        return None
    from datetime import datetime, timezone
    try:
        return datetime.fromtimestamp(result.lstat().st_mtime, tz=timezone.utc).isoformat()
    except OSError:
        return None


def _swap_in(staging: Path, out: Path) -> None:
    """Put the finished export at `out`; an earlier export there is replaced only once the new one is whole."""
    os.chmod(staging, 0o755)  # mkdtemp makes it 0700; an export is meant to be read
    if not out.exists():
        staging.rename(out)
        return
    old = out.with_name(f".{out.name}.old-{os.getpid()}")
    out.rename(old)
    try:
        staging.rename(out)
    except BaseException:
        old.rename(out)
        raise
    shutil.rmtree(old, ignore_errors=True)
