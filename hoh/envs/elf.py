"""What a native program built on this machine needs of the machine that runs it, read from its ELF headers.

hoh uploads harness programs (OpenCode's and Claude Code's binaries, a Node runtime) into environments it
did not build: before it copies hundreds of megabytes in, it checks the architecture and the C library
(glibc, and which version; or musl; or none, a static program) against the image's, so an image that cannot
run the program is told so in one line. Only the headers are read (no `ldd`, nothing of the file is run).
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass
from pathlib import Path

MACHINES = {62: "x86_64", 183: "aarch64"}
"""e_machine → `uname -m`'s name for it (the architectures Node and the harness CLIs ship for)."""
PT_INTERP = 3
SHT_GNU_VERNEED = 0x6FFFFFFE


@dataclass(frozen=True)
class ElfNeeds:
    machine: str
    libc: str
    """"glibc", "musl" or "static" (no program interpreter: runs on any Linux of its architecture)."""
    glibc: tuple[int, int] | None = None
    """The newest GLIBC_2.x symbol version it links against (the oldest glibc that runs it)."""

    def problem(self, machine: str, libc: str, glibc: tuple[int, int] | None) -> str | None:
        """Why an image with this architecture and C library cannot run the program, or None."""
        if machine != self.machine:
            return f"it is built for {self.machine} and the image is {machine}"
        if self.libc == "static":
            return None
        if libc != self.libc:
            return f"it needs {self.libc} and the image's C library is {libc}"
        if self.glibc and glibc and glibc < self.glibc:
            return (f"it needs glibc >= {self.glibc[0]}.{self.glibc[1]} and the image has "
                    f"{glibc[0]}.{glibc[1]}")
        return None


def is_elf(path: Path) -> bool:
    with open(path, "rb") as fh:
        return fh.read(4) == b"\x7fELF"


def read_needs(path: Path) -> ElfNeeds:
    """The program's architecture, C library and glibc version (ELF64 little-endian, what Linux x86_64 and
    aarch64 use). Raises ValueError for anything else."""
    with open(path, "rb") as fh:
        head = fh.read(64)
        if head[:4] != b"\x7fELF" or head[4] != 2 or head[5] != 1:
            raise ValueError(f"{path} is not a 64-bit little-endian ELF program")
        machine = struct.unpack_from("<H", head, 18)[0]
        phoff, shoff = struct.unpack_from("<QQ", head, 32)
        phentsize, phnum, shentsize, shnum = struct.unpack_from("<HHHH", head, 54)
        interp = None
        fh.seek(phoff)
        table = fh.read(phentsize * phnum)
        for i in range(phnum):
            kind, _flags, offset, _va, _pa, size = struct.unpack_from("<IIQQQQ", table, i * phentsize)
            if kind == PT_INTERP:
                fh.seek(offset)
                interp = fh.read(size).rstrip(b"\0").decode(errors="replace")
        glibc = _glibc_needed(fh, shoff, shentsize, shnum) if interp and "musl" not in interp else None
    libc = "static" if interp is None else "musl" if "musl" in interp else "glibc"
    return ElfNeeds(MACHINES.get(machine, f"e_machine {machine}"), libc, glibc)


def _glibc_needed(fh, shoff: int, shentsize: int, shnum: int) -> tuple[int, int] | None:
    """The newest GLIBC_2.x in the version-needs section (its names live in the string table it links to)."""
    fh.seek(shoff)
    sections = fh.read(shentsize * shnum)
    headers = [struct.unpack_from("<IIQQQQIIQQ", sections, i * shentsize) for i in range(shnum)]
    best: tuple[int, int] | None = None
    for _name, kind, _flags, _addr, offset, size, link, _info, _align, _entsize in headers:
        if kind != SHT_GNU_VERNEED or link >= len(headers):
            continue
        strtab = headers[link]
        fh.seek(strtab[4])
        names = fh.read(strtab[5])
        for match in re.finditer(rb"GLIBC_2\.(\d+)", names):
            found = (2, int(match[1]))
            best = found if best is None or found > best else best
    return best
