"""Live progress of `hoh build` and `hoh resume`, on stderr: the Runtime's notifications rendered as a live line
on a terminal, one line per role attempt's start and end in a log, JSON lines for machines, or nothing.

Every mode also logs each start and end to the `hoh.run` logger (`--log-file`). The role's figures while
it runs (tokens, cost, the last tool call) come from its events.jsonl (`tail.EventsTail`); the figures at
its end are the Runtime's own (`attempt_done`), priced as the journal prices them.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.live import Live
from rich.spinner import Spinner
from rich.table import Table
from rich.text import Text

from ..harness.attempt import tool_label
from ..terminal import terminal_text
from ..usage import Usage
from .options import ProgressMode
from .tail import EventsTail, LiveFigures

if TYPE_CHECKING:
    from ..harness.base import HarnessAdapter

log = logging.getLogger("hoh.run")

JSON_SCHEMA_VERSION = 1
"""`v` of every `--progress json` line; a field is only ever added within one version."""


@dataclass
class RunningRole:
    """The role running now: its own clock (from its first attempt), what its finished attempts used, and
    the tail of the attempt in flight."""

    role: str
    loop: int
    attempt: int = 1
    started: float = field(default_factory=lambda: time.monotonic())
    attempt_started: float = field(default_factory=lambda: time.monotonic())
    spent: Usage = field(default_factory=Usage)
    tools: int = 0
    last_tool: str | None = None
    tail: EventsTail | None = None
    adapter: "HarnessAdapter | None" = None

    def live(self) -> tuple[Usage, int, str | None]:
        """Usage, tool calls and last tool call so far, the attempt in flight included."""
        figures = self.tail.poll() if self.tail else LiveFigures()
        usage = figures.usage
        if self.adapter is not None:  # price it as the attempt's end will (the CLI's own figure, a price, the table)
            try:
                from ..harness.pricing import cost_usage
                usage, _ = cost_usage(usage, self.adapter.config, self.adapter.reported_cost_counts())
            except Exception:  # noqa: BLE001 - an unpriceable figure is shown as unknown, never a crash
                pass
        return self.spent + usage, self.tools + figures.tool_calls, figures.last_tool or self.last_tool


def clock(seconds: float) -> str:
    seconds = max(0, int(seconds))
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


def cost_text(cost: float | None) -> str:
    return "cost unknown" if cost is None else f"${cost:.4f}" if cost < 1 else f"${cost:,.2f}"


class LiveProgress:
    """Receives the Runtime's notifications (`notify(kind, **fields)`) and renders them in one `ProgressMode`.
    Warnings, a stop being made and a pause for a usage limit are shown in every mode but json, where they
    are JSON lines too."""

    def __init__(self, console: Console, mode: ProgressMode = ProgressMode.AUTO):
        self.console, self.mode = console, mode.resolve(console)
        self.loop, self.target = 0, 0
        self.loop_usage = Usage()
        self.role: RunningRole | None = None
        self.packages: dict[str, RunningRole] = {}
        """Developers working at once, by work package: shown side by side on the live line."""
        self.idle_since = time.monotonic()
        self.stopping = False
        self.live: Live | None = None
        self.spinner = Spinner("dots")

    @property
    def wants_report(self) -> bool:
        """Whether the run report is wanted at the end (json progress ends with it)."""
        return self.mode is ProgressMode.JSON

    # ---- lifecycle ----------------------------------------------------------------------------
    def __enter__(self) -> "LiveProgress":
        if self.mode is ProgressMode.LIVE:
            self.live = Live(self, console=self.console, refresh_per_second=2, transient=True)
            self.live.start()
        return self

    def __exit__(self, *exc) -> None:
        if self.live is not None:
            self.live.stop()

    def __rich__(self) -> Table:
        """The live line, drawn on rich's refresh thread: it polls the running attempt's events."""
        line = Table.grid(padding=(0, 1))
        try:
            text = self.status_line()
        except Exception:  # noqa: BLE001 - rich's refresh thread must not die on a figure it could not make
            text = Text(f"loop {self.loop}/{self.target}")
        line.add_row(self.spinner, text)
        return line

    def status_line(self) -> Text:
        where = f"loop {self.loop}/{self.target}"
        if self.packages:
            parts = []
            for package, running in sorted(self.packages.items()):
                try:
                    usage, tools, _ = running.live()
                except Exception:  # noqa: BLE001 - the live line must never take the run down
                    usage, tools = running.spent, running.tools
                retry = f" (attempt {running.attempt})" if running.attempt > 1 else ""
                parts.append(f"developer {package}{retry} {clock(time.monotonic() - running.started)} "
                             f"{usage.total_tokens:,} tokens {tools} tools")
            return Text(f"{where} · " + " | ".join(parts), no_wrap=True, overflow="ellipsis")
        role = self.role
        if role is None:
            doing = "hoh, between roles" if self.loop else "starting"
            return Text(f"{where if self.loop else 'hoh'} · {doing} · {clock(time.monotonic() - self.idle_since)}")
        try:
            usage, tools, last = role.live()
        except Exception:  # noqa: BLE001 - the live line must never take the run down
            usage, tools, last = role.spent, role.tools, role.last_tool
        retry = f" (attempt {role.attempt})" if role.attempt > 1 else ""
        text = (f"{where} · {role.role}{retry} · {clock(time.monotonic() - role.started)} · "
                f"{usage.total_tokens:,} tokens · {cost_text(usage.cost_usd)} · {tools} tool calls")
        if last:
            text += f" · last: {last}"
        # Text: an agent's words are never rich markup; and what rich's Text would drop unseen (a CR) is shown
        return Text(terminal_text(text), no_wrap=True, overflow="ellipsis")

    # ---- notifications ------------------------------------------------------------------------
    def __call__(self, kind: str, **f: Any) -> None:
        handler = getattr(self, f"on_{kind}", None)
        if handler is not None:
            handler(**f)

    def on_warning(self, message: str, **_: Any) -> None:
        log.warning(message)
        if self.mode is ProgressMode.JSON:
            self.emit("warning", message=message)
        else:
            self.console.print(Text.assemble(("warning:", "yellow"), " ", terminal_text(message)), soft_wrap=True)

    def on_stopping(self, source: str, **_: Any) -> None:
        if self.stopping:  # once: the user asked for it
            return
        self.stopping = True
        log.info("stopping after the current role attempt (%s)", source)
        if self.mode is ProgressMode.JSON:
            self.emit("stopping", source=source)
        else:
            self.console.print(f"stopping after the current role attempt ({source}); Ctrl-C again stops at once",
                               soft_wrap=True, markup=False)

    def on_paused(self, role: str, until: float, **_: Any) -> None:
        shown = time.strftime("%Y-%m-%d %H:%M", time.localtime(until))
        log.info("%s: usage limit reached; paused until %s", role, shown)
        if self.mode is ProgressMode.JSON:
            self.emit("paused", role=role, until=until)
        else:
            self.console.print(f"{role}: the harness's usage limit is reached; paused until {shown}, then hoh goes "
                               "on by itself (hoh stop -w … to end the run instead)", soft_wrap=True, markup=False)

    def on_loop(self, loop: int, target: int, **_: Any) -> None:
        self.loop, self.target, self.loop_usage = loop, target, Usage()
        self.idle_since = time.monotonic()
        log.info("loop %d/%d started", loop, target)

    def on_role(self, role: str, loop: int, package: str | None = None, **_: Any) -> None:
        if package is None:
            self.role = RunningRole(role, loop)

    def on_attempt(self, role: str, loop: int, attempt: int, events: Path | None = None, adapter: "HarnessAdapter | None" = None,
                   package: str | None = None, **_: Any) -> None:
        if package is not None:
            running = self.packages.setdefault(package, RunningRole(role, loop))
        else:
            if self.role is None or (self.role.role, self.role.loop) != (role, loop):
                self.role = RunningRole(role, loop)
            running = self.role
        running.attempt, running.attempt_started, running.adapter = attempt, time.monotonic(), adapter
        parse = getattr(adapter, "parse_events", None)
        running.tail = EventsTail(Path(events), parse) if events is not None and parse is not None else None
        label = f"{role} {package}" if package else role
        where = f"loop {loop}/{self.target} · {label} · attempt {attempt}"
        log.info("%s · started", where)
        if self.mode is ProgressMode.LINES:
            self.console.print(f"{where} · started", soft_wrap=True, markup=False, highlight=False)
        elif self.mode is ProgressMode.JSON:
            self.emit("role_start", loop=loop, target=self.target, role=role, attempt=attempt,
                      **({"package": package} if package else {}))

    def on_attempt_done(self, role: str, loop: int, attempt: int, ok: bool, outcome: str, seconds: float,
                        usage: Usage, tool_calls: int = 0, errors: list[str] | None = None, package: str | None = None,
                        **_: Any) -> None:
        errors = errors or []
        running = self.packages.get(package) if package else self.role
        if running is not None and (running.role, running.loop) == (role, loop):
            running.spent, running.tools = running.spent + usage, running.tools + tool_calls
            running.last_tool = (running.tail.figures.last_tool if running.tail else None) or running.last_tool
            running.tail = None
            if ok and package:
                self.packages.pop(package, None)
            elif ok:
                self.role, self.idle_since = None, time.monotonic()
        self.loop_usage = self.loop_usage + usage
        result = "ok" if ok else outcome if outcome != "ok" else "rejected"
        why = f": {tool_label(errors[0], limit=160)}" if errors and not ok else ""
        label = f"{role} {package}" if package else role
        line = (f"loop {loop}/{self.target} · {label} · attempt {attempt} · {result}{why} · {seconds:.1f}s · "
                f"{usage.total_tokens:,} tokens · {cost_text(usage.cost_usd)}")
        (log.info if ok else log.warning)("%s", line)
        if self.mode in (ProgressMode.LINES, ProgressMode.LIVE):
            self.console.print(line, soft_wrap=True, markup=False, highlight=False)
        elif self.mode is ProgressMode.JSON:
            self.emit("role_end", loop=loop, target=self.target, role=role, attempt=attempt, ok=ok, outcome=result,
                      **({"package": package} if package else {}),
                      seconds=round(seconds, 3), tokens=usage.total_tokens, cost_usd=usage.cost_usd,
                      usage=usage.to_json(), tool_calls=tool_calls, errors=[e[:500] for e in errors[:5]])

    def on_frozen(self, loop: int, candidate_id: str, **_: Any) -> None:
        log.info("loop %d: froze candidate %s", loop, candidate_id)
        if self.mode in (ProgressMode.LINES, ProgressMode.LIVE):
            self.console.print(f"  loop {loop}: froze candidate {candidate_id}", markup=False, highlight=False)
        elif self.mode is ProgressMode.JSON:
            self.emit("candidate", loop=loop, candidate_id=candidate_id)

    def on_loop_done(self, loop: int, status: str, **_: Any) -> None:
        self.role, self.packages = None, {}
        log.info("loop %d finished: %s", loop, status)
        if self.mode in (ProgressMode.LINES, ProgressMode.LIVE):
            self.console.print(f"[bold]loop {loop}[/bold] finished: {status}")
        elif self.mode is ProgressMode.JSON:
            self.emit("loop_end", loop=loop, target=self.target, status=str(status),
                      tokens=self.loop_usage.total_tokens, cost_usd=self.loop_usage.cost_usd)

    def finished(self, report: dict[str, Any]) -> None:
        """The run's end (the run report `--json` prints), as the last JSON line."""
        if self.mode is ProgressMode.JSON:
            self.emit("run_end", **report)

    def emit(self, event: str, **fields: Any) -> None:
        line = json.dumps({"v": JSON_SCHEMA_VERSION, "event": event, "time": round(time.time(), 3), **fields},
                          default=str)
        self.console.file.write(line + "\n")
        self.console.file.flush()
