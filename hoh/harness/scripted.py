"""Adapter for the scripted agent (`hoh.testing.scripted_agent`): hoh's model-free harness."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterable

from ..config import HarnessConfig
from ..errors import UsageError
from .attempt import tool_label
from .base import (QUOTA_PATTERN, Capabilities, FrozenInput, HarnessAdapter, ParsedRun, RoleRequest, Usage,
                   compile_patterns, json_events)
from .entries import EntryKind, TranscriptEntry, as_text, opt_str

SCRIPT_NAME = "script.yaml"
"""The frozen script's name in the workspace, and the default looked for beside the spec."""


class ScriptedAdapter(HarnessAdapter):
    name = "scripted"
    capabilities = Capabilities(needs_model=False)  # no executable: it ships inside hoh
    # The script's `error` events name these, as a real CLI's messages would.
    error_patterns = compile_patterns(QUOTA_PATTERN)

    @classmethod
    def frozen_inputs(cls, config: HarnessConfig, spec_dir: Path) -> list[FrozenInput]:
        """The script: `harness.script`, else script.yaml in `spec_dir`, frozen as the workspace's script.yaml."""
        script = Path(config.script).expanduser() if config.script else spec_dir / SCRIPT_NAME
        if not script.is_file():
            raise UsageError(f"the scripted harness needs a script: {script} not found; "
                             f"pass --set harness.script=PATH or put {SCRIPT_NAME} beside the spec")
        return [FrozenInput("harness.script", script.resolve(), SCRIPT_NAME)]

    def script_path(self, request: RoleRequest) -> Path:
        script = Path(self.config.script or SCRIPT_NAME)
        return script if script.is_absolute() else Path(request.context["workspace"]) / script

    def jail_paths(self, request: RoleRequest) -> list[Path]:
        return [self.script_path(request)]

    def build_argv(self, request: RoleRequest) -> list[str]:
        return [request.site.python, "-m", "hoh.testing.scripted_agent", "--script", str(self.script_path(request)),
                "--role", request.role, "--loop", str(request.loop), "--attempt", str(request.attempt),
                *self.config.extra_args]

    def env(self, request: RoleRequest) -> dict[str, str]:
        env = super().env(request)
        env["HOH_SCRIPT_CONTEXT"] = json.dumps({k: str(v) for k, v in request.context.items()})
        self.forward_api_key(env, request)  # as a real CLI is given it: the attempt's token behind hoh's egress
        if base_url := self.base_url(request):
            env["HOH_MODEL_URL"] = base_url  # where a real CLI is told its model is (a script's commands use it)
        env["PYTHONPATH"] = request.site.hoh_path  # the agent is a module of hoh's
        return env

    def parse_events(self, lines: Iterable[str]) -> ParsedRun:
        parsed = ParsedRun()
        for event in json_events(lines):
            kind = event.get("type")
            if kind == "session":
                parsed.session_id = event.get("id")
            elif kind == "tool":
                parsed.tool_calls += 1
                parsed.last_tool = tool_label(event.get("name"), event.get("path") or event.get("command") or "")
            elif kind == "message":
                parsed.final_message = event.get("text")
            elif kind == "usage":
                cost = event.get("cost_usd")
                parsed.usage = parsed.usage + (Usage(int(event.get("input_tokens", 0)),
                                                      int(event.get("cached_input_tokens", 0)),
                                                      int(event.get("output_tokens", 0)), 0,
                                                      float(cost) if cost is not None else None))
            elif kind == "error":
                parsed.error = str(event.get("message") or "the scripted agent reported an error")
                parsed.error_outcome = self.outcome_of(parsed.error)
        return parsed

    @classmethod
    def event_entries(cls, event: dict[str, Any], state: dict[str, Any]) -> list[TranscriptEntry]:
        kind = event.get("type")
        if kind == "message":
            return [TranscriptEntry(EntryKind.MESSAGE, as_text(event.get("text")))]
        if kind == "error":
            return [TranscriptEntry(EntryKind.ERROR, as_text(event.get("message"))
                                    or "the scripted agent reported an error")]
        if kind != "tool":
            return []  # session, usage, done: bookkeeping
        # The scripted agent's tools finish before they are printed: one event is the call and its result.
        state["calls"] = state.get("calls", 0) + 1
        tool, call_id = opt_str(event.get("name")) or "tool", f"scripted-{state['calls']}"
        target = event.get("command") if event.get("command") is not None else event.get("path")
        if event.get("id") is not None:  # a check: its id, then what it runs
            target = f"check {as_text(event.get('id'))}: {as_text(target)}"
        code = event.get("exit_code")
        failed = event.get("ok") is False or (isinstance(code, int) and not isinstance(code, bool) and code != 0)
        result = f"exit code {code}" if code is not None else ("failed" if failed else "ok")
        return [TranscriptEntry(EntryKind.TOOL_CALL, as_text(target), tool, call_id),
                TranscriptEntry(EntryKind.TOOL_RESULT, result, tool, call_id, failed)]
