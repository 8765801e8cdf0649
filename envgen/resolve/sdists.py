"""What a project's sdist needs to become a wheel: a C, C++, Cython, Fortran or Rust build
needs Debian's compiler in the builder stage; a pure-Python one needs only pip and the
backend pip fetches for it, so its stage skips the compiler (on this machine installing gcc,
g++ and the Python headers took 17.7 s of a 59 s project build: docs/benchmarks.md)."""
from __future__ import annotations

import tarfile
import zipfile
from pathlib import Path

# sources a compiler builds, and the build files of native builds
NATIVE_SUFFIXES = (".c", ".cc", ".cpp", ".cxx", ".c++", ".h", ".hpp", ".pyx", ".pxd",
                   ".f", ".f90", ".f95", ".cu", ".rs", ".go", ".m", ".mm", ".s", ".asm")
NATIVE_FILES = frozenset({"Cargo.toml", "CMakeLists.txt", "meson.build", "configure",
                          "Makefile", "setup.cfg.in"})


def names(path: Path) -> list[str] | None:
    """The member names of an sdist (.tar.gz, .zip), or None when it cannot be read."""
    try:
        if path.name.endswith(".zip"):
            with zipfile.ZipFile(path) as z:
                return z.namelist()
        with tarfile.open(path, "r:*") as t:
            return t.getnames()
    except (OSError, tarfile.TarError, zipfile.BadZipFile, EOFError):
        return None


def needs_compiler(path: Path) -> bool:
    """True unless the sdist holds no native source and no native build file: an archive
    that cannot be read needs the compiler (the safe side)."""
    members = names(path)
    if members is None:
        return True
    return any(n.lower().endswith(NATIVE_SUFFIXES) or n.rsplit("/", 1)[-1] in NATIVE_FILES
               for n in members)
