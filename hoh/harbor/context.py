"""What a hoh run tells Harbor: tokens and cost into the agent context, one log line per loop."""

from __future__ import annotations

from typing import Any

from harbor.models.agent.context import AgentContext

LOOP_KEYS = ("loop", "status", "verdict", "candidate_id", "criteria_verified", "criteria_total", "seconds", "artifact",
             "error")


def fill_context(context: AgentContext, summary: dict[str, Any]) -> None:
    """Token counts as the harness reported them (hoh adds them up over every role attempt)."""
    usage = summary.get("usage")
    if usage:
        context.n_input_tokens = usage["input_tokens"]
        context.n_cache_tokens = usage["cached_input_tokens"]
        context.n_output_tokens = usage["output_tokens"]
        context.cost_usd = usage.get("cost_usd")
    if summary:
        context.metadata = {**(context.metadata or {}), "hoh": {
            "status": summary.get("status"), "error": summary.get("error"), "harness": summary.get("harness"),
            "loops_finished": summary.get("loops_finished"), "target_loops": summary.get("target_loops"),
            "workspace": summary.get("workspace"), "workdir": summary.get("workdir"),
            "loops": [{k: loop.get(k) for k in LOOP_KEYS} for loop in summary.get("loops", [])]}}


def log_lines(stdout: str | None) -> list[str]:
    return [line for line in (stdout or "").splitlines() if line.strip()]
