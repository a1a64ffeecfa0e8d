"""`hoh view`: a live, read-only local web app over one or more workspaces.

    sources.py      which workspaces (a workspace, or a folder of them), each one's change stamp and read cache
    follow.py       the journal followed, each line read once: the attempt running now, the journal facts
    model.py        the pages' data from hoh's readers: the header (status + the attempt running now), loop pages,
                    a loop in full (the report's LoopModel, kept once sealed), the ledger a page at a time
    transcripts.py  a loop's attempts on disk and one attempt's transcript (`hoh.transcript`)
    files.py        workspace files served as text (no symlink, no way out), the candidate's diff from history.git
    app.py          the Starlette app: routes, the security headers, the Host check
    serve.py        the loopback socket and uvicorn
    templates/      jinja2 pages and fragments (autoescaped); static/ the page's CSS and script

Arrows: cli → view → {report.data, store, evidence, transcript}. Nothing here writes into a workspace.
"""
