"""The class of every hoh command: usage errors always show the usage line, and help shows real metavars.

Click raises a few parser errors without their context (an option given no value: `hoh status -w`),
and then prints no usage line; this class hands the context over. Typer spells an untyped metavar as
the Python type (`<path>`, `<list[str]>`, an argument as `{spec}`); this class names each one instead
(SPEC, PATH, N, the option's own name), unless the option gave its own.
Only typer's public API is used: recent typer releases vendor click, so click may not be installed.
"""

from __future__ import annotations

from pathlib import Path

from typer.core import TyperCommand


NAMED = {"--set": "KEY=VALUE", "--ak": "KEY=VALUE", "--ek": "KEY=VALUE", "--ae": "NAME[=VALUE]", "--base-url": "URL",
         "--api-key-env": "VAR", "--include": "GLOB", "--env-image": "IMAGE", "--ablate": "MECHANISM",
         "--workspace": "DIR", "--harness": "NAME"}
"""Options whose value reads better by what it is than by the option's name."""


def metavar_of(param) -> str:
    """An argument's name (SPEC); a path option PATH, a number N, anything else the option's long name (MODEL)."""
    name = (param.name or "value").upper().replace("_", "-")
    named = [NAMED[opt] for opt in getattr(param, "opts", []) if opt in NAMED]
    if named and getattr(param, "param_type_name", "") != "argument":
        return named[0]
    if getattr(param, "param_type_name", "") == "argument":
        return name
    described = getattr(param, "type_descriptor", None)
    annotation = getattr(described, "annotation", None)
    kind = getattr(getattr(param, "type", None), "name", "")  # typer releases that keep click's types
    if getattr(described, "is_path", False) or annotation is Path or kind == "path":
        return "PATH"
    if annotation in (int, float) or getattr(described, "is_ranged", False) or kind.startswith(("integer", "float")):
        return "N"
    longs = [opt for opt in getattr(param, "opts", []) if opt.startswith("--")]
    return longs[0].removeprefix("--").upper() if longs else name


def _name_only(record):
    """An argument's help row without typer's type (`SPEC <path>` is `SPEC`)."""
    def named(ctx):
        row = record(ctx)
        return None if row is None else (row[0].split(" ")[0], row[1])
    return named


class UsageCommand(TyperCommand):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        for param in self.params:
            flag = getattr(param, "is_flag", False) or getattr(param, "count", False)
            choice = getattr(getattr(param, "type_descriptor", None), "is_choice", False) or hasattr(
                getattr(param, "type", None), "choices")
            if param.metavar is None and not flag and not choice:  # a choice shows its choices
                param.metavar = metavar_of(param)
            if getattr(param, "param_type_name", "") == "argument":
                param.get_help_record = _name_only(param.get_help_record)

    def collect_usage_pieces(self, ctx):
        """`hoh build [OPTIONS] SPEC`, not typer's `{SPEC}`."""
        return [piece[1:-1] if piece.startswith("{") and piece.endswith("}") else piece
                for piece in super().collect_usage_pieces(ctx)]

    def parse_args(self, ctx, args):
        try:
            return super().parse_args(ctx, args)
        except Exception as err:
            if hasattr(err, "ctx") and err.ctx is None and hasattr(err, "show"):
                err.ctx = ctx
            raise
