"""What a shared library says about its own build, read from its ELF sections (no readelf needed).

The doctor uses it on `_C`: the compiler (`.comment`), the C++ string ABI its symbols use (`.dynstr`),
and the torch library folder it was linked against (RUNPATH in `.dynamic`). Only 64-bit
little-endian ELF (x86-64, arm64 Linux) is read; anything else gives an empty answer.
"""
import struct
from typing import Dict, List, Optional

_DT_NEEDED, _DT_RPATH, _DT_RUNPATH = 1, 15, 29


def _sections(f) -> Dict[str, tuple]:
    """Section name -> (file offset, size)."""
    head = f.read(64)
    if len(head) < 64 or head[:4] != b"\x7fELF" or head[4] != 2 or head[5] != 1:
        return {}
    shoff, = struct.unpack_from("<Q", head, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", head, 0x3A)
    if not shoff or shentsize < 64 or shstrndx >= shnum:
        return {}
    f.seek(shoff)
    table = f.read(shentsize * shnum)
    headers = []
    for i in range(shnum):
        name, _type, _flags, _addr, offset, size = struct.unpack_from("<IIQQQQ", table, i * shentsize)
        headers.append((name, offset, size))
    _, names_off, names_size = headers[shstrndx]
    f.seek(names_off)
    names = f.read(names_size)
    out = {}
    for name, offset, size in headers:
        end = names.find(b"\0", name)
        out[names[name:end].decode("ascii", "replace")] = (offset, size)
    return out


def _read(f, where) -> bytes:
    f.seek(where[0])
    return f.read(where[1])


def _cstr(table: bytes, offset: int) -> str:
    end = table.find(b"\0", offset)
    return table[offset:end if end >= 0 else None].decode("utf-8", "replace")


def build_info(path: str) -> Dict[str, object]:
    """{"compiler", "cxx11_abi", "needed", "runpath"} for the library at `path` ({} if unreadable)."""
    try:
        with open(path, "rb") as f:
            sections = _sections(f)
            comment = _read(f, sections[".comment"]) if ".comment" in sections else b""
            dynstr = _read(f, sections[".dynstr"]) if ".dynstr" in sections else b""
            dynamic = _read(f, sections[".dynamic"]) if ".dynamic" in sections else b""
    except OSError:
        return {}
    if not sections:
        return {}
    # .comment: one NUL-terminated "GCC: (...) 12.2.0" / "clang version ..." per compiler that built a part.
    compilers = sorted({c.decode("utf-8", "replace") for c in comment.split(b"\0") if c.strip()})
    # std::string is std::__cxx11::basic_string under the new ABI and mangles as `Ss` under the old one.
    abi: Optional[bool] = True if b"__cxx11" in dynstr else (False if b"_ZNSs" in dynstr or b"_ZNKSs" in dynstr
                                                              else None)
    needed: List[str] = []
    runpath: List[str] = []
    for i in range(0, len(dynamic) - 15, 16):
        tag, value = struct.unpack_from("<qQ", dynamic, i)
        if tag == 0:
            break
        if tag == _DT_NEEDED:
            needed.append(_cstr(dynstr, value))
        elif tag in (_DT_RPATH, _DT_RUNPATH):
            runpath.extend(p for p in _cstr(dynstr, value).split(":") if p)
    return {"compiler": "; ".join(compilers) or None, "cxx11_abi": abi, "needed": needed, "runpath": runpath}
