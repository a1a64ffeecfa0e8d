"""Reading a report back: its ids, links, loop sections and the data beside each plot.

A workspace report is a main page and a folder of pages beside it (`hoh/report/pages.py`): `Page(main)`
reads the main page, `pages()` every page of its folder, `loop_sections()` each loop's own page."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from urllib.parse import unquote


class Page(HTMLParser):
    """Every element id, every href/src, and the <script>/<link> tags of one HTML file."""

    def __init__(self, path: Path):
        super().__init__()
        self.path = path
        self.text = path.read_text(encoding="utf-8")
        self.ids: dict[str, str] = {}
        self.hrefs: list[str] = []
        self.srcs: list[str] = []
        self.scripts: list[dict[str, str | None]] = []
        self.links: list[dict[str, str | None]] = []
        self.feed(self.text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if a.get("id"):
            assert a["id"] not in self.ids, f"duplicate id {a['id']}"
            self.ids[a["id"]] = tag
        if a.get("href"):
            self.hrefs.append(a["href"])
        if a.get("src"):
            self.srcs.append(a["src"])
        if tag == "script":
            self.scripts.append(a)
        if tag == "link":
            self.links.append(a)

    def plot_data(self) -> dict[str, Any]:
        found = re.findall(r'<script type="application/json" class="plot-data" id="data-([\w-]+)">(.*?)</script>',
                           self.text, re.S)
        return {name: json.loads(body) for name, body in found}

    def svg(self, plot: str) -> str:
        start = self.text.index(f'<figure class="plot" id="plot-{plot}">')
        return self.text[start:self.text.index("</svg>", start)]

    @property
    def folder(self) -> Path:
        return self.path.with_name(f"{self.path.stem}-pages")

    def pages(self) -> dict[str, "Page"]:
        """Every page in the report's folder, by file name."""
        return {p.name: Page(p) for p in sorted(self.folder.glob("*.html"))} if self.folder.is_dir() else {}

    def all_ids(self) -> dict[str, set[str]]:
        """Element id → the tags carrying it, over the main page and every page of its folder."""
        found: dict[str, set[str]] = {}
        for page in [self, *self.pages().values()]:
            for ident, tag in page.ids.items():
                found.setdefault(ident, set()).add(tag)
        return found

    def loop_sections(self) -> dict[int, str]:
        """Each loop's section, from its own page in the report's folder (or, in a one-file page, inline)."""
        parts = self.text.split('<details class="loop" id="loop-')[1:]
        found = {int(p[:p.index('"')]): p for p in parts}
        for path in sorted(self.folder.glob("loop-*.html")) if self.folder.is_dir() else []:
            found[int(path.stem.removeprefix("loop-"))] = path.read_text(encoding="utf-8")
        return found

    def local_files(self) -> list[Path]:
        """The files that relative links point to (anchors within the page and directories left out)."""
        out = []
        for href in self.hrefs:
            href = href.partition("#")[0]
            if not href or href.endswith("/"):
                continue
            out.append((self.path.parent / unquote(href)).resolve())
        return out

    def assert_links_resolve(self) -> None:
        """Every relative link of this page and of the pages of its folder names a file that exists, and an
        anchor in a page of the report names an element of that page."""
        pages = {p.path.resolve(): p for p in [self, *self.pages().values()]}
        for page in pages.values():
            for href in page.hrefs:
                target, _, anchor = href.partition("#")
                if target.endswith("/") or href.startswith(("http:", "https:")):
                    continue
                path = (page.path.parent / unquote(target)).resolve() if target else page.path.resolve()
                assert path.exists(), (page.path.name, href)
                if anchor and path in pages:
                    assert unquote(anchor) in pages[path].ids, (page.path.name, href)

    def assert_self_contained(self) -> None:
        """No fetched resource at all: no external script, stylesheet, image, font or URL."""
        assert all("src" not in s or s["src"] is None for s in self.scripts), self.scripts
        assert not [link for link in self.links if link.get("rel") == "stylesheet"]
        assert not self.srcs, self.srcs
        assert not re.search(r"(?:https?:)?//[\w.-]+\.\w+/", re.sub(r'xmlns(?::\w+)?="[^"]+"', "", self.text)), \
            "an absolute URL in the report"
        assert "@import" not in self.text and "url(http" not in self.text
