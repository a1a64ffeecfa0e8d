"""A simulated remote sandbox: Harbor's Docker environment behind a fixed latency per call and a bandwidth cap,
standing in for a cloud provider reached over the internet (`--env remote_sim:RemoteSandbox`, with this
directory on PYTHONPATH). `HOH_SIM_LATENCY` (seconds per call, default 0.05) and `HOH_SIM_MBIT` (default 100)
set them; every exec, upload and download pays the latency, and a copy its bytes at the cap."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from harbor.environments.docker.docker import DockerEnvironment


def _latency() -> float:
    return float(os.environ.get("HOH_SIM_LATENCY", "0.05"))


def _seconds_for(path: Path) -> float:
    size = path.stat().st_size if path.is_file() else sum(
        p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())
    return size * 8 / (float(os.environ.get("HOH_SIM_MBIT", "100")) * 1e6)


class RemoteSandbox(DockerEnvironment):
    async def exec(self, command, *args, **kwargs):  # type: ignore[override]
        await asyncio.sleep(_latency())
        return await super().exec(command, *args, **kwargs)

    async def upload_dir(self, source_dir, target_dir):  # type: ignore[override]
        await asyncio.sleep(_latency() + _seconds_for(Path(source_dir)))
        await super().upload_dir(source_dir, target_dir)

    async def upload_file(self, source_path, target_path):  # type: ignore[override]
        await asyncio.sleep(_latency() + _seconds_for(Path(source_path)))
        await super().upload_file(source_path, target_path)

    async def download_dir(self, source_dir, target_dir):  # type: ignore[override]
        await super().download_dir(source_dir, target_dir)
        await asyncio.sleep(_latency() + _seconds_for(Path(target_dir)))

    async def download_file(self, source_path, target_path):  # type: ignore[override]
        await super().download_file(source_path, target_path)
        await asyncio.sleep(_latency() + _seconds_for(Path(target_path)))
