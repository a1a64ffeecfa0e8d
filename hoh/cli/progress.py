"""Live progress for a build: one line with loop, role, attempt and elapsed time."""

from __future__ import annotations

import time
from typing import Any

from rich.console import Console
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn


class LiveProgress:
    """Receives the Runtime's notifications and renders them; does nothing when quiet."""

    def __init__(self, console: Console, quiet: bool):
        self.console, self.quiet = console, quiet
        self.live = not quiet and console.is_terminal  # the spinner only on a terminal; logs get the lines
        self.progress = Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(),
                                 console=console, transient=True)
        self.task = None
        self.loop, self.target = 0, 0
        self.stopping = False

    def __enter__(self) -> "LiveProgress":
        if self.live:
            self.progress.start()
            self.task = self.progress.add_task("starting")
        return self

    def __exit__(self, *exc) -> None:
        if self.live:
            self.progress.stop()

    def __call__(self, kind: str, **f: Any) -> None:
        if kind == "warning":  # shown even when quiet
            self.console.print(f"[yellow]warning:[/yellow] {f['message']}", soft_wrap=True)
            return
        if kind == "stopping":  # shown even when quiet, once: the user asked for it
            if self.stopping:
                return
            self.stopping = True
            self.console.print(f"stopping after the current role attempt ({f['source']}); Ctrl-C again stops at once",
                               soft_wrap=True, markup=False)
            return
        if kind == "paused":
            until = time.strftime("%Y-%m-%d %H:%M", time.localtime(f["until"]))
            self.console.print(f"{f['role']}: the harness's usage limit is reached; paused until {until}, then "
                               "hoh goes on by itself (hoh stop -w … to end the run instead)", soft_wrap=True)
            return
        if self.quiet:
            return
        if kind == "loop":
            self.loop, self.target = f["loop"], f["target"]
            if self.live:
                self.progress.reset(self.task)
        elif kind == "attempt" and self.live:
            retry = f" (attempt {f['attempt']})" if f["attempt"] > 1 else ""
            self.progress.update(self.task, description=f"loop {self.loop}/{self.target} · {f['role']}{retry}")
        elif kind == "frozen":
            self.console.print(f"  loop {f['loop']}: froze candidate {f['candidate_id']}")
        elif kind == "loop_done":
            self.console.print(f"[bold]loop {f['loop']}[/bold] finished: {f['status']}")
