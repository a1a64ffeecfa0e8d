"""Codex CLI (`codex exec --json`), at the version its `capabilities` pin. See adapters/codex.md.

Traps handled here (HARNESSES.md §2): stdin is the prompt (an open pipe would block it);
CODEX_HOME must exist and must not lie under TMPDIR or the sandbox silently fails; commands
the sandbox blocks are invisible in the event stream; `--output-schema` is not enforced, so
hoh validates the reply itself.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any, Iterable

from .attempt import tool_label
from .base import (QUOTA_PATTERN, Capabilities, HarnessAdapter, Outcome, ParsedRun, RoleRequest, Usage,
                   compile_patterns, copy_credentials, json_events)
from .entries import EntryKind, TranscriptEntry, as_text, clip, opt_str
from .process import call

PROVIDER = "hoh"


CODEX_TOOLS = {"command_execution": "shell", "file_change": "edit", "mcp_tool_call": "mcp"}
"""How a Codex item type reads in live progress."""


class CodexAdapter(HarnessAdapter):
    name = "codex"
    capabilities = Capabilities(
        executable="codex",
        npm_package="@openai/codex",
        tested_version="0.171.0",
        resume=True,
        own_sandbox=True,
        login_hosts=("api.openai.com", "chatgpt.com", "auth.openai.com"),
        default_api_url="https://api.openai.com/v1",
        own_layer={"planner": "codex sandbox read-only without hoh's jail; in it, the jail is codex's sandbox",
                   "developer": "codex sandbox workspace-write on the project without hoh's jail; in it, the jail",
                   "qa": "codex sandbox workspace-write on the evidence dir without hoh's jail; in it, the jail"},
    )
    # What codex prints once its own retries are spent (HARNESSES.md §2.6); it gives no status field.
    error_patterns = compile_patterns(
        QUOTA_PATTERN,
        (r"\blast status: 429\b|\b429 Too Many Requests\b|\brate.?limit", Outcome.rate_limited),
        (r"\bMissing environment variable\b|\b40[13] (Unauthorized|Forbidden)\b|\b(invalid|incorrect) api key\b",
         Outcome.auth_error),
        (r"\bstream disconnected\b|\berror sending request\b|\bconnection (refused|reset|closed)\b|\btimed out\b",
         Outcome.network_error),
    )

    def cwd(self, request: RoleRequest) -> Path:
        # A read-only role with a scratch dir (QA) runs in that dir under workspace-write, so the
        # sandbox lets it write evidence there and nowhere else; it reads the candidate by path.
        if request.access == "read-only" and request.writable:
            return request.writable[0]
        return request.workdir

    def sandbox_mode(self, request: RoleRequest) -> str:
        # Codex's bubblewrap needs a user namespace of its own, which a capability-less jail cannot map
        # ("setting up uid map: Operation not permitted"): every command would fail while the turn still
        # ends ok. Inside hoh's jail, which confines the role's writes the same way, the jail is the sandbox
        # (as Harbor runs codex in a container).
        if request.jail is not None:
            return "danger-full-access"
        return "workspace-write" if request.access == "write" or request.writable else "read-only"

    def build_argv(self, request: RoleRequest) -> list[str]:
        options = ["--json", "--skip-git-repo-check", "-s", self.sandbox_mode(request), "-c", "approval_policy=never"]
        if self.config.model:
            options += ["-m", self.config.model]
        if self.base_url(request):  # an endpoint of the user's, or hoh's egress in front of OpenAI's API
            prefix = f"model_providers.{PROVIDER}"
            options += ["-c", f"model_provider={PROVIDER}", "-c", f"{prefix}.name={PROVIDER}",
                        "-c", f"{prefix}.base_url={self.base_url(request)}", "-c", f"{prefix}.wire_api=responses"]
            if key := self.key_variable(request):
                options += ["-c", f"{prefix}.env_key={key}"]
            # hoh retries transient failures itself, with the journal recording each one.
            options += ["-c", f"{prefix}.request_max_retries=1", "-c", f"{prefix}.stream_max_retries=1"]
        options += self.config.extra_args
        if request.resume_session:
            return [self.command, "exec", *options, "resume", request.resume_session, "-"]
        return [self.command, "exec", *options, "-C", str(self.cwd(request)), "-"]

    def env(self, request: RoleRequest) -> dict[str, str]:
        env = super().env(request)
        home = Path(env["HOME"])
        env["CODEX_HOME"] = str(home / ".codex")
        env["TMPDIR"] = str(home / "tmp")
        self.forward_api_key(env, request)
        return env

    def prepare(self, request: RoleRequest) -> None:
        home = request.home or Path.home()
        (home / ".codex").mkdir(parents=True, exist_ok=True)
        (home / "tmp").mkdir(parents=True, exist_ok=True)
        for source, copy in self.logins(request):
            copy_credentials(source, copy)

    def logins(self, request: RoleRequest) -> list[tuple[Path, Path]]:
        if self.config.base_url or self.config.api_key_env:
            return []
        return [(Path.home() / ".codex" / "auth.json", (request.home or Path.home()) / ".codex" / "auth.json")]

    def parse_events(self, lines: Iterable[str]) -> ParsedRun:
        parsed = ParsedRun()
        failed = False
        for event in json_events(lines):
            kind = event.get("type")
            item = event.get("item") or {}
            if kind == "thread.started":
                parsed.session_id = event.get("thread_id")
            elif kind == "item.completed" and item.get("type") == "agent_message":
                parsed.final_message = item.get("text")
            elif kind == "item.completed" and item.get("type") in ("command_execution", "file_change", "mcp_tool_call"):
                parsed.tool_calls += 1
                changes = item.get("changes") if isinstance(item.get("changes"), list) else []
                target = item.get("command") or item.get("tool") or next(
                    (c.get("path") for c in changes if isinstance(c, dict)), "")
                parsed.last_tool = tool_label(CODEX_TOOLS.get(str(item.get("type")), "tool"), target)
            elif kind == "turn.completed":
                u = event.get("usage") or {}
                parsed.usage = parsed.usage + (Usage(u.get("input_tokens", 0), u.get("cached_input_tokens", 0),
                                                      u.get("output_tokens", 0), u.get("reasoning_output_tokens", 0)))
            elif kind == "error":
                parsed.error = event.get("message") or "codex reported an error"
            elif kind == "turn.failed":
                parsed.error = (event.get("error") or {}).get("message") or parsed.error or "codex turn failed"
                failed = True
        # "error" events also announce retries; only a failed turn, or no answer at all, is a failure.
        if failed or (parsed.error and parsed.final_message is None):
            parsed.error_outcome = self.outcome_of(parsed.error or "")
        return parsed

    @classmethod
    def event_entries(cls, event: dict[str, Any], state: dict[str, Any]) -> list[TranscriptEntry]:
        kind, item = event.get("type"), event.get("item") or {}
        if kind in ("error", "turn.failed"):  # an error is also a retry's notice ("Reconnecting... 1/1")
            text = as_text(event.get("message") if kind == "error" else (event.get("error") or {}).get("message"))
            text = readable_error(text) or f"codex reported {kind}"
            # A failed turn repeats the error just printed: say it once.
            repeated, state["error"] = text == state.get("error"), text
            return [] if repeated and kind == "turn.failed" else [TranscriptEntry(EntryKind.ERROR, text)]
        if kind not in ("item.started", "item.completed"):
            return []  # thread/turn bookkeeping; usage is the transcript's own field
        item_type, call_id = item.get("type"), opt_str(item.get("id"))
        if item_type == "agent_message":
            return [TranscriptEntry(EntryKind.MESSAGE, as_text(item.get("text")))] if kind == "item.completed" else []
        if item_type == "reasoning":
            return [TranscriptEntry(EntryKind.THINKING, as_text(item.get("text")))] if kind == "item.completed" else []
        if item_type == "error":
            return [TranscriptEntry(EntryKind.ERROR, as_text(item.get("message")))] if kind == "item.completed" else []
        call = codex_call(item)
        if call is None:
            return []  # a list the CLI keeps (todo_list) rather than an action
        tool, text = call
        started = state.setdefault("started", set())
        entries = []
        if call_id is None or call_id not in started:  # a call seen first at its end (file_change) still shows its input
            started.add(call_id)
            entries.append(TranscriptEntry(EntryKind.TOOL_CALL, text, tool, call_id))
        if kind == "item.completed":
            output, failed = codex_output(item)
            entries.append(TranscriptEntry(EntryKind.TOOL_RESULT, output, tool, call_id, failed))
        return entries

    def sandbox_probe(self, scratch: Path) -> str:
        """Run a write under `codex sandbox` (read-only by default): it must fail and leave no file."""
        probe_dir = Path(tempfile.mkdtemp(dir=scratch))
        home = Path(tempfile.mkdtemp(dir=scratch))
        (home / ".codex").mkdir()
        (home / "tmp").mkdir()
        env = {"PATH": os.environ.get("PATH", ""), "HOME": str(home),
               "CODEX_HOME": str(home / ".codex"), "TMPDIR": str(home / "tmp")}
        try:
            ok = call([self.command, "sandbox", "--", "true"], cwd=probe_dir, env=env, timeout=60).ok
            call([self.command, "sandbox", "--", "sh", "-c", "echo x > probe"], cwd=probe_dir, env=env, timeout=60)
        except OSError as err:
            return f"unknown: could not run the sandbox ({err})"
        if not ok:
            return "broken: `codex sandbox -- true` fails here; read-only roles rely on hoh's guard alone"
        if (probe_dir / "probe").exists():
            return "not enforced: a write under the read-only sandbox succeeded"
        return "works: read-only and workspace-write are enforced by codex's own sandbox"


def readable_error(text: str) -> str:
    """Codex passes an API's error body on as its message (`{"error": {"message": ..., "type": ...}}`): its
    message and type read better; any other text stays as it is."""
    try:
        body = json.loads(text) if text.startswith("{") else None
    except (ValueError, RecursionError):
        body = None
    error = body.get("error") if isinstance(body, dict) else None
    if not isinstance(error, dict) or not isinstance(error.get("message"), str):
        return text
    kind = error.get("type")
    return clip(error["message"] + (f" ({kind})" if isinstance(kind, str) else ""))


def codex_call(item: dict[str, Any]) -> tuple[str, str] | None:
    """(tool, input) of one codex item that is an action, or None for an item that is not."""
    kind = item.get("type")
    if kind == "command_execution":
        return "shell", as_text(item.get("command"))
    if kind == "file_change":
        changes = item.get("changes") if isinstance(item.get("changes"), list) else []
        return "apply_patch", clip("\n".join(f"{c.get('kind', '?')} {c.get('path', '?')}" for c in changes
                                              if isinstance(c, dict)))
    if kind == "mcp_tool_call":
        return f"{opt_str(item.get('server')) or 'mcp'}.{opt_str(item.get('tool')) or '?'}", as_text(item.get("arguments"))
    if kind == "web_search":
        return "web_search", as_text(item.get("query"))
    if kind == "todo_list":
        return None
    return opt_str(kind) or "item", as_text({k: v for k, v in item.items() if k not in ("id", "type")})


def codex_output(item: dict[str, Any]) -> tuple[str, bool]:
    """(output, failed) of a finished codex action."""
    status = item.get("status")
    if item.get("type") == "command_execution":
        code = item.get("exit_code")
        output = as_text(item.get("aggregated_output"))
        return (output + ("\n" if output and not output.endswith("\n") else "") + f"[exit code {code}]",
                status == "failed" or (isinstance(code, int) and code != 0))
    if item.get("type") == "mcp_tool_call":
        error = (item.get("error") or {}).get("message") if isinstance(item.get("error"), dict) else item.get("error")
        return as_text(error or item.get("result")), bool(error) or status == "failed"
    return as_text(status), status == "failed"
