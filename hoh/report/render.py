"""Render a model to self-contained HTML (jinja2 templates in `templates/`): a benchmark report as one file,
a workspace report as a main page and a folder of small pages beside it (`pages.py`).

Everything a page needs is inside it: CSS, the plots as SVG, a few lines of script for the
tables. Nothing is fetched when it is opened; links between the pages, and to attempt logs, are relative
paths (from the report's own folder to the workspace), so they work from `file://` as long as the report and
the workspace stay where they were. QA's evidence files are linked through the report's own text copies
(`rolefiles.py`): a role's file is never opened by the browser as a page.
"""

from __future__ import annotations

import datetime
import os
import re
from pathlib import Path

import jinja2
import markupsafe

from .. import __version__
from ..errors import UsageError
from ..fsutil import atomic_write_bytes, atomic_write_text
from .bench_model import BenchReport
from .data import RunModel
from .plots import ROLE_COLOURS, bench_plots, workspace_plots
from .rolefiles import FileCopy, copy_name

TEMPLATES = Path(__file__).resolve().parent / "templates"


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), autoescape=True,
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.filters.update(FILTERS)
    return env


def _inline_code(text: str) -> markupsafe.Markup:
    """Escape, then show Markdown `code` spans (as agents write them in plans and titles) as code."""
    escaped = str(markupsafe.escape(text))
    return markupsafe.Markup(re.sub(r"`([^`<>]+)`", r"<code>\1</code>", escaped))


def _num(value: int | float | None) -> str:
    return "–" if value is None else f"{value:,}"


def _usd(value: float | None) -> str:
    return "–" if value is None else f"${value:,.2f}" if value >= 0.01 or value == 0 else f"${value:.4f}"


def _secs(value: float | None) -> str:
    if value is None:
        return "–"
    if value < 120:
        return f"{value:.1f}s"
    minutes = value / 60
    return f"{minutes:.0f}m" if minutes < 120 else f"{minutes / 60:.1f}h"


def _when(value: float | None) -> str:
    """A journal time (epoch seconds) as UTC wall time: runs last days, and UTC reads the same anywhere."""
    import datetime

    if value is None:
        return "–"
    return datetime.datetime.fromtimestamp(value, datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def _score(value: float | None) -> str:
    return "–" if value is None else f"{value:.3f}"


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.0f}%"


FILTERS = {"num": _num, "usd": _usd, "secs": _secs, "when": _when, "score": _score, "pct": _pct, "md": _inline_code}
"""The templates' formatting filters (also `hoh view`'s, so both pages spell a figure alike)."""


def check_output(out: Path) -> Path:
    """The report's path: its folder must exist and the path must not be a directory."""
    out = out.expanduser().absolute()
    if out.is_dir():
        raise UsageError(f"-o {out} is a directory; name the HTML file to write, e.g. {out / 'report.html'}")
    if not out.parent.is_dir():
        raise UsageError(f"-o {out}: the folder {out.parent} does not exist; create it first")
    return out


def _stamp() -> str:
    now = datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z")
    return f"hoh {__version__} · {now}"


def workspace_pages(run: RunModel, out: Path) -> list[tuple[Path, "str | FileCopy"]]:
    """The workspace report's pages that are missing or stale (`pages.py`), rendered: (path, HTML) each, a
    loop's page after the copies of its evidence files (path, `FileCopy`), the main page at `out` last. Links are
    relative, to each other and to the workspace."""
    from .pages import Layout, Pages

    layout = Layout(out)
    layout.check()
    pages = Pages(run, layout)
    env, stamp = _environment(), _stamp()
    behaviours = {b["id"]: b for b in run.behaviours}
    common = {"run": run, "behaviours": behaviours, "roles": list(ROLE_COLOURS), "stamp": stamp}
    made = []
    for todo in pages.plan():
        context = {**common, **pages.context(todo)}
        if todo.name is None:
            context.update(plots=workspace_plots(run), page_title=f"{run.title} · hoh report")
            made.append((layout.main, env.get_template(todo.template).render(**context)))
        else:
            context["page_title"] = f"{todo.name.removesuffix('.html')} · {run.title} · hoh report"
            if (lp := todo.context.get("lp")) is not None:
                made += [(layout.folder / name, FileCopy(run.workspace / f.rel_path, f.rel_path))
                         for f in lp.evidence.values() if (name := copy_name(lp.loop, f.name)) is not None]
            made.append((layout.folder / todo.name, env.get_template(todo.template).render(**context)))
    return made


def bench_html(report: BenchReport) -> str:
    return _environment().get_template("bench.html.j2").render(
        report=report, plots=bench_plots(report), stamp=_stamp(), page_title=report.title)


def write(content: "str | FileCopy", out: Path) -> None:
    """Write the page (or a copy of a role's file) whole or not at all, readable as any file the user creates (a
    report is for sharing)."""
    try:
        if isinstance(content, FileCopy):
            atomic_write_bytes(out, content.read(), durable=False)
        else:
            atomic_write_text(out, content)
        mask = os.umask(0)
        os.umask(mask)
        os.chmod(out, 0o666 & ~mask)
    except OSError as err:
        raise UsageError(f"cannot write {out}: {err.strerror}") from None

