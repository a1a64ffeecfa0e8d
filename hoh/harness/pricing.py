"""What an attempt cost: the harness's own figure where it reports one, else tokens × a price.

The price is the configured one (`harness.price`, `roles.<role>.price`) or the entry for the model's
name in `genai-prices`, a maintained price table (imported only when a cost is priced: it is large).
A model the table does not know has no price, and its cost stays `None` (unknown), never 0.
"""

from __future__ import annotations

import dataclasses
from functools import lru_cache
from typing import Literal

from ..config import HarnessConfig, PriceConfig
from ..usage import Usage

CostSource = Literal["harness", "price", "table"]


def _table_usage(usage: Usage):
    from genai_prices import Usage as TableUsage
    return TableUsage(input_tokens=usage.input_tokens, cache_read_tokens=usage.cached_input_tokens,
                      output_tokens=usage.output_tokens)


@lru_cache(maxsize=256)
def _table_ref(model: str) -> tuple[str, str | None] | None:
    """(model ref, provider id) under which the table prices `model`, or None. `provider/model` names
    (OpenCode, Pi) are tried whole, then as the provider's model."""
    from genai_prices import calc_price
    probe = _table_usage(Usage(1, 0, 1))
    candidates: list[tuple[str, str | None]] = [(model, None)]
    if "/" in model:
        provider, _, name = model.partition("/")
        candidates += [(name, provider), (name, None)]
    for ref, provider in candidates:
        try:
            calc_price(probe, ref, provider_id=provider)
        except LookupError:
            continue
        return ref, provider
    return None


def table_knows(model: str | None) -> bool:
    return model is not None and _table_ref(model) is not None


def table_cost(usage: Usage, model: str | None) -> float | None:
    """Tokens × the table's price for `model` (cache reads at their own price), or None when unknown."""
    if model is None or (found := _table_ref(model)) is None:
        return None
    from genai_prices import calc_price
    ref, provider = found
    return round(float(calc_price(_table_usage(usage), ref, provider_id=provider).total_price), 8)


def priced_cost(usage: Usage, price: PriceConfig) -> float:
    cache_read = price.cache_read if price.cache_read is not None else price.input
    fresh = max(0, usage.input_tokens - usage.cached_input_tokens)
    return round((fresh * price.input + usage.cached_input_tokens * cache_read + usage.output_tokens * price.output)
                 / 1_000_000, 8)


def cost_usage(usage: Usage, config: HarnessConfig, harness_figure_trusted: bool) -> tuple[Usage, CostSource | None]:
    """The attempt's usage with its best-known cost, and where that cost came from."""
    if usage.cost_usd is not None and harness_figure_trusted:
        return usage, "harness"
    if config.price is not None:
        return dataclasses.replace(usage, cost_usd=priced_cost(usage, config.price)), "price"
    cost = table_cost(usage, config.model)
    return dataclasses.replace(usage, cost_usd=cost), ("table" if cost is not None else None)
