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


# ---- values that need no pydantic ---------------------------------------------------------------------------
# Recent typer releases coerce every option's value through a pydantic TypeAdapter, built when the command
# runs: importing pydantic and building the adapters is most of what a read-only command costs (`hoh show`,
# and `hoh status` in the forms `entry.py` leaves to typer, such as -v or --log-file). A plain value (a
# path or string as given, a count, a flag, an option not given) comes out of that adapter as it went in, so it
# is taken as it is; anything
# else (a number to parse, a choice, a path typer must check) goes through typer's own coercion. A typer
# without these internals is left as it is.
def _install_plain_values() -> None:
    try:
        from typer._coercion import RuntimeParam, build_runtime_param
        from typer.core import _TyperParameter
    except ImportError:
        return
    original = getattr(_TyperParameter, "get_runtime_param", None)
    if original is None or not hasattr(RuntimeParam, "_coerce_value"):
        return

    class PlainValue(RuntimeParam):
        def _coerce_value(self, value, param, ctx):
            info, kind = self.parameter_info, self.annotation
            if kind is str and isinstance(value, str) or kind in (int, bool) and type(value) is kind:
                return value
            if kind is Path and isinstance(value, (str, Path)) and _plain_path(value, info):
                return Path(value)
            param._runtime_param = build_runtime_param(param.type_descriptor)
            return param._runtime_param._coerce_value(value, param, ctx)

    def get_runtime_param(self):
        if getattr(self, "_runtime_param", None) is None and _plain_kind(self):
            self._runtime_param = PlainValue(parameter_info=self.type_descriptor.parameter_info,
                                             annotation=self.type_descriptor.annotation)
        return original(self)

    _TyperParameter.get_runtime_param = get_runtime_param


def _plain_kind(param) -> bool:
    described = getattr(param, "type_descriptor", None)
    info = getattr(described, "parameter_info", None)
    if info is None or getattr(described, "file_annotation", None) is not None or getattr(info, "parser", None) \
            or getattr(info, "click_type", None) or param.multiple or param.nargs != 1:
        return False
    if described.annotation is int:
        return getattr(info, "min", None) is None and getattr(info, "max", None) is None
    return described.annotation in (str, Path, bool)


def _plain_path(value, info) -> bool:
    """A path typer would pass as it is: no checks asked for but readability, and it is readable or absent."""
    defaults = (getattr(info, "path_type", None) is None and not getattr(info, "exists", False)
                and not getattr(info, "resolve_path", False) and not getattr(info, "writable", False)
                and not getattr(info, "allow_dash", False) and getattr(info, "file_okay", True)
                and getattr(info, "dir_okay", True))
    if not defaults:
        return False
    import os
    try:
        os.stat(value)
    except OSError:
        return True  # typer's own check passes a path it cannot stat
    except ValueError:
        return False  # an embedded NUL: typer decides
    return not getattr(info, "readable", True) or os.access(value, os.R_OK)


_install_plain_values()
