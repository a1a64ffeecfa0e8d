"""Tokens and cost: the one shape the adapters report and the journal, status and reports read."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable


@dataclass(frozen=True)
class Usage:
    """Tokens and cost of one or more harness runs: the one shape used in the journal, status and reports."""

    input_tokens: int = 0
    cached_input_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int = 0
    cost_usd: float | None = None
    """None when no run reported or priced a cost: unknown, never 0."""

    def __add__(self, other: "Usage") -> "Usage":
        # An unknown cost adds nothing; the sum stays unknown only while every part is.
        cost = None if self.cost_usd is None and other.cost_usd is None else (self.cost_usd or 0) + (other.cost_usd or 0)
        return Usage(self.input_tokens + other.input_tokens, self.cached_input_tokens + other.cached_input_tokens,
                     self.output_tokens + other.output_tokens, self.reasoning_tokens + other.reasoning_tokens, cost)

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def to_json(self) -> dict[str, Any]:
        return {"input_tokens": self.input_tokens, "cached_input_tokens": self.cached_input_tokens,
                "output_tokens": self.output_tokens, "reasoning_tokens": self.reasoning_tokens,
                "cost_usd": self.cost_usd}

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> "Usage":
        """Read a recorded usage; missing or null counts are 0, a missing cost is unknown."""
        data = data or {}
        cost = data.get("cost_usd")
        return cls(int(data.get("input_tokens") or 0), int(data.get("cached_input_tokens") or 0),
                   int(data.get("output_tokens") or 0), int(data.get("reasoning_tokens") or 0),
                   float(cost) if cost is not None else None)

    @classmethod
    def sum(cls, items: Iterable["Usage"]) -> "Usage":
        """`Usage() + a + b + …`, computed the same way (the same cost, an int 0 included) without the objects
        in between: status sums every attempt of a long run several times."""
        tokens_in = cached = tokens_out = reasoning = 0
        cost = None
        for item in items:
            tokens_in += item.input_tokens
            cached += item.cached_input_tokens
            tokens_out += item.output_tokens
            reasoning += item.reasoning_tokens
            other = item.cost_usd
            cost = None if cost is None and other is None else (cost or 0) + (other or 0)
        return cls(tokens_in, cached, tokens_out, reasoning, cost)
