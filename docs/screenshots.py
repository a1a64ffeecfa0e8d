"""Remake the README's screenshots of the two HTML reports (needs `pip install -e '.[test]'`, Chromium,
and for the benchmark Harbor with a Docker engine, as the Harbor tests find them: tests/harbor_env.py).

    python docs/screenshots.py

Builds the demo (3 loops, then 1 more) and runs the example benchmark on Docker with Harbor's oracle
and the scripted agent (2 loops) in a temporary directory, writes both reports, and saves the top of
each page, resized and palette-reduced, as docs/workspace-report.png and docs/bench-report.png.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from PIL import Image
from playwright.sync_api import sync_playwright

REPO = Path(__file__).resolve().parents[1]
ARGS = ["--no-sandbox", "--disable-background-networking", "--disable-component-update", "--disable-sync",
        "--no-first-run", "--disable-gpu"]
WIDTH = 1000


def hoh(*args: object, python: str = sys.executable) -> None:
    subprocess.run([python, "-m", "hoh", *map(str, args)], check=True, cwd=REPO, stdout=subprocess.DEVNULL)


def harbor_python() -> str:
    """The Python of Harbor's venv (Harbor needs >= 3.12): `hoh bench run` drives Harbor from there."""
    harbor = Path(os.environ.get("HOH_HARBOR") or REPO / ".venv-harbor" / "bin" / "harbor")
    return str(harbor.parent / "python")


def shoot(page, html: Path, out: Path, height: int) -> None:
    page.goto(html.as_uri(), wait_until="load")
    raw = out.with_suffix(".raw.png")
    page.screenshot(path=str(raw), clip={"x": 0, "y": 0, "width": 1240, "height": height})
    image = Image.open(raw).convert("RGB")
    image = image.resize((WIDTH, round(image.height * WIDTH / image.width)), Image.LANCZOS)
    image.quantize(colors=256, method=Image.Quantize.FASTOCTREE).save(out, optimize=True)
    raw.unlink()
    print(f"{out.relative_to(REPO)}: {out.stat().st_size:,} bytes")


def main() -> None:
    tmp = Path(tempfile.mkdtemp(prefix="hoh-shots-"))
    try:
        ws = tmp / "demo-ws"
        hoh("build", "examples/demo/spec.md", "--harness", "scripted", "--loops", "3", "-w", ws, "-q")
        hoh("resume", "-w", ws, "--loops", "1", "-q")
        hoh("report", "-w", ws, "-o", tmp / "workspace.html")
        for name, extra in (("oracle", []), ("scripted", ["--loops", "2"])):
            hoh("bench", "run", "benchmarks/examples", "--harness", name, *extra, "--env", "docker", "-o", tmp / name,
                "-q", python=harbor_python())
        hoh("bench", "report", tmp / "oracle", "--html", "--compare", tmp / "scripted", "-o", tmp / "bench.html")
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=shutil.which("chromium"), args=ARGS)
            page = browser.new_page(viewport={"width": 1240, "height": 900})
            shoot(page, tmp / "workspace.html", REPO / "docs" / "workspace-report.png", 1080)
            shoot(page, tmp / "bench.html", REPO / "docs" / "bench-report.png", 1150)
            browser.close()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
