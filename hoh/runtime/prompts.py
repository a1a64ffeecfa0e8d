"""Role prompts: one jinja2 template per role in `prompts/`, strict about its variables."""

from __future__ import annotations

from functools import cache
from typing import Any

import jinja2
import jinja2.meta

from ..resources import resource_dir

TEMPLATES = ("planner", "developer", "qa", "retry")


class PromptTemplate:
    def __init__(self, env: jinja2.Environment, name: str):
        source = (resource_dir("prompts") / f"{name}.md.j2").read_text(encoding="utf-8")
        self.name = name
        self.required = frozenset(jinja2.meta.find_undeclared_variables(env.parse(source)))
        self.template = env.from_string(source)

    def render(self, **values: Any) -> str:
        missing = sorted(self.required - values.keys())
        if missing:
            raise KeyError(f"prompt template '{self.name}' needs {', '.join(missing)}")
        return self.template.render(**values)


@cache
def template(name: str) -> PromptTemplate:
    env = jinja2.Environment(undefined=jinja2.StrictUndefined, keep_trailing_newline=True,
                             autoescape=False, trim_blocks=False)
    return PromptTemplate(env, name)
