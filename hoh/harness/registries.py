"""The package registries this machine's pip, npm and apt are configured for: the hosts a jailed
Developer may reach through hoh's egress by default (`sandbox.allow_hosts.developer`).

Read from each client's own configuration and defaults (pip's settings and its built-in index,
`npm config get registry`, apt's source lists), never from a list of hoh's, so the Developer gets
exactly the mirrors this machine uses.
"""

from __future__ import annotations

import os
import re
import shutil
from configparser import ConfigParser, Error as ConfigError
from functools import cache
from pathlib import Path
from typing import Callable
from urllib.parse import urlsplit, urlunsplit

from .process import call, inherited

PIP_FILES = (Path("/etc/pip.conf"), Path("/etc/xdg/pip/pip.conf"), Path("~/.pip/pip.conf"),
             Path("~/.config/pip/pip.conf"))
APT_SOURCES = Path("/etc/apt/sources.list")


def _host(url: str) -> str | None:
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return None  # file:// indexes and local paths need no network
    return parts.hostname if parts.port is None else f"{parts.hostname}:{parts.port}"


def pip_hosts() -> set[str]:
    urls: list[str] = []
    for var in ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL"):
        urls += os.environ.get(var, "").split()
    index_set = bool(os.environ.get("PIP_INDEX_URL"))
    for path in PIP_FILES:
        parser = ConfigParser()
        try:
            parser.read(path.expanduser())
        except (ConfigError, UnicodeDecodeError):  # a file pip itself would refuse
            continue
        for section in parser.sections():
            for key in ("index-url", "extra-index-url"):
                if value := parser.get(section, key, fallback=None):
                    urls += value.split()
                    index_set |= key == "index-url"
    hosts = {h for h in map(_host, urls) if h}
    if not index_set:
        hosts |= _pip_defaults()
    return hosts


def _pip_defaults() -> set[str]:
    """pip's own index and the host its files come from, as pip itself names them."""
    try:
        from pip._internal.models.index import PyPI  # noqa: PLC0415 - pip's constants, not its API
    except ImportError:
        return set()
    return {h for h in (_host(PyPI.url), PyPI.file_storage_domain) if h}


NPM_SETTINGS = ("PATH", "HOME", "USER", "LANG", "TMPDIR", "NODE_EXTRA_CA_CERTS", "SSL_CERT_FILE", "SSL_CERT_DIR",
                "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy")


NPM_KEYS = ("registry", "cafile")


def npm_env() -> dict[str, str]:
    """What this machine's npm reads of the user's environment (its config, registry, proxy and certificates),
    and nothing else: no key of hoh's reaches npm or a package's install script."""
    return inherited(*NPM_SETTINGS, prefixes=("npm_config_", "NPM_CONFIG_"))


PIP_SETTINGS = {"index-url": "PIP_INDEX_URL", "extra-index-url": "PIP_EXTRA_INDEX_URL",
                "trusted-host": "PIP_TRUSTED_HOST", "cert": "PIP_CERT"}
"""pip's settings a jailed role gets from this machine's pip.conf, which its jail does not show (`jail_etc`)."""
PIP_SECTIONS = ("global", "install")
"""pip reads [global], then the command's own section over it."""


def _without_credentials(url: str) -> str | None:
    """The URL without the user and password in it, nor its query (index credentials stay outside the jail); None
    for one that is not a plain http(s) URL. A token in the URL's path cannot be told from a name: it stays."""
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return None
    host = parts.hostname if ":" not in parts.hostname else f"[{parts.hostname}]"
    netloc = host if parts.port is None else f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def client_settings(shown: Callable[[Path], bool]) -> dict[str, str]:
    """What this machine's pip and npm are configured with, as the variables they read, for a jail that shows
    neither pip.conf nor npmrc (`jail_etc`: those files can hold credentials): the indexes and the registry
    without their user and password, pip's trusted hosts, and the CA files a TLS-inspecting network needs,
    where `shown(path)` says the jail shows them. The user's own PIP_* settings win, as they would for pip."""
    pip: dict[str, str] = {}
    for path in PIP_FILES:  # later files win, as in pip
        parser = ConfigParser(interpolation=None)
        try:
            parser.read(path.expanduser())
        except (ConfigError, UnicodeDecodeError):  # a file pip itself would refuse
            continue
        for section in (s for s in PIP_SECTIONS if parser.has_section(s)):
            pip.update({key: value for key in PIP_SETTINGS if (value := parser.get(section, key, fallback=None))})
    pip.update({key: value for key, var in PIP_SETTINGS.items() if (value := os.environ.get(var))})
    settings: dict[str, str] = {}
    for key, value in pip.items():
        if key == "cert":
            if shown(Path(value.strip())):
                settings[PIP_SETTINGS[key]] = value.strip()
        elif key == "trusted-host":
            settings[PIP_SETTINGS[key]] = " ".join(value.split())
        elif urls := [u for u in map(_without_credentials, value.split()) if u]:
            settings[PIP_SETTINGS[key]] = " ".join(urls)
    npm = _npm_config()
    if registry := _without_credentials(npm.get("registry", "")):
        settings["npm_config_registry"] = registry
    if (cafile := npm.get("cafile", "")) and shown(Path(cafile)):
        settings["npm_config_cafile"] = settings["NODE_EXTRA_CA_CERTS"] = cafile
    return settings


def npm_hosts() -> set[str]:
    host = _host(_npm_config().get("registry", ""))
    return {host} if host else set()


@cache
def _npm_config() -> dict[str, str]:
    """npm's registry and CA file as this machine's npm reads them ({} without npm)."""
    if (npm := shutil.which("npm")) is None:
        return {}
    try:
        # From /, not hoh's cwd: a project's own .npmrc (a role can write one) must not choose the registry.
        result = call([npm, "config", "get", *NPM_KEYS], cwd=Path("/"), env=npm_env(), timeout=30)
    except OSError:
        return {}
    lines = result.stdout.decode(errors="replace").splitlines() if result.ok else []
    found = dict(line.split("=", 1) for line in lines if "=" in line)  # `key=value`, one line a key
    return {key: value.strip() for key, value in found.items() if key in NPM_KEYS and value.strip() not in ("", "null")}


def apt_hosts() -> set[str]:
    parts = APT_SOURCES.parent / "sources.list.d"  # apt reads only these names (not *.disabled, *.save)
    files = [APT_SOURCES, *sorted(parts.glob("*.list")), *sorted(parts.glob("*.sources"))]
    hosts: set[str] = set()
    for path in files:
        try:
            text = path.read_text(errors="replace")
        except OSError:
            continue
        for line in text.splitlines():
            line = line.split("#", 1)[0].strip()
            if line.startswith(("deb ", "deb-src ")):
                words = [w for w in re.sub(r"\[[^]]*\]", " ", line).split()[1:] if "://" in w]
                hosts |= {h for h in map(_host, words[:1]) if h}
            elif line.lower().startswith("uris:"):
                hosts |= {h for h in map(_host, line[5:].split()) if h}
    return hosts


@cache
def registry_hosts() -> tuple[str, ...]:
    """Every registry host of pip, npm and apt here, sorted."""
    return tuple(sorted(pip_hosts() | npm_hosts() | apt_hosts()))
