"""A damaged or hostile archive (an sdist a team pins by URL, a git archive, an index's file)
is a reason, never a traceback: every reader of sdists and wheels catches what Python's zip,
tar, gzip, xz and zlib raise for bad bytes (core.archives). Offline."""
from __future__ import annotations

import io
import struct
import tarfile
import zipfile
from pathlib import Path

import pytest

from envgen.core.archives import ARCHIVE_ERRORS
from envgen.core.model import Pin
from envgen.resolve import kernels, sdists

PYPROJECT = b"[build-system]\nrequires = ['setuptools']\n" + b"# long enough to compress\n" * 40
SETUP = b"from torch.utils.cpp_extension import CUDAExtension\n" * 40


def _zip(method=zipfile.ZIP_DEFLATED) -> bytearray:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", method) as z:
        z.writestr("x-1.0/pyproject.toml", PYPROJECT)
        z.writestr("x-1.0/setup.py", SETUP)
    return bytearray(buf.getvalue())


def _tar(mode: str) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode=mode) as t:
        for name, data in (("x-1.0/pyproject.toml", PYPROJECT), ("x-1.0/setup.py", SETUP)):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _flip(data, start: int, count: int = 40) -> bytes:
    out = bytearray(data)
    for i in range(start, min(start + count, len(out))):
        out[i] ^= 0x5A
    return bytes(out)


def _damaged_deflate() -> bytes:   # the names read, the member's stream does not
    b = _zip()
    at = b.find(b"x-1.0/pyproject.toml") + len("x-1.0/pyproject.toml")
    return _flip(b, at + 4)


def _method(method: int, flags: int = 0) -> bytes:
    """A stored zip whose headers claim compression `method` (99: one Python cannot read)
    or `flags` (1: encrypted)."""
    b = _zip(zipfile.ZIP_STORED)
    b[6:8], b[8:10] = struct.pack("<H", flags), struct.pack("<H", method)
    at = 0
    while (at := b.find(b"PK\x01\x02", at)) >= 0:
        b[at + 8:at + 10], b[at + 10:at + 12] = struct.pack("<H", flags), struct.pack("<H", method)
        at += 4
    return bytes(b)


CASES = {
    "deflate.zip": _damaged_deflate,
    "method.zip": lambda: _method(99),
    "encrypted.zip": lambda: _method(0, flags=1),
    "gzip.tar.gz": lambda: _flip(_tar("w:gz"), 30),
    "truncated.tar.gz": lambda: _tar("w:gz")[:200],
    "xz.tar.xz": lambda: _flip(_tar("w:xz"), 60),
    "bz2.tar.bz2": lambda: _flip(_tar("w:bz2"), 40),
    "empty.tar.gz": lambda: b"",
}


@pytest.fixture(params=sorted(CASES))
def damaged(request, tmp_path) -> Path:
    path = tmp_path / f"x-1.0-{request.param}"
    path.write_bytes(CASES[request.param]())
    return path


def test_a_damaged_sdist_gives_its_reason_to_the_builder_stage_and_no_traceback(damaged):
    assert sdists.members(damaged, lambda n: True) is None
    assert sdists.build_requires(damaged) == f"{damaged.name} cannot be read as an archive"
    names = sdists.names(damaged)
    # names alone may still read (a zip's central directory is whole); then the sources
    # decide, and an unreadable archive needs the compiler (the safe side)
    assert sdists.needs_compiler(damaged) is (names is None or any(
        n.endswith(".c") for n in names))


def test_a_damaged_sdist_is_no_kernel_and_says_nothing_of_its_requirements(damaged):
    assert kernels.builds_against_torch(damaged) is False
    assert kernels.requires_dist(damaged) is None
    assert kernels.cu_files(damaged) == 0
    pin = Pin("x", "1.0", file=damaged.name, sha256="a" * 64)
    assert kernels.kernel_sdists([pin], {"x": damaged}) == []


def test_the_same_archives_whole_are_read():
    """The damage, not the archive kinds, is what the readers refuse."""
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        for name, data in (("x-1.0.zip", bytes(_zip())), ("x-1.0.tar.gz", _tar("w:gz")),
                           ("x-1.0.tar.xz", _tar("w:xz"))):
            path = Path(d) / name
            path.write_bytes(data)
            assert sdists.build_requires(path) == ("setuptools", "wheel")
            assert kernels.builds_against_torch(path) is True


def test_reading_an_sdists_modules_raises_only_what_its_caller_turns_into_a_guess(damaged):
    """intake.modules.modules() catches ARCHIVE_ERRORS and guesses the module from the
    name, with a note; nothing else may escape from a hostile archive."""
    from envgen.intake.modules import modules_of_archive
    data = damaged.read_bytes()
    try:
        modules_of_archive(data, damaged.name.endswith(".zip"), "x")
    except ARCHIVE_ERRORS:
        pass


def test_a_top_level_txt_that_is_a_link_reads_empty_instead_of_failing():
    from envgen.intake.modules import modules_of_archive
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as t:
        link = tarfile.TarInfo("x-1.0/x.egg-info/top_level.txt")
        link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
        t.addfile(link)
        init = tarfile.TarInfo("x-1.0/x/__init__.py")
        t.addfile(init, io.BytesIO(b""))
    assert modules_of_archive(buf.getvalue(), False, "x") == []


@pytest.mark.parametrize("name", ["gzip.tar.gz", "truncated.tar.gz", "empty.tar.gz"])
def test_the_refresh_reader_of_an_sdists_pkg_info_refuses_a_damaged_one(name):
    from envgen.refresh.pypi import Refused, pkg_info
    with pytest.raises(Refused) as e:
        pkg_info(CASES[name](), f"x-1.0-{name}")
    assert "not a readable sdist" in e.value.message
