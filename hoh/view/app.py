"""The view's web app (Starlette): server-rendered pages, fragments for live updates, files as text.

Routes, all GET, all read-only:

    /                                   the index: every workspace of the view
    /w/{ws}/                            a run: header + one page of loops (?page=N, newest first)
    /poll, /w/{ws}/poll                 the change stamp of every run, of one, as JSON and an ETag (304 when unchanged)
    /w/{ws}/part/header, part/loops     the fragments the page's script swaps in when the stamp moves
    /w/{ws}/ledger                      the issue ledger and the verified-behaviour register, with histories, a page of
                                        each (?issues=N, ?behaviours=N: 100 a page, newest first)
    /w/{ws}/loop/{t}                    one loop: plan, Developer report, checks, QA, evidence, attempts
    /w/{ws}/loop/{t}/diff               the candidate's diff against its parent
    /w/{ws}/loop/{t}/attempt/{ref}      one attempt's transcript (ref: `developer/attempt-1`, …)
    /w/{ws}/file/{path}                 a workspace file under state/ (or spec.md) as text/plain
    /static/{name}                      the page's own CSS and script

Every response carries a Content-Security-Policy that allows no inline script or style and nothing
from elsewhere, `nosniff`, and no referrer; only Host headers naming the loopback are answered (a DNS
rebinding page cannot read the view). Templates autoescape: what an agent wrote is text, never markup.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jinja2
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import FileResponse, HTMLResponse, JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..errors import HohError
from ..report.render import FILTERS
from . import files, model, transcripts
from .sources import Source

HERE = Path(__file__).resolve().parent
STATIC = {"view.css": "text/css; charset=utf-8", "view.js": "text/javascript; charset=utf-8",
          "favicon.svg": "image/svg+xml"}
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
       "base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
SECURITY_HEADERS = [(b"content-security-policy", CSP.encode()), (b"x-content-type-options", b"nosniff"),
                    (b"referrer-policy", b"no-referrer"), (b"x-frame-options", b"DENY"),
                    (b"cache-control", b"no-store")]
LOOPBACK_HOSTS = ["127.0.0.1", "localhost"]
UNREADABLE = (HohError, OSError, ValueError, KeyError, jinja2.UndefinedError)
"""What a workspace that is missing, half-written or not as hoh wrote it raises while a page is read and
rendered: the page then says why (`trouble.html.j2`) instead of failing."""


class SecurityHeaders:
    """Adds SECURITY_HEADERS to every response, errors and static files included."""

    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                names = {name for name, _ in SECURITY_HEADERS}
                message["headers"] = [h for h in message.get("headers", []) if h[0].lower() not in names] \
                    + SECURITY_HEADERS
            await send(message)
        await self.app(scope, receive, with_headers)


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(HERE / "templates"), autoescape=True,
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.filters.update(FILTERS)
    env.filters["diffstat"] = model.diffstat_line
    return env


class View:
    """The app's state: the workspaces shown and the templates; one method per route."""

    def __init__(self, roots: list[Path]):
        self.sources = [Source(i, root) for i, root in enumerate(roots)]
        self.env = _environment()

    # ---- helpers -------------------------------------------------------------------------------
    def render(self, name: str, status_code: int = 200, **context: Any) -> HTMLResponse:
        return HTMLResponse(self.env.get_template(name).render(sources=self.sources, **context),
                            status_code=status_code)

    def source(self, request: Request) -> Source:
        try:
            return self.sources[int(request.path_params["ws"])]
        except (ValueError, IndexError):
            raise LookupError("no such workspace in this view") from None

    def trouble(self, source: Source | None, err: Exception, status_code: int = 200) -> HTMLResponse:
        """A workspace that cannot be read (missing, half-written, corrupt) is a page saying why, not a crash;
        it reloads itself when the workspace changes (a run that was starting has written its files)."""
        return self.render("trouble.html.j2", status_code=status_code, source=source, error=str(err),
                           etag=source.etag() if source else "")

    # ---- pages ---------------------------------------------------------------------------------
    def index(self, request: Request) -> Response:
        etag = "~".join(source.etag() for source in self.sources)  # before reading: a change meanwhile shows next
        rows = []
        for source in self.sources:
            try:
                rows.append((source, model.header(source), None))
            except UNREADABLE as err:
                rows.append((source, None, str(err)))
        return self.render("index.html.j2", rows=rows, etag=etag)

    def run(self, request: Request) -> Response:
        source = self.source(request)
        page, etag = _int(request.query_params.get("page"), 1), source.etag()
        try:
            return self.render("run.html.j2", source=source, head=model.header(source),
                               loops=model.loop_page(source, page), etag=etag)
        except UNREADABLE as err:
            return self.trouble(source, err)

    def poll(self, request: Request) -> Response:
        """The stamp of what a page shows: the run (default), only its ledger (`scope=ledger`: the ledger page
        need not reload on every journal line), or the run and one attempt's stream (`attempt=t/ref`)."""
        source = self.source(request)
        if request.query_params.get("scope") == "ledger":
            etag = source.ledger_etag()
        else:
            etag = source.etag() + transcripts.stamp(source, request.query_params.get("attempt"))
        return _stamped(request, etag)

    def poll_all(self, request: Request) -> Response:
        return _stamped(request, "~".join(source.etag() for source in self.sources))

    def part_header(self, request: Request) -> Response:
        source = self.source(request)
        try:
            return self.render("_header.html.j2", source=source, head=model.header(source))
        except UNREADABLE as err:
            return self.trouble(source, err)

    def part_loops(self, request: Request) -> Response:
        source = self.source(request)
        try:
            return self.render("_loops.html.j2", source=source, head=model.header(source),
                               loops=model.loop_page(source, _int(request.query_params.get("page"), 1)))
        except UNREADABLE as err:
            return self.trouble(source, err)

    def ledger(self, request: Request) -> Response:
        source = self.source(request)
        etag = source.ledger_etag()
        try:
            q = request.query_params
            return self.render("ledger.html.j2", source=source, head=model.header(source),
                               ledger=model.ledger_page(source, _int(q.get("issues"), 1), _int(q.get("behaviours"), 1)),
                               ledger_href=model.ledger_href(source), shown=model.HISTORY_SHOWN, etag=etag)
        except UNREADABLE as err:
            return self.trouble(source, err)

    def loop(self, request: Request) -> Response:
        source = self.source(request)
        t, etag = _int(request.path_params["t"], 0), source.etag()
        try:
            detail = model.loop_detail(source, t)
            if detail is None:
                return self.trouble(source, LookupError(f"the journal has no loop {t}"), 404)
            return self.render("loop.html.j2", source=source, head=model.header(source), d=detail, lp=detail.loop,
                               attempts=transcripts.attempts(source, t), back=model.page_of(source, t),
                               behaviours=model.behaviours(source), ledger_href=model.ledger_href(source), etag=etag)
        except UNREADABLE as err:
            return self.trouble(source, err)

    def diff(self, request: Request) -> Response:
        source = self.source(request)
        t = _int(request.path_params["t"], 0)
        try:
            detail = model.loop_detail(source, t)
            if detail is None or detail.loop.candidate is None:
                return self.trouble(source, LookupError(f"loop {t} has no candidate yet: no diff"), 404)
            return self.render("diff.html.j2", source=source, lp=detail.loop,
                               diff=files.candidate_diff(source.paths, detail.loop.candidate.commit))
        except UNREADABLE as err:
            return self.trouble(source, err)

    def attempt(self, request: Request) -> Response:
        source = self.source(request)
        t, ref = _int(request.path_params["t"], 0), request.path_params["ref"]
        etag = source.etag() + transcripts.stamp(source, f"{t}/{ref}")
        try:
            shown = transcripts.transcript(source, t, ref)
            if shown is None:
                return self.trouble(source, LookupError(f"loop {t} has no attempt {ref}"), 404)
            return self.render("attempt.html.j2", source=source, t=t, ref=ref, shown=shown,
                               etag=etag)
        except UNREADABLE as err:
            return self.trouble(source, err)

    def file(self, request: Request) -> Response:
        source = self.source(request)
        try:
            rel = request.path_params["rel"]
            path = files.safe_file(source.root, rel)
            data, cut = files.read_capped(path, view_name=files.loops_view_name(source.root.resolve(), rel))
        except files.Refused as err:
            return Response(f"refused: {err}\n", status_code=404, media_type="text/plain; charset=utf-8")
        except OSError:
            return Response("refused: unreadable\n", status_code=404, media_type="text/plain; charset=utf-8")
        if cut:
            data += f"\n… cut at {files.MAX_FILE_BYTES:,} bytes by hoh view\n".encode()
        return Response(data, media_type="text/plain; charset=utf-8")

    def static(self, request: Request) -> Response:
        name = request.path_params["name"]
        if name not in STATIC:
            return Response("not found\n", status_code=404, media_type="text/plain; charset=utf-8")
        return FileResponse(HERE / "static" / name, media_type=STATIC[name])


def _stamped(request: Request, etag: str) -> Response:
    """The stamp as JSON, or 304 when the page already has it (what an idle page gets, every poll)."""
    quoted = f'"{etag}"'
    if request.headers.get("if-none-match") == quoted:
        return Response(status_code=304, headers={"etag": quoted})
    return JSONResponse({"etag": etag}, headers={"etag": quoted})


def _int(value: str | None, default: int) -> int:
    try:
        return int(value) if value is not None else default
    except ValueError:
        return default


def create_app(roots: list[Path], hosts: list[str] = ()) -> Starlette:
    """The view of the workspaces at `roots` (already found: `sources.find_workspaces`), answering requests
    addressed to the loopback names and `hosts` (the address it is bound to)."""
    view = View(roots)

    async def not_found(request: Request, exc: Exception) -> Response:
        return view.render("trouble.html.j2", status_code=404, source=None, error=str(exc) or "not found", etag="")

    routes = [
        Route("/", view.index), Route("/poll", view.poll_all), Route("/w/{ws}/", view.run), Route("/w/{ws}/poll", view.poll),
        Route("/w/{ws}/part/header", view.part_header), Route("/w/{ws}/part/loops", view.part_loops),
        Route("/w/{ws}/ledger", view.ledger), Route("/w/{ws}/loop/{t}", view.loop),
        Route("/w/{ws}/loop/{t}/diff", view.diff), Route("/w/{ws}/loop/{t}/attempt/{ref:path}", view.attempt),
        Route("/w/{ws}/file/{rel:path}", view.file), Route("/static/{name}", view.static),
    ]
    middleware = [Middleware(SecurityHeaders), Middleware(TrustedHostMiddleware, allowed_hosts=[*LOOPBACK_HOSTS, *hosts])]
    return Starlette(routes=routes, middleware=middleware, exception_handlers={LookupError: not_found, 404: not_found})
