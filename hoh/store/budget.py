"""Budgets over the whole run: what is spent (from the journal's fold), what the next attempt may spend,
and the check before every role attempt.

The estimate of an attempt is the largest earlier attempt of the same role (0 before its first). A
run stops when what is spent plus that estimate would pass a budget, or once a budget is reached; so
a budget is passed by at most one attempt's actual spend (an attempt larger than any before it), and
that overrun is reported by `figures`. Developers working at once (`packages.py`) each hold a share: an
attempt starts only if the budget also covers the estimate of every other attempt running meanwhile.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Callable

from ..errors import BudgetExhausted
from .journal import RunHistory

if TYPE_CHECKING:  # pydantic, which `hoh status` does not import (it passes `readview.BudgetLimits`)
    from ..config import BudgetConfig

KEYS = ("tokens", "cost_usd", "wall_hours")


def spent(history: RunHistory, now: float | None = None) -> dict[str, float]:
    usage = history.usage
    return {"tokens": usage.total_tokens, "cost_usd": round(usage.cost_usd or 0.0, 6),
            "wall_hours": round(history.wall_seconds(now) / 3600, 4)}


def estimate(history: RunHistory, role: str) -> dict[str, float]:
    largest = history.largest_attempt[role]
    return {"tokens": largest["tokens"], "cost_usd": round(largest["cost_usd"], 6),
            "wall_hours": round(largest["seconds"] / 3600, 4)}


def figures(config: BudgetConfig, history: RunHistory, now: float | None = None) -> dict[str, dict[str, Any]]:
    """Each budget that is set: its limit, what is spent, and by how much the spend went over (0 if not)."""
    limits = {key: limit for key in KEYS if (limit := getattr(config, key)) is not None}
    used = spent(history, now) if limits else {}  # a sum over every loop: not when no budget is set
    return {key: {"limit": limit, "spent": used[key], "overrun": round(max(0.0, used[key] - limit), 6)}
            for key, limit in limits.items()}


def describe(key: str, value: float) -> str:
    if key == "tokens":
        return f"{int(value):,} tokens"
    if key == "cost_usd":
        return f"${value:,.2f}" if value >= 0.1 or value == 0 else f"${value:.4f}"
    return f"{value:.2f} h"


class BudgetGate:
    """The check before each role attempt: raises BudgetExhausted (after `record` gets the reason)."""

    def __init__(self, config: BudgetConfig, history: RunHistory, clock: Callable[[], float] = time.time):
        self.config, self.history, self.clock = config, history, clock

    def check(self, role: str, running: int = 0) -> tuple[str, float, float, float] | None:
        """The first budget the next attempt of `role` would pass, with `running` other attempts of the role under
        way: (key, limit, spent, estimate of them all), else None."""
        if all(getattr(self.config, key) is None for key in KEYS):
            return None  # no budget: nothing to sum over the run's loops before every attempt
        used, next_one = spent(self.history, self.clock()), estimate(self.history, role)
        for key in KEYS:
            limit, ahead = getattr(self.config, key), next_one[key] * (running + 1)
            if limit is not None and (used[key] >= limit or used[key] + ahead > limit):
                return key, float(limit), float(used[key]), float(ahead)
        return None

    @staticmethod
    def exhausted(key: str, role: str, limit: float, used: float, next_one: float) -> BudgetExhausted:
        over = f", {describe(key, used - limit)} over it (the last attempt was larger than any before)" \
            if used > limit else ""
        why = (f"{describe(key, used)} spent{over}" if used >= limit else
               f"{describe(key, used)} spent and the {role}'s next attempts may take {describe(key, next_one)}")
        return BudgetExhausted(f"budget.{key} of {describe(key, limit)} would be passed: {why}")
