"""The decisions a run takes between role attempts and between loops: a stop request, the budgets, the
end of a run short of its target (the spec complete, no progress), and the hooks."""

from __future__ import annotations

from typing import Any, Callable

from ..config import HohConfig
from ..errors import StopRequested
from ..paths import WorkspacePaths
from ..statuses import LoopStatus, RunStatus
from ..store import events as ev, stop
from ..store.budget import BudgetGate, figures
from ..store.journal import Journal, RunHistory
from .hooks import key_names, run_hook, run_summary


class RunControl:
    """Reads the live fold (`history`) and the stop request; journals what it decides."""

    def __init__(self, paths: WorkspacePaths, config: HohConfig, journal: Journal, history: RunHistory,
                 notify: Callable[..., None], opened_at: float):
        self.paths, self.config, self.journal, self.history, self.notify = paths, config, journal, history, notify
        self.opened_at = opened_at
        """When this session took the workspace: a stop request older than that was for an earlier one."""
        self.stop_file = stop.StopFile(paths.stop_request)
        self.budget = BudgetGate(config.budget, history)
        self.loop = 0
        """The loop being run (for the journal's budget_stop)."""

    def clear_stale_request(self) -> None:
        if self.stop_file.read(newer_than=self.opened_at) is None:
            self.stop_file.clear()  # a request nobody saw (its run had ended) is not for this one

    def end_after(self, t: int, target: int) -> tuple[RunStatus, str] | None:
        """Whether the run ends after loop t short of its target: the spec complete, or no progress."""
        stats = self.history.loops[t]
        if stats.status is LoopStatus.COMPLETE:
            return RunStatus.COMPLETE, (f"loop {t}: the Planner found the spec complete and QA re-verified every verified "
                                f"behaviour on {stats.candidate_id}")
        patience = self.config.policy.patience
        if patience and self.history.no_progress_streak >= patience and t < target:
            return RunStatus.STALLED, (f"no progress in loops {t - patience + 1}–{t} (policy.patience={patience}): no "
                               "criterion newly verified, no issue closed, no behaviour added")
        return None

    def stop_requested(self) -> StopRequested | None:
        """A stop asked for by `hoh stop` or a first Ctrl-C/SIGTERM, journaled once per session."""
        source = stop.requested(self.stop_file, self.opened_at)
        if source is None:
            return None
        if self.history.stop_request is None:
            self.journal.append(ev.StopRequested(source=source))
            self.notify("stopping", source=source)
        return StopRequested(f"stopped by {source} before the next role attempt")

    def before_attempt(self, role: str, running: int = 0) -> None:
        """Before every role attempt: a stop request, then the budgets (`running`: other attempts of the role under
        way, Developers working at once, whose share the budget must hold too)."""
        if requested := self.stop_requested():
            raise requested
        if found := self.budget.check(role, running):
            key, limit, used, estimate = found
            self.journal.append(ev.BudgetStop(loop=self.loop, role=role, budget=key, limit=limit,
                                              spent=used, estimate=estimate))
            raise self.budget.exhausted(key, role, limit, used, estimate)

    def hook(self, name: str, loop: int | None, tag: str, payload: dict[str, Any]) -> None:
        if getattr(self.config.hooks, name) is None:
            return
        payload["run"] = run_summary(self.paths, self.history, figures(self.config.budget, self.history))
        event = run_hook(name, self.config.hooks, self.paths, payload, loop, tag, key_names(self.config))
        self.journal.append(event)
        if event.error:
            self.notify("warning", message=f"hooks.{name} failed ({event.error}); the run goes on")

