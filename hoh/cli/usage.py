"""Usage errors that always show the command's usage line.

Click raises a few parser errors without their context (an option given no value: `hoh status -w`),
and then prints no usage line. Every hoh command uses this class, which hands the context over.
Only typer's public API is used: recent typer releases vendor click, so click may not be installed.
"""

from __future__ import annotations

from typer.core import TyperCommand


class UsageCommand(TyperCommand):
    def parse_args(self, ctx, args):
        try:
            return super().parse_args(ctx, args)
        except Exception as err:
            if hasattr(err, "ctx") and err.ctx is None and hasattr(err, "show"):
                err.ctx = ctx
            raise
