"""Reading a report back: its ids, links, loop sections and the data beside each plot."""

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

    def loop_sections(self) -> dict[int, str]:
        parts = self.text.split('<details class="loop" id="loop-')[1:]
        return {int(p[:p.index('"')]): p for p in parts}

    def local_files(self) -> list[Path]:
        """The files that relative links point to (anchors and directories left out)."""
        out = []
        for href in self.hrefs:
            if href.startswith("#") or href.endswith("/"):
                continue
            out.append((self.path.parent / unquote(href)).resolve())
        return out

    def assert_self_contained(self) -> None:
        """No fetched resource at all: no external script, stylesheet, image, font or URL."""
        assert all("src" not in s or s["src"] is None for s in self.scripts), self.scripts
        assert not [link for link in self.links if link.get("rel") == "stylesheet"]
        assert not self.srcs, self.srcs
        assert not re.search(r"(?:https?:)?//[\w.-]+\.\w+/", re.sub(r'xmlns(?::\w+)?="[^"]+"', "", self.text)), \
            "an absolute URL in the report"
        assert "@import" not in self.text and "url(http" not in self.text
