"""What a role gets back from its model upstream: never the key, in any spelling.

An upstream that echoes its request (plenty of APIs do, in their error bodies) sends the key back. The
proxy asks for `identity` encoding; a body that still comes compressed is decoded here first (gzip,
deflate, and br when a Brotli module is installed), and one in a coding that cannot be decoded is never
passed on (`Decoder` refuses it). The key is then masked at its own length (a Content-Length stays true)
in each of its spellings (`spellings`): as is, JSON-escaped, url-encoded, hex, and base64 — standard and
url-safe, at each of the three alignments the key can have inside a longer base64 text —, also where a
spelling is split across two reads (`Masker` holds back a tail that could begin one).
"""

from __future__ import annotations

import base64
import importlib
import json
import re
import zlib
from types import ModuleType
from typing import Iterable, Iterator
from urllib.parse import quote, quote_plus

MIN_SPELLING = 8
"""A shorter derived spelling (the core of a very short key's base64) would mask innocent text; the key itself is
masked whatever its length."""
MAX_PIECE = 64 * 1024
"""Decoded output is handed on at most this much at a time: a small compressed read may inflate a thousandfold."""
_PERCENT = re.compile(rb"%[0-9A-F]{2}")


class UnreadableCoding(ValueError):
    """A content coding the proxy cannot decode, so cannot mask the key in."""


class CorruptBody(ValueError):
    """A compressed body that does not decode."""


def spellings(secret: str | None) -> tuple[bytes, ...]:
    """Every spelling of `secret` an echo may carry, longest first; none for no secret."""
    if not secret:
        return ()
    raw = secret.encode()
    # Url-encoders differ in what they leave alone: "/" (Python's quote), JavaScript's !*'(), "+" for a space.
    urls = {quote(secret, safe=safe).encode() for safe in ("", "/", "!*'()")} | {quote_plus(secret).encode()}
    found = {raw, json.dumps(secret)[1:-1].encode(), raw.hex().encode(), raw.hex().upper().encode(), *urls,
             *(_PERCENT.sub(lambda m: m.group().lower(), url) for url in urls)}
    for offset in range(3):
        for encode in (base64.b64encode, base64.urlsafe_b64encode):
            text = encode(b"\0" * offset + raw)
            # Only the characters made of the secret's bits alone: those beside it depend on its neighbours.
            found.add(text[-(-8 * offset // 6):8 * (offset + len(raw)) // 6])
    kept = {s for s in found if len(s) >= MIN_SPELLING} | {raw}
    return tuple(sorted(kept, key=len, reverse=True))


def mask(data: bytes, patterns: Iterable[bytes]) -> bytes:
    """`data` with every pattern replaced by as many `*`."""
    for pattern in patterns:
        data = data.replace(pattern, b"*" * len(pattern))
    return data


def mask_text(text: str, patterns: tuple[bytes, ...]) -> str:
    """A header's name or value masked (http.client reads them as Latin-1, so that round trip is exact)."""
    return mask(text.encode("latin-1", "replace"), patterns).decode("latin-1") if patterns else text


class Masker:
    """The patterns masked in a byte stream, also across reads: a tail that could begin one is held back
    until the next read shows whether it does (at most the longest pattern less one byte)."""

    def __init__(self, patterns: tuple[bytes, ...]):
        self.patterns = patterns
        self.reach = max(map(len, patterns), default=1) - 1
        self.firsts = frozenset(p[0] for p in patterns)
        self.held = b""

    def feed(self, data: bytes) -> bytes:
        if not self.patterns:
            return data
        data = mask(self.held + data, self.patterns)
        cut = self._cut(data)
        self.held = data[cut:]
        return data[:cut]

    def flush(self) -> bytes:
        held, self.held = self.held, b""
        return held

    def _cut(self, data: bytes) -> int:
        """Where the longest tail of `data` that begins some pattern starts (len(data): none does)."""
        for start in range(max(0, len(data) - self.reach), len(data)):
            if data[start] in self.firsts and any(pattern.startswith(data[start:]) for pattern in self.patterns):
                return start
        return len(data)


def content_codings(values: Iterable[str]) -> list[str]:
    """A Content-Encoding header's codings in the order they were applied, `identity` left out."""
    codings = [c.strip().lower() for value in values for c in value.split(",")]
    return [c for c in codings if c and c != "identity"]


def _brotli() -> ModuleType | None:
    for name in ("brotli", "brotlicffi"):
        try:
            return importlib.import_module(name)
        except ImportError:
            continue
    return None


class _Inflate:
    """One gzip or deflate layer. `deflate` is meant to be zlib's format, but servers send raw deflate too:
    the first two bytes tell them apart."""

    def __init__(self, coding: str):
        self.gzip = coding in ("gzip", "x-gzip")
        self.start = b""
        self.inflater: "zlib._Decompress | None" = zlib.decompressobj(16 + zlib.MAX_WBITS) if self.gzip else None

    def feed(self, data: bytes) -> Iterator[bytes]:
        if self.inflater is None:
            self.start += data
            if len(self.start) < 2:
                return
            zlib_header = self.start[0] & 0x0F == 8 and int.from_bytes(self.start[:2], "big") % 31 == 0
            self.inflater = zlib.decompressobj(zlib.MAX_WBITS if zlib_header else -zlib.MAX_WBITS)
            data, self.start = self.start, b""
        while data:
            try:
                out = self.inflater.decompress(data, MAX_PIECE)
            except zlib.error as exc:
                raise CorruptBody(f"a corrupt {'gzip' if self.gzip else 'deflate'} body: {exc}") from None
            if out:
                yield out
            data = self.inflater.unconsumed_tail
            if self.inflater.eof and self.inflater.unused_data:
                if not self.gzip:
                    raise CorruptBody("bytes after the end of a deflate body")
                data = self.inflater.unused_data  # the next member of a multi-member gzip
                self.inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)

    def flush(self) -> Iterator[bytes]:
        if self.inflater is None:
            if self.start:
                raise CorruptBody("a deflate body of one byte")
            return
        if out := self.inflater.flush():
            yield out
        if not self.inflater.eof:
            raise CorruptBody(f"a {'gzip' if self.gzip else 'deflate'} body cut short")


class _Unbrotli:
    def __init__(self, module: ModuleType):
        self.module, self.decompressor = module, module.Decompressor()

    def feed(self, data: bytes) -> Iterator[bytes]:
        try:
            out = self.decompressor.process(data)
        except Exception as exc:  # noqa: BLE001 - brotli and brotlicffi raise their own error classes
            raise CorruptBody(f"a corrupt br body: {exc}") from None
        for start in range(0, len(out), MAX_PIECE):
            yield out[start:start + MAX_PIECE]

    def flush(self) -> Iterator[bytes]:
        finished = getattr(self.decompressor, "is_finished", None)
        if finished is not None and not finished():
            raise CorruptBody("a br body cut short")
        return iter(())


class Decoder:
    """A body's content codings undone as it streams, the last applied first. Raises `UnreadableCoding` when
    made for a coding it cannot undo, `CorruptBody` from `feed` or `flush` when the body does not decode."""

    def __init__(self, codings: list[str]):
        layers: list[_Inflate | _Unbrotli] = []
        for coding in reversed(codings):
            if coding in ("gzip", "x-gzip", "deflate"):
                layers.append(_Inflate(coding))
            elif coding == "br" and (module := _brotli()) is not None:
                layers.append(_Unbrotli(module))
            else:
                raise UnreadableCoding(coding)
        self.layers = layers

    def feed(self, data: bytes) -> Iterator[bytes]:
        return self._through(0, [data], flush=False)

    def flush(self) -> Iterator[bytes]:
        return self._through(0, [], flush=True)

    def _through(self, index: int, pieces: Iterable[bytes], flush: bool) -> Iterator[bytes]:
        if index == len(self.layers):
            yield from pieces
            return
        layer = self.layers[index]

        def out() -> Iterator[bytes]:
            for piece in pieces:
                yield from layer.feed(piece)
            if flush:
                yield from layer.flush()

        yield from self._through(index + 1, out(), flush)
