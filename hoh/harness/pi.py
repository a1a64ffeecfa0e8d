"""Pi (`pi -p --mode json`), at the version its `capabilities` pin. See adapters/pi.md.

Traps handled here (HARNESSES.md §4): in json mode Pi exits 0 even when the model call failed —
the only sign is the last assistant message's `stopReason: "error"`; Pi has no cwd flag (the
process cwd is the workdir) and no sandbox, so read-only roles get only read tools.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Iterable

from ..fsutil import atomic_write_json
from .attempt import input_target, tool_label
from .base import (QUOTA_PATTERN, Capabilities, CostReport, HarnessAdapter, Outcome, ParsedRun, RoleRequest, Usage,
                   compile_patterns, copy_credentials, json_events)
from .entries import EntryKind, TranscriptEntry, as_text, iso_ms, opt_str, text_of_blocks
from .sandbox import PLACEHOLDER_KEY

PROVIDER = "hoh"
TOOLS = {"read-only": "read,grep,find,ls", "qa": "read,bash,edit,write,grep,find,ls", "write": "read,bash,edit,write"}


class PiAdapter(HarnessAdapter):
    name = "pi"
    capabilities = Capabilities(
        executable="pi",
        npm_package="@mariozechner/pi-coding-agent",
        tested_version="0.73.1",
        resume=True,
        cost=CostReport.unless_unpriced_endpoint,
        own_layer={"planner": "tools: read, grep, find, ls (no sandbox of its own)",
                   "developer": "none (Pi has no sandbox)", "qa": "none (Pi has no sandbox)"},
    )
    # Pi's errorMessage starts with the HTTP status when there was a response ("429 …"); see `status_of`.
    error_patterns = compile_patterns(
        QUOTA_PATTERN,
        (r"\brate.?limit|\btoo many requests\b", Outcome.rate_limited),
        (r"\bunauthorized\b|\b(invalid|incorrect|no) api key\b|\bauthentication\b", Outcome.auth_error),
        (r"\bconnection error\b|^terminated$|\bfetch failed\b|\bECONN(RESET|REFUSED)\b|\btimed out\b",
         Outcome.network_error),
    )

    def agent_dir(self, request: RoleRequest) -> Path:
        return (request.home or Path.home()) / ".pi" / "agent"

    def tools(self, request: RoleRequest) -> str:
        if request.access == "write":
            return TOOLS["write"]
        return TOOLS["qa"] if request.writable else TOOLS["read-only"]

    def build_argv(self, request: RoleRequest) -> list[str]:
        argv = [self.command, "-p", "--mode", "json", "--tools", self.tools(request)]
        if self.config.base_url:
            argv += ["--provider", PROVIDER, "--model", self.config.model or "default"]
        elif self.config.model:
            argv += ["--model", self.config.model]
        if request.resume_session:
            argv += ["--session", request.resume_session]
        return argv + self.config.extra_args

    def env(self, request: RoleRequest) -> dict[str, str]:
        env = super().env(request)
        env["PI_CODING_AGENT_DIR"] = str(self.agent_dir(request))
        self.forward_api_key(env, request)
        return env

    def prepare(self, request: RoleRequest) -> None:
        agent = self.agent_dir(request)
        agent.mkdir(parents=True, exist_ok=True)
        if self.config.base_url:
            model = self.config.model or "default"
            entry = {"id": model, "name": model, "contextWindow": 128000, "maxTokens": 16384}
            if price := self.config.price:
                entry["cost"] = {"input": price.input, "output": price.output, "cacheWrite": 0,
                                 "cacheRead": price.cache_read if price.cache_read is not None else price.input}
            provider = {"baseUrl": self.base_url(request), "api": "openai-completions",
                        "compat": {"supportsDeveloperRole": False, "supportsReasoningEffort": False},
                        "models": [entry]}
            # Pi reads an env var *name* here (never the value), else takes it as the key itself. It refuses a
            # provider without one ("Unknown provider"), so a key-less endpoint with no proxy of hoh's in front
            # gets the placeholder literally.
            provider["apiKey"] = self.key_variable(request) or PLACEHOLDER_KEY
            atomic_write_json(agent / "models.json", {"providers": {PROVIDER: provider}})
        # hoh retries transient failures itself; Pi's own retries stay short so the journal sees them.
        atomic_write_json(agent / "settings.json",
                          {"retry": {"enabled": True, "maxRetries": 1, "baseDelayMs": 500, "provider": {"maxRetries": 1}}})
        for source, copy in self.logins(request):
            copy_credentials(source, copy)

    def logins(self, request: RoleRequest) -> list[tuple[Path, Path]]:
        if self.config.base_url:
            return []
        return [(Path.home() / ".pi" / "agent" / "auth.json", self.agent_dir(request) / "auth.json")]

    def parse_events(self, lines: Iterable[str]) -> ParsedRun:
        parsed = ParsedRun()
        last_assistant: dict | None = None
        for event in json_events(lines):
            kind = event.get("type")
            if kind == "session":
                parsed.session_id = event.get("id")
            elif kind == "tool_execution_start":
                parsed.last_tool = tool_label(event.get("toolName"), input_target(event.get("args")))
            elif kind == "tool_execution_end":
                parsed.tool_calls += 1
            elif kind == "message_end" and (event.get("message") or {}).get("role") == "assistant":
                message = event["message"]
                last_assistant = message
                u = message.get("usage") or {}
                cost = (u.get("cost") or {}).get("total")
                # Pi's `input` leaves out cache reads and writes; hoh's input counts them.
                read, write = u.get("cacheRead") or 0, u.get("cacheWrite") or 0
                parsed.usage = parsed.usage + (Usage((u.get("input") or 0) + read + write, read, u.get("output") or 0,
                                                      0, float(cost) if cost is not None else None))
        if last_assistant is not None:
            if last_assistant.get("stopReason") == "error":
                parsed.error = last_assistant.get("errorMessage") or "pi reported a model error"
                parsed.error_outcome = self.outcome_of(parsed.error, status_of(parsed.error))
            else:
                text = "".join(c.get("text", "") for c in last_assistant.get("content", []) if c.get("type") == "text")
                parsed.final_message = text or None
        return parsed

    @classmethod
    def event_entries(cls, event: dict[str, Any], state: dict[str, Any]) -> list[TranscriptEntry]:
        # Pi streams every delta (message_update); a finished message (message_end) and a finished tool
        # (tool_execution_end) hold the whole of them, so only those are read.
        kind = event.get("type")
        if kind == "tool_execution_end":
            result = event.get("result")
            content = result.get("content") if isinstance(result, dict) else result
            return [TranscriptEntry(EntryKind.TOOL_RESULT, text_of_blocks(content), opt_str(event.get("toolName")),
                                    opt_str(event.get("toolCallId")), event.get("isError") is True)]
        if kind == "auto_retry_start":
            return [TranscriptEntry(EntryKind.ERROR, f"retrying (attempt {as_text(event.get('attempt'))} of "
                                                     f"{as_text(event.get('maxAttempts'))}): "
                                                     f"{as_text(event.get('errorMessage'))}")]
        message = event.get("message") or {}
        if kind != "message_end" or message.get("role") != "assistant":
            return []  # the prompt (hoh's own PROMPT entry), toolResult copies, deltas, bookkeeping
        at = iso_ms(message.get("timestamp"))
        entries = []
        for block in message.get("content") if isinstance(message.get("content"), list) else []:
            if not isinstance(block, dict):
                continue
            if block.get("type") == "text":
                entries.append(TranscriptEntry(EntryKind.MESSAGE, as_text(block.get("text")), at=at))
            elif block.get("type") == "thinking":
                entries.append(TranscriptEntry(EntryKind.THINKING, as_text(block.get("thinking")), at=at))
            elif block.get("type") == "toolCall":
                args = block.get("arguments")
                command = args.get("command") if isinstance(args, dict) and block.get("name") == "bash" else None
                entries.append(TranscriptEntry(EntryKind.TOOL_CALL, as_text(command if isinstance(command, str)
                                                                            else args),
                                               opt_str(block.get("name")), opt_str(block.get("id")), at=at))
        if message.get("stopReason") == "error":
            entries.append(TranscriptEntry(EntryKind.ERROR, as_text(message.get("errorMessage"))
                                           or "pi reported a model error", at=at))
        return entries


def status_of(message: str) -> int | None:
    """The HTTP status Pi puts at the start of a model error ("500 mock injected HTTP 500")."""
    match = re.match(r"(\d{3}) ", message)
    return int(match[1]) if match else None
