"""OpenCode (`opencode run --format json`), at the version its `capabilities` pin. See adapters/opencode.md.

Traps handled here (HARNESSES.md §3): a permission that resolves to "ask" is auto-rejected in
`run` mode and the run exits 0 with no answer, so every permission is set explicitly per role;
OpenCode has no sandbox, so read-only roles get edit/bash denied and hoh's guard backs it up;
success is judged from a `text` event and the absence of an `error` event.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable

from ..fsutil import atomic_write_json
from .attempt import input_target, tool_label
from .base import (QUOTA_PATTERN, Capabilities, CostReport, HarnessAdapter, Outcome, ParsedRun, RoleRequest,
                   Usage, compile_patterns, copy_credentials, json_events)
from .entries import EntryKind, TranscriptEntry, as_text, iso_ms, opt_str

PROVIDER = "hoh"

PERMISSIONS = {
    # Planner: reads only. QA: runs the candidate and writes evidence outside its cwd.
    "read-only": {"edit": "deny", "bash": "deny", "webfetch": "deny", "doom_loop": "deny",
                  "external_directory": "deny"},
    "qa": {"edit": "allow", "bash": "allow", "webfetch": "deny", "doom_loop": "deny", "external_directory": "allow"},
    "write": {"edit": "allow", "bash": "allow", "webfetch": "deny", "doom_loop": "deny",
              "external_directory": "deny"},
}


class OpenCodeAdapter(HarnessAdapter):
    name = "opencode"
    capabilities = Capabilities(
        executable="opencode",
        npm_package="opencode-ai",
        tested_version="1.18.33",
        resume=True,
        cost=CostReport.unless_unpriced_endpoint,
        own_layer={"planner": "permissions: edit and bash denied (no sandbox of its own)",
                   "developer": "permissions: edit and bash allowed (no sandbox of its own)",
                   "qa": "permissions: edit and bash allowed (no sandbox of its own)"},
    )
    # OpenCode gives the HTTP status in `error.data.statusCode` when there was a response at all.
    error_patterns = compile_patterns(
        QUOTA_PATTERN,
        (r"\brate.?limit|\btoo many requests\b", Outcome.rate_limited),
        (r"\bunauthorized\b|\b(invalid|incorrect) api key\b|\bauthentication\b", Outcome.auth_error),
        (r"\bcannot connect to api\b|\bsocket connection was closed\b|\bconnection (reset|refused|closed)\b"
         r"|\bECONN(RESET|REFUSED)\b|\btimed out\b", Outcome.network_error),
    )

    def model_ref(self) -> str | None:
        if self.config.base_url:
            return f"{PROVIDER}/{self.config.model or 'default'}"
        return self.config.model

    def permission_profile(self, request: RoleRequest) -> str:
        if request.access == "write":
            return "write"
        return "qa" if request.writable else "read-only"

    def config_path(self, request: RoleRequest) -> Path:
        return (request.home or Path.home()) / f"opencode-{request.role}.json"

    def opencode_config(self, request: RoleRequest) -> dict[str, Any]:
        config: dict[str, Any] = {"$schema": "https://opencode.ai/config.json", "autoupdate": False,
                                  "share": "disabled", "permission": PERMISSIONS[self.permission_profile(request)]}
        if self.config.base_url:
            model = self.config.model or "default"
            options = {"baseURL": self.base_url(request)}
            if key := self.key_variable(request):
                options["apiKey"] = "{env:" + key + "}"
            entry: dict[str, Any] = {"name": model, "tool_call": True}
            if price := self.config.price:
                entry["cost"] = {"input": price.input, "output": price.output,
                                 "cache_read": price.cache_read if price.cache_read is not None else price.input}
            config["provider"] = {PROVIDER: {"npm": "@ai-sdk/openai-compatible", "name": "hoh endpoint",
                                             "options": options, "models": {model: entry}}}
            config["model"] = config["small_model"] = f"{PROVIDER}/{model}"
        return config

    def build_argv(self, request: RoleRequest) -> list[str]:
        argv = [self.command, "run", "--format", "json", "--dir", str(request.workdir)]
        if model := self.model_ref():
            argv += ["-m", model]
        if request.resume_session:
            argv += ["-s", request.resume_session]
        return argv + self.config.extra_args

    def env(self, request: RoleRequest) -> dict[str, str]:
        env = super().env(request)
        home = Path(env["HOME"])
        env.update(XDG_CONFIG_HOME=str(home / ".config"), XDG_DATA_HOME=str(home / ".local/share"),
                   XDG_CACHE_HOME=str(home / ".cache"), XDG_STATE_HOME=str(home / ".local/state"),
                   OPENCODE_CONFIG=str(self.config_path(request)), OPENCODE_DISABLE_MODELS_FETCH="1")
        self.forward_api_key(env, request)
        return env

    def prepare(self, request: RoleRequest) -> None:
        atomic_write_json(self.config_path(request), self.opencode_config(request))
        for source, copy in self.logins(request):
            copy_credentials(source, copy)

    def logins(self, request: RoleRequest) -> list[tuple[Path, Path]]:
        if self.config.base_url:
            return []
        home = request.home or Path.home()
        return [(Path.home() / ".local/share/opencode/auth.json", home / ".local/share/opencode/auth.json")]

    def parse_events(self, lines: Iterable[str]) -> ParsedRun:
        parsed = ParsedRun()
        for event in json_events(lines):
            kind, part = event.get("type"), event.get("part") or {}
            parsed.session_id = event.get("sessionID") or parsed.session_id
            if kind == "text" and part.get("text"):
                parsed.final_message = part["text"]
            elif kind == "tool_use":
                parsed.tool_calls += 1
                state = part.get("state") if isinstance(part.get("state"), dict) else {}
                parsed.last_tool = tool_label(part.get("tool"), input_target(state.get("input")))
            elif kind == "step_finish":
                tokens = part.get("tokens") or {}
                cache = tokens.get("cache") or {}
                cost = part.get("cost")
                # OpenCode's `input` leaves out cache reads and writes; hoh's input counts them.
                read, write = cache.get("read") or 0, cache.get("write") or 0
                parsed.usage = parsed.usage + (Usage((tokens.get("input") or 0) + read + write, read,
                                                      tokens.get("output") or 0, tokens.get("reasoning") or 0,
                                                      float(cost) if cost is not None else None))
            elif kind == "error":
                error = event.get("error") or {}
                data = error.get("data") or {}
                parsed.error = data.get("message") or error.get("name") or "opencode reported an error"
                parsed.error_outcome = self.outcome_of(parsed.error, data.get("statusCode"))
        return parsed

    @classmethod
    def event_entries(cls, event: dict[str, Any], state: dict[str, Any]) -> list[TranscriptEntry]:
        # OpenCode prints a part once it is finished: a tool_use event holds the call and its output together.
        kind, part, at = event.get("type"), event.get("part") or {}, iso_ms(event.get("timestamp"))
        if kind == "text":
            return [TranscriptEntry(EntryKind.MESSAGE, as_text(part.get("text")), at=at)]
        if kind == "reasoning":
            return [TranscriptEntry(EntryKind.THINKING, as_text(part.get("text")), at=at)]
        if kind == "tool_use":
            tool, call_id, tool_state = opt_str(part.get("tool")), opt_str(part.get("callID")), part.get("state") or {}
            tool_input = tool_state.get("input")
            text = tool_input.get("command") if isinstance(tool_input, dict) and tool == "bash" else None
            status = tool_state.get("status")
            failed = status == "error"
            output = tool_state.get("error") if failed else tool_state.get("output")
            entries = [TranscriptEntry(EntryKind.TOOL_CALL, as_text(text if isinstance(text, str) else tool_input),
                                       tool, call_id, at=at)]
            if status in ("completed", "error"):
                entries.append(TranscriptEntry(EntryKind.TOOL_RESULT, as_text(output), tool, call_id, failed, at))
            return entries
        if kind == "error":
            error = event.get("error") or {}
            data = error.get("data") or {}
            status = data.get("statusCode")
            text = as_text(data.get("message") or error.get("name") or "opencode reported an error")
            return [TranscriptEntry(EntryKind.ERROR, f"HTTP {status}: {text}" if status else text, at=at)]
        return []  # step_start / step_finish: bookkeeping; usage is the transcript's own field
