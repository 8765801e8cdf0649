"""Which reader a path takes: by its name, or, for a folder, the first file of PICK that
is there (as repo2docker picks: a lock before the file it locks, an environment before
requirements), saying which one was read and which were passed over."""
from __future__ import annotations

from pathlib import Path

from ..core import record
from ..core.errors import InputError
from .model import Intake, show

PICK = ("pylock.toml", "uv.lock", "environment.yml", "environment.yaml", "requirements.txt",
        "pyproject.toml", "setup.cfg", "setup.py")


def kind_of(path: Path) -> str | None:
    name = path.name.lower()
    if name in ("uv.lock", "pyproject.toml", "setup.py", "setup.cfg"):
        return name
    if name == "pylock.toml" or (name.startswith("pylock.") and name.endswith(".toml")):
        return "pylock.toml"
    if name.endswith((".yml", ".yaml")):
        return "environment.yml"
    if name.endswith((".txt", ".in")) or "requirements" in name:
        return "requirements"
    return None


def _inside(path: Path, root: Path) -> None:
    """The file read is the project's own: a link to a file outside its folder (/etc/passwd,
    a CI runner's secrets) is refused before a line of it could be echoed."""
    try:
        real = path.resolve(strict=True)
    except (OSError, RuntimeError) as e:   # a loop of links
        raise InputError(f"cannot be read ({getattr(e, 'strerror', None) or e})",
                         file=str(path)) from None
    if not real.is_relative_to(root):
        raise InputError(f"is a link to a file outside the project folder {root}; envgen "
                         f"reads the project's own files only", file=str(path))


def read(path: Path, extras=(), groups=()) -> Intake:
    from .conda import read_environment
    from .pyproject import read_pylock, read_pyproject, read_uv_lock
    from .requirements import read_requirements
    from .setuppy import read_setup_cfg, read_setup_py
    note = None
    if path.is_dir():
        found = [n for n in PICK if (path / n).is_file()]
        if not found:
            raise InputError(f"holds none of {', '.join(PICK)}; name the file with --from",
                             file=str(path))
        note = f"{path}: read {found[0]}" + (
            f" (also there, passed over: {', '.join(found[1:])})" if found[1:] else "")
        root, path = path.resolve(), path / found[0]
    elif not path.exists():
        raise InputError(f"--from {show(str(path))}: no such file or folder")
    else:
        root = path.parent.resolve()
    _inside(path, root)
    kind = kind_of(path)
    if kind is None:
        raise InputError(f"is not a kind of file envgen reads ({', '.join(PICK)}, or a "
                         f"requirements *.txt)", file=str(path))
    if (extras or groups) and kind not in ("pyproject.toml", "setup.py", "setup.cfg"):
        raise InputError(f"--extra and --group choose parts of a pyproject.toml, setup.py or "
                         f"setup.cfg; {path.name} has none", file=str(path))
    if groups and kind != "pyproject.toml":
        raise InputError("--group names a PEP 735 dependency group of a pyproject.toml",
                         file=str(path))
    readers = {"requirements": lambda p: read_requirements(p, root), "uv.lock": read_uv_lock,
               "pylock.toml": read_pylock, "environment.yml": read_environment,
               "pyproject.toml": lambda p: read_pyproject(p, extras, groups),
               "setup.py": lambda p: read_setup_py(p, extras),
               "setup.cfg": lambda p: read_setup_cfg(p, extras)}
    got = readers[kind](path)
    if not got.requirements:
        raise InputError(f"names no requirement ({got.kind})", file=str(path))
    return record.replace(got, notes=((note,) if note else ()) + got.notes)
