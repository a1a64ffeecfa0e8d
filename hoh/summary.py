"""A loop's summary: its figures, all from the journal's fold (`hoh status`'s loop entry, a hook's payload, a report's
loop header). Apart from `records.py` so that `hoh status` imports none of the role records."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from .statuses import LoopStatus, Verdict

Json = dict[str, Any]


@dataclass(frozen=True)
class LoopSummary:
    """One finished (or running) loop's figures, all from the journal's fold: `hoh status`'s loop entry, a hook's
    `loop_end` payload, a task run's summary line, a report's loop header. QA covers every acceptance condition
    of the plan once, so `criteria_total` is the plan's count."""

    loop: int
    status: LoopStatus
    candidate_id: str | None
    criteria_verified: int
    criteria_total: int
    issues: dict[str, int] | None
    progress: dict[str, int] | None
    seconds: float
    role_seconds: dict[str, float]
    attempts: dict[str, int]
    violations: dict[str, int]
    tokens: int
    cost_usd: float | None
    usage: dict[str, Json]
    """role → Usage.to_json()."""
    error: str | None = None
    """Why a role of the loop failed (`role failed after N attempt(s): last error`), when one did."""
    checks: dict[str, int] | None = None
    """replayed, failed, flaky, skipped (the replay before QA), added, rejected, retired (QA's checks)."""
    check_seconds: float = 0.0
    """The replay's and the admission's time: the project's own test time, neither a role's nor hoh's overhead."""
    reason: str | None = None
    """Why the loop fell short of `pass`: its regressions and failed criteria (None for a pass, or unrecorded)."""

    @property
    def verdict(self) -> Verdict | None:
        return self.status.verdict

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "LoopSummary":
        return cls(data["loop"], LoopStatus(data["status"]), data.get("candidate_id"), data["criteria_verified"],
                   data["criteria_total"], data.get("issues"), data.get("progress"), data["seconds"],
                   dict(data.get("role_seconds", {})), dict(data.get("attempts", {})),
                   dict(data.get("violations", {})), data["tokens"], data.get("cost_usd"), dict(data["usage"]),
                   data.get("error"), data.get("checks"), data.get("check_seconds", 0.0), data.get("reason"))

    def to_json(self) -> Json:
        return {"loop": self.loop, "status": self.status.value,
                "verdict": self.verdict.value if self.verdict else None, "candidate_id": self.candidate_id,
                "criteria_verified": self.criteria_verified, "criteria_total": self.criteria_total,
                "attempts": dict(self.attempts), "seconds": self.seconds, "role_seconds": dict(self.role_seconds),
                "issues": self.issues, "violations": dict(self.violations), "progress": self.progress,
                "tokens": self.tokens, "cost_usd": self.cost_usd, "usage": dict(self.usage), "error": self.error,
                "checks": self.checks, "check_seconds": self.check_seconds, "reason": self.reason}
