"""Role prompts: one jinja2 template per role in `prompts/`, strict about its variables."""

from __future__ import annotations

from functools import cache
from typing import Any

import jinja2
import jinja2.meta

from ..markers import fact_line, role_marker
from ..resources import resource_dir


class PromptTemplate:
    """A role's template; every prompt starts with the role marker (`hoh.markers`)."""

    def __init__(self, env: jinja2.Environment, name: str):
        source = (resource_dir("prompts") / f"{name}.md.j2").read_text(encoding="utf-8")
        self.name = name
        self.required = frozenset(jinja2.meta.find_undeclared_variables(env.parse(source)) - env.globals.keys())
        self.template = env.from_string(source)

    def render(self, *, role: str, loop: int, attempt: int, **values: Any) -> str:
        values.update(role=role, loop=loop, attempt=attempt)
        missing = sorted(self.required - values.keys())
        if missing:
            raise KeyError(f"prompt template '{self.name}' needs {', '.join(missing)}")
        return role_marker(role, loop, attempt) + "\n" + self.template.render(**values)


@cache
def template(name: str) -> PromptTemplate:
    env = jinja2.Environment(undefined=jinja2.StrictUndefined, keep_trailing_newline=True,
                             autoescape=False, trim_blocks=False)
    env.globals["fact"] = fact_line
    return PromptTemplate(env, name)
