"""Claude Code (`claude -p --output-format stream-json --verbose`), at the version its `capabilities` pin.
See adapters/claude.md.

Traps handled here (HARNESS-claude-code.md): plain `acceptEdits` denies most Bash commands and
the run still exits 0, so the Developer and QA have Bash allowed, but only inside Claude Code's
own bubblewrap sandbox (which needs `socat`), fail closed; a project's `.claude/settings.json`
hooks run even in `-p` mode, so only hoh's own settings are loaded; a stream that stalls
mid-message is silent for at least 300 s, so hoh's idle timeout is the cure; `bypassPermissions`
is refused as root, so it is never used; tool denials appear only in the stream (exit code 0),
so they are recorded.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Iterable

from ..errors import HarnessUnavailable
from .attempt import tool_label
from .base import (QUOTA_PATTERN, Capabilities, CostReport, HarnessAdapter, Outcome, ParsedRun, RoleRequest, Usage,
                   compile_patterns, copy_credentials, json_events)
from .entries import EntryKind, TranscriptEntry, as_text, iso, opt_str, text_of_blocks
from .process import call, inherited

SANDBOX = {"sandbox": {"enabled": True, "failIfUnavailable": True, "autoAllowBashIfSandboxed": True,
                       "allowUnsandboxedCommands": False}}
"""Bash runs in bwrap: writes only in the cwd (and Claude Code's temp dir), no escape hatch, no start without it."""
READ_TOOLS = "Read,Grep,Glob,Bash"
"""The Planner's tools; plan mode lets Bash run read-only commands only."""
WORK_TOOLS = "Agent,Bash,Edit,Glob,Grep,NotebookEdit,Read,Write"
"""The Developer's and QA's tools: the coding set, without scheduling, worktrees or web access."""
OFFLINE = {"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_TELEMETRY": "1", "DISABLE_AUTOUPDATER": "1",
           "DISABLE_ERROR_REPORTING": "1"}
BYPASS_FLAGS = ("--dangerously-skip-permissions", "--allow-dangerously-skip-permissions", "--permission-mode")
SANDBOX_NAMESPACES = ["--unshare-net", "--unshare-pid", "--unshare-user", "--ro-bind", "/", "/", "--dev", "/dev",
                      "--proc", "/proc"]
"""What Claude Code's sandbox asks of bwrap (seen with strace), for `hoh doctor`'s probe."""


class ClaudeAdapter(HarnessAdapter):
    name = "claude"
    capabilities = Capabilities(
        executable="claude",
        npm_package="@anthropic-ai/claude-code",
        tested_version="2.1.332",
        resume=True,
        own_sandbox=True,
        cost=CostReport.always,  # total_cost_usd in every result event, from its own price list
        login_hosts=("api.anthropic.com", "console.anthropic.com", "claude.ai"),
        default_api_url="https://api.anthropic.com",
        own_layer={"planner": "plan mode, read tools only",
                   "developer": "acceptEdits; Bash in its own sandbox without hoh's jail, in the jail's with it",
                   "qa": "acceptEdits in the evidence dir; Bash in its own sandbox without hoh's jail, in the jail's"},
    )
    # Claude Code reports `api_error_status` when there was a response; these cover the rest.
    error_patterns = compile_patterns(
        QUOTA_PATTERN,
        (r"\brate.?limit|\btoo many requests\b|\boverloaded\b", Outcome.rate_limited),
        (r"\bnot logged in\b|\binvalid (x-)?api.?key\b|\bauthentication_error\b|\bOAuth token\b", Outcome.auth_error),
        (r"\bECONN(RESET|REFUSED)\b|\bconnection (dropped|refused|reset|error)\b|\bconnection to the API was lost\b"
         r"|\brequest timed out\b|\bETIMEDOUT\b|\bsocket hang up\b|\bfetch failed\b", Outcome.network_error),
    )

    def outcome_of(self, message: str, status: int | None = None) -> Outcome:
        # 529 is Anthropic's "overloaded": temporary, like a rate limit.
        return Outcome.rate_limited if status == 529 else super().outcome_of(message, status)

    # ---- roles -------------------------------------------------------------------------------
    def cwd(self, request: RoleRequest) -> Path:
        # QA works in its evidence dir: the file tools and the sandbox confine writes to the cwd,
        # so the candidate copy it reads by path stays read-only.
        if request.access == "read-only" and request.writable:
            return request.writable[0]
        return request.workdir

    def role_flags(self, request: RoleRequest) -> list[str]:
        if request.access == "read-only" and not request.writable:
            return ["--permission-mode", "plan", "--tools", READ_TOOLS]
        # The sandbox alone still denies commands it "can't check" (a `{ ...; }` group, a variable);
        # allowing Bash outright is safe only because every command runs inside the sandbox.
        settings = SANDBOX
        if request.jail is not None:
            # Inside hoh's jail Claude Code's bwrap cannot start (no capabilities: "setting up uid map:
            # Operation not permitted"; a read-only /proc/sys: no second /proc), so every Bash call would
            # fail while the run ends ok. hoh's jail, which confines the role's writes the same way, is the
            # sandbox then; Bash is allowed outright (adapters/claude.md).
            settings = {"sandbox": {"enabled": False}}
        return ["--permission-mode", "acceptEdits", "--tools", WORK_TOOLS, "--allowedTools", "Bash",
                "--settings", json.dumps(settings, separators=(",", ":"))]

    def config_dir(self, request: RoleRequest) -> Path:
        return (request.home or Path.home()) / ".claude"

    def build_argv(self, request: RoleRequest) -> list[str]:
        argv = [self.command, "-p", "--output-format", "stream-json", "--verbose", *self.role_flags(request),
                # Only hoh's settings: a project's .claude/settings.json could plant hooks for the next role.
                "--setting-sources", "user", "--strict-mcp-config", "--permission-prompts", "none"]
        if self.config.model:
            argv += ["--model", self.config.model]
        if request.resume_session:
            argv += ["--resume", request.resume_session]
        return argv + self.config.extra_args

    def env(self, request: RoleRequest) -> dict[str, str]:
        env = super().env(request)
        home = Path(env["HOME"])
        env.update(OFFLINE, CLAUDE_CONFIG_DIR=str(self.config_dir(request)), CLAUDE_CODE_TMPDIR=str(home / "tmp"),
                   # One retry of its own; hoh types the failure and applies its transient policy.
                   CLAUDE_CODE_MAX_RETRIES="1", API_TIMEOUT_MS=str(api_timeout_ms(request.idle_timeout)))
        if base_url := self.base_url(request):
            env["ANTHROPIC_BASE_URL"] = anthropic_base_url(base_url)
        self.forward_api_key(env, request, name="ANTHROPIC_API_KEY")
        return env

    def prepare(self, request: RoleRequest) -> None:
        home = request.home or Path.home()
        self.config_dir(request).mkdir(parents=True, exist_ok=True)
        (home / "tmp").mkdir(parents=True, exist_ok=True)
        for source, copy in self.logins(request):
            copy_credentials(source, copy)

    def logins(self, request: RoleRequest) -> list[tuple[Path, Path]]:
        if self.config.base_url or self.config.api_key_env:
            return []
        user_dir = Path(os.environ.get("CLAUDE_CONFIG_DIR") or Path.home() / ".claude")
        return [(user_dir / ".credentials.json", self.config_dir(request) / ".credentials.json")]

    def tidy(self, request: RoleRequest) -> None:
        # The sandbox leaves an empty `.claude/.cc-writes/` in the cwd: its bookkeeping, not the
        # role's work (it would otherwise land in QA's evidence). Only empty dirs are removed.
        for leftover in (".claude/.cc-writes", ".claude"):
            try:
                (self.cwd(request) / leftover).rmdir()
            except OSError:
                break

    # ---- availability ------------------------------------------------------------------------
    def check_available(self) -> None:
        for arg in self.config.extra_args:
            if arg.split("=", 1)[0] in BYPASS_FLAGS:
                raise HarnessUnavailable(
                    f"claude: harness.extra_args sets '{arg}', but hoh sets each role's permissions itself "
                    "(plan for the Planner, acceptEdits inside Claude Code's sandbox for the Developer and QA) and "
                    "never bypasses them (as root Claude Code refuses bypassPermissions anyway); remove it")
        super().check_available()
        missing = missing_sandbox_tools()
        if missing:
            raise HarnessUnavailable(
                f"claude: Claude Code's sandbox needs {' and '.join(missing)}, and hoh runs the Developer and QA only "
                "inside it; install them with: apt-get install bubblewrap socat")

    def sandbox_probe(self, scratch: Path) -> str:
        """A write under bwrap with the namespaces Claude Code's sandbox uses: bwrap must start, the write fail."""
        missing = missing_sandbox_tools()
        if missing:
            return f"unavailable: {' and '.join(missing)} not installed (apt-get install bubblewrap socat)"
        probe_dir = Path(tempfile.mkdtemp(dir=scratch))
        argv = ["bwrap", "--new-session", "--die-with-parent", *SANDBOX_NAMESPACES, "--"]
        try:
            ok = call([*argv, "true"], cwd=probe_dir, env=inherited("PATH"), timeout=30)
            call([*argv, "sh", "-c", "echo x > probe"], cwd=probe_dir, env=inherited("PATH"), timeout=30)
        except OSError as err:
            return f"unknown: could not run bwrap ({err})"
        if not ok.ok:
            reason = ok.stderr.strip().splitlines()[-1:] or ["no message or a timeout"]
            return f"broken: bwrap cannot create the sandbox here ({reason[0]}); Developer and QA Bash calls will fail"
        if (probe_dir / "probe").exists():
            return "not enforced: a write under bwrap's read-only root succeeded"
        return "works: bwrap and socat; Developer and QA Bash writes are confined to their dir"

    # ---- events ------------------------------------------------------------------------------
    def parse_events(self, lines: Iterable[str]) -> ParsedRun:
        parsed = ParsedRun()
        targets: dict[str, str] = {}  # tool_use id -> the path or command it aimed at
        denied: dict[str, dict[str, str]] = {}
        started: dict[str, Usage] = {}  # per model message, in case no result event arrives
        result: dict[str, Any] | None = None
        for event in json_events(lines):
            kind, subtype = event.get("type"), event.get("subtype")
            parsed.session_id = event.get("session_id") or parsed.session_id
            if kind == "assistant":
                message = event.get("message") or {}
                for block in message.get("content") if isinstance(message.get("content"), list) else []:
                    if isinstance(block, dict) and block.get("type") == "tool_use":
                        parsed.tool_calls += 1
                        targets[str(block.get("id"))] = target_of(block.get("input"))
                        parsed.last_tool = tool_label(block.get("name"), targets[str(block.get("id"))])
                if message.get("id") and message.get("model") != "<synthetic>":
                    started[message["id"]] = usage_of(message.get("usage") or {})
            elif kind == "system" and subtype == "permission_denied":
                call = str(event.get("tool_use_id"))
                denied[call] = {"tool": str(event.get("tool_name")), "target": targets.get(call, ""),
                                "reason": str(event.get("message") or event.get("decision_reason") or "")}
            elif kind == "result":
                result = event
        if result is None:
            parsed.usage = Usage.sum(started.values())
        else:
            for item in result.get("permission_denials") or []:
                call = str(item.get("tool_use_id")) if isinstance(item, dict) else ""
                if call and call not in denied:
                    denied[call] = {"tool": str(item.get("tool_name")), "target": target_of(item.get("tool_input")),
                                    "reason": "denied"}
            cost = result.get("total_cost_usd")
            parsed.usage = usage_of(result.get("usage") or {}, float(cost) if cost is not None else None)
            text = result.get("result")
            if result.get("is_error"):
                errors = result.get("errors") if isinstance(result.get("errors"), list) else []
                parsed.error = str(text or "; ".join(map(str, errors)) or f"claude ended with {result.get('subtype')}")
                parsed.error_outcome = self.outcome_of(parsed.error, result.get("api_error_status"))
            elif isinstance(text, str) and text:
                parsed.final_message = text
        parsed.denials = list(denied.values())
        return parsed

    @classmethod
    def event_entries(cls, event: dict[str, Any], state: dict[str, Any]) -> list[TranscriptEntry]:
        kind, subtype, at = event.get("type"), event.get("subtype"), iso(event.get("timestamp"))
        if kind == "system" and subtype == "permission_denied":
            return [TranscriptEntry(EntryKind.ERROR, f"{as_text(event.get('tool_name'))} denied: "
                                    f"{as_text(event.get('message') or event.get('decision_reason'))}", at=at)]
        if kind == "system" and subtype == "api_retry":
            status = f"HTTP {as_text(event.get('error_status'))} " if event.get("error_status") is not None else ""
            return [TranscriptEntry(EntryKind.ERROR, f"API retry {as_text(event.get('attempt'))} of "
                                    f"{as_text(event.get('max_retries'))}: {status}{as_text(event.get('error'))}", at=at)]
        if kind == "result":
            text = as_text(event.get("result")) or as_text(event.get("errors")) or f"claude ended with {subtype}"
            # The error's text already came as a synthetic assistant message: say it once.
            return [TranscriptEntry(EntryKind.ERROR, text, at=at)] if event.get("is_error") and text != state.get(
                "synthetic") else []
        if kind not in ("assistant", "user"):
            return []
        message = event.get("message") or {}
        content = message.get("content")
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        entries = []
        for block in content if isinstance(content, list) else []:
            if not isinstance(block, dict):
                continue
            btype = block.get("type")
            if btype == "text" and kind == "assistant":
                text = as_text(block.get("text"))
                if message.get("model") == "<synthetic>":  # Claude Code's own error text, not the model's
                    state["synthetic"] = text
                    entries.append(TranscriptEntry(EntryKind.ERROR, text, at=at))
                else:
                    entries.append(TranscriptEntry(EntryKind.MESSAGE, text, at=at))
            elif btype == "thinking":
                entries.append(TranscriptEntry(EntryKind.THINKING, as_text(block.get("thinking")), at=at))
            elif btype == "tool_use":
                tool, tool_input = opt_str(block.get("name")), block.get("input")
                command = tool_input.get("command") if isinstance(tool_input, dict) and tool == "Bash" else None
                call_id = opt_str(block.get("id"))
                state.setdefault("tools", {})[call_id] = tool
                entries.append(TranscriptEntry(EntryKind.TOOL_CALL, as_text(command if isinstance(command, str)
                                                                            else tool_input), tool, call_id, at=at))
            elif btype == "tool_result":
                call_id = opt_str(block.get("tool_use_id"))
                entries.append(TranscriptEntry(EntryKind.TOOL_RESULT, text_of_blocks(block.get("content")),
                                               state.get("tools", {}).get(call_id), call_id,
                                               block.get("is_error") is True, at))
        return entries


def missing_sandbox_tools() -> list[str]:
    """What Claude Code's Bash sandbox needs on PATH and does not find."""
    return [tool for tool in ("bwrap", "socat") if shutil.which(tool) is None]


def usage_of(u: dict[str, Any], cost: float | None = None) -> Usage:
    """Anthropic counts cache reads and writes apart from `input_tokens`; hoh's input includes them."""
    cache_read, cache_write = u.get("cache_read_input_tokens") or 0, u.get("cache_creation_input_tokens") or 0
    thinking = (u.get("output_tokens_details") or {}).get("thinking_tokens") or 0
    return Usage((u.get("input_tokens") or 0) + cache_read + cache_write, cache_read, u.get("output_tokens") or 0,
                 thinking, cost)


def target_of(tool_input: Any) -> str:
    """What a denied call aimed at: its path or command, shortened."""
    if not isinstance(tool_input, dict):
        return ""
    target = tool_input.get("file_path") or tool_input.get("command") or tool_input.get("notebook_path") or ""
    return str(target)[:200]


def anthropic_base_url(url: str) -> str:
    """Claude Code appends /v1/messages itself; accept the OpenAI-style `.../v1` the other harnesses take."""
    url = url.rstrip("/")
    return url[:-3] if url.endswith("/v1") else url


def api_timeout_ms(idle_timeout: float) -> int:
    """Its wait for response headers: two tries and a backoff fit inside hoh's idle timeout, so a hung
    endpoint ends as Claude Code's own typed "Request timed out" rather than an idle kill."""
    return int(min(600.0, max(5.0, idle_timeout * 0.4)) * 1000)
