"""Which GPUs a CUDA library has code for, read from the library itself: the SASS (cubins)
and PTX in the `.nv_fatbin` section of an ELF shared object, as nvcc writes it. No GPU, no
CUDA toolkit: the fatbin's entry headers name each entry's kind and architecture.

    library_archs(path) -> {"fatbins": 444, "build": 385, "sass": ["7.5", ...], "ptx": [],
                            "partial": ["8.9", ...]}

nvcc writes one fatbin per compilation unit. The library's own architecture list (PyTorch's
TORCH_CUDA_ARCH_LIST) is the set the largest group of its fatbins shares (`build` of them):
a few units are built for one architecture only (kernels dispatched on that GPU alone), and
a statically linked library (NCCL) keeps its own list. Architectures outside that set that
some fatbins carry are `partial`: the library as a whole is not built for them. The layout
(a 16-byte header with magic 0xBA55ED50, then entries whose header gives kind at 0, header
size at 4, payload size at 8 and the SM number at 28) is the one tools that list fatbins
read; tests/test_fatbin.py checks the result against the TORCH_CUDA_ARCH_LIST rows read
from PyTorch's build scripts (envgen/refresh/pytorch_wheel_archs.yaml)."""
from __future__ import annotations

import mmap
import re
import struct
from collections import Counter
from pathlib import Path

MAGIC = 0xBA55ED50
KIND_PTX, KIND_SASS = 1, 2
CC = re.compile(r"([0-9]{1,3})\.([0-9]{1,3})")
SECTION = ".nv_fatbin"


class FatbinError(ValueError):
    """A file that is not the ELF or the fatbin it claims to be; the message names where."""


def _section(buf, name: str) -> tuple[int, int] | None:
    """(offset, size) of the named section of a little-endian ELF64 file, or None."""
    if len(buf) < 64 or buf[:4] != b"\x7fELF":
        raise FatbinError("not an ELF file")
    if buf[4] != 2 or buf[5] != 1:
        raise FatbinError("not a little-endian 64-bit ELF file")
    shoff, = struct.unpack_from("<Q", buf, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", buf, 0x3A)
    if shentsize < 64 or shstrndx >= shnum or shoff + shentsize * shnum > len(buf):
        raise FatbinError(f"its section headers (at byte {shoff}) lie outside the file")

    def header(i):
        name_at, _, _, _, off, size = struct.unpack_from("<IIQQQQ", buf, shoff + i * shentsize)
        return name_at, off, size

    _, str_off, str_size = header(shstrndx)
    if str_off + str_size > len(buf):
        raise FatbinError("its section names lie outside the file")
    for i in range(shnum):
        name_at, off, size = header(i)
        end = buf.find(b"\0", str_off + name_at, str_off + str_size)
        if name_at >= str_size or end < 0:
            raise FatbinError(f"section {i} has a name outside the names table")
        if bytes(buf[str_off + name_at:end]) == name.encode():
            if off + size > len(buf):
                raise FatbinError(f"section {name} (bytes {off} to {off + size}) lies "
                                  f"outside the file")
            return off, size
    return None


def scan(buf, start: int = 0, end: int | None = None) -> list[frozenset]:
    """The {(kind, sm)} set of each fatbin in buf[start:end] (each starts 8-byte aligned
    from the section's start; the padding before it is skipped)."""
    end = len(buf) if end is None else end
    out: list[frozenset] = []
    pos = start
    while pos + 16 <= end:
        magic, _version, hsize, fsize = struct.unpack_from("<IHHQ", buf, pos)
        if magic != MAGIC:
            pos += 8
            continue
        body, stop = pos + hsize, pos + hsize + fsize
        if hsize < 16 or stop > end:
            raise FatbinError(f"the fatbin at byte {pos} runs past its section")
        kinds = set()
        e = body
        while e < stop:
            if e + 32 > stop:
                raise FatbinError(f"an entry header at byte {e} runs past its fatbin")
            kind, _, ehsize, psize = struct.unpack_from("<HHIQ", buf, e)
            sm, = struct.unpack_from("<I", buf, e + 28)
            if ehsize < 32 or e + ehsize + psize > stop:
                raise FatbinError(f"the entry at byte {e} runs past its fatbin")
            kinds.add((kind, sm))
            e += ehsize + psize
        out.append(frozenset(kinds))
        pos = start + (stop - start + 7) // 8 * 8   # a fatbin of 83 bytes: the next at 88
    return out


def cc(sm: int) -> str:
    """SM number -> compute capability: 75 -> "7.5", 100 -> "10.0", 121 -> "12.1"."""
    return f"{sm // 10}.{sm % 10}"


def runs_on(gpu_cc: str, sass: list[str], ptx: list[str]) -> bool:
    """Whether code built for `sass` and `ptx` runs on a GPU of compute capability `gpu_cc`
    (CUDA's rule: SASS of the same major and a minor no higher, or PTX of a capability no
    higher, which the driver compiles at load)."""
    def key(v: str) -> tuple[int, int]:
        m = CC.fullmatch(str(v))
        if m is None:
            raise ValueError(f"{v!r} is not a compute capability (MAJOR.MINOR)")
        return int(m.group(1)), int(m.group(2))
    major, minor = key(gpu_cc)
    return any(a == major and b <= minor for a, b in map(key, sass)) or \
        any(key(p) <= (major, minor) for p in ptx)


def summarize(sets: list[frozenset]) -> dict:
    """sass/ptx: the set the largest group of fatbins shares (`build` of them; on a tie, the
    larger set); partial: what other fatbins carry outside it."""
    groups = Counter(s for s in sets if s)
    if not groups:
        return {"fatbins": len(sets), "build": 0, "sass": [], "ptx": [], "partial": []}
    top, n = max(groups.items(), key=lambda kv: (kv[1], len(kv[0]), sorted(kv[0])))
    sass = {sm for k, sm in top if k == KIND_SASS}
    ptx = {sm for k, sm in top if k == KIND_PTX}
    other = {sm for s in sets for _, sm in s} - sass - ptx
    return {"fatbins": len(sets), "build": n, "sass": [cc(x) for x in sorted(sass)],
            "ptx": [cc(x) for x in sorted(ptx)], "partial": [cc(x) for x in sorted(other)]}


def library_archs(path: Path) -> dict:
    """The architectures a shared library has GPU code for (see the module's text); a
    library without a `.nv_fatbin` section has none (fatbins 0)."""
    with open(path, "rb") as f:
        try:
            buf = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        except ValueError:   # an empty file cannot be mapped
            raise FatbinError(f"{path}: not an ELF file") from None
        with buf:
            try:
                where = _section(buf, SECTION)
                if where is None:
                    return summarize([])
                return summarize(scan(buf, where[0], where[0] + where[1]))
            except (FatbinError, struct.error) as e:
                raise FatbinError(f"{path}: {e}") from None
