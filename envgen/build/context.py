"""Write a build context (rendered files plus the smoke payload) into a folder, atomically."""
from __future__ import annotations

import contextlib
import os
import shutil
import stat
import tempfile
from pathlib import Path

from ..core.errors import InputError
from ..core.model import Closure, Stack
from ..render import render_texts
from ..smoke import SMOKE_DIR, payload_files

EXECUTABLE = {"base/build-base.sh"}


def _copy_archives(stack: Stack, closure: Closure, into: Path) -> bool:
    """The held sdists the builder stages build, into project-archives/: from the project's
    requirement lines when the stack has them (envgen.yaml), else found by the closure's
    pins under ENVGEN_HOME (a stack read back from a lock); one this machine has not kept
    is refused, naming what to do."""
    from ..resolve.held import held_sdist, kept_bytes
    if stack.project.requirements:
        from ..resolve.project import copy_archives
        return copy_archives(stack.project, into)
    wanted = [p for p in closure.pins if held_sdist(p)]
    for pin in wanted:
        data = kept_bytes(pin)
        if data is None:
            raise InputError(f"{pin.name} {pin.version} is built from {pin.file} "
                             f"({pin.note}), which this machine does not hold: run `envgen "
                             f"init --from` or `envgen build` in the project's folder first")
        into.mkdir(parents=True, exist_ok=True)
        (into / pin.file).write_bytes(data)
    return bool(wanted)


def payload_path(stack: Stack) -> Path:
    return SMOKE_DIR / f"{stack.smoke}_smoke.py"


def write_context(stack: Stack, closure: Closure, out: Path, base_ref: str | None = None,
                  buildkit: bool = True) -> list[Path]:
    """Render into `out`. A file already there with the same bytes and mode is left as it is;
    any other is written beside its place and renamed over it, so no reader sees half a
    file. A folder of the context (base/, install/, project/) ends up holding only what this
    render wrote. Every file gets mode 0644 (0755 for the base script). A written file's
    mtime is the time of writing on purpose: BuildKit sends a context file again only when
    its size or mtime changed, so a fixed mtime would let a same-size edit (one sha256 for
    another) reach the build as the old bytes; a file left alone keeps its bytes, so its
    old mtime is right too. Layers do not depend on these mtimes: the build copies the
    files and stamps the copies."""
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise InputError(f"-o {out}: exists and is not a folder")
    try:
        texts = render_texts(stack, closure, base_ref, buildkit)
    except ValueError as e:  # a quoting filter refused a value
        raise InputError(f"cannot render {stack.stack}: {e}") from e
    payload = payload_path(stack)
    if not payload.is_file():
        raise InputError(f"no smoke payload {payload.name} for framework {stack.framework}")
    for name in payload_files(stack.smoke):
        texts[name] = (SMOKE_DIR / name).read_text()
    # the topmost folder this render makes: one that fails leaves nothing behind
    made = next((p for p in (*reversed(out.absolute().parents), out.absolute())
                 if not p.exists()), None)
    out.mkdir(parents=True, exist_ok=True)
    try:
        return _write(stack, closure, out, texts)
    except BaseException:
        if made is not None:
            shutil.rmtree(made, ignore_errors=True)
        raise


def _write(stack: Stack, closure: Closure, out: Path, texts: dict[str, str]) -> list[Path]:
    """write_context's files into `out`, which exists."""
    wanted = {rel: (text.encode(), 0o755 if rel in EXECUTABLE else 0o644)
              for rel, text in texts.items()}
    if stack.project is not None and stack.project.requirements:
        from ..render.views import PROJECT_DIR
        from ..resolve.project import wheel_files
        for wheel in wheel_files(stack.project):   # the project layer installs them from here
            wanted[f"install/{PROJECT_DIR}/{wheel.name}"] = (wheel.read_bytes(), 0o644)
    for rel, (data, mode) in wanted.items():
        _put(out, rel, data, mode)
    tops = {rel.split("/", 1)[0] for rel in wanted}
    for top in tops:   # a folder of the context holds what this render wrote, no more
        if (out / top).is_dir() and not (out / top).is_symlink():
            _prune(out / top, top, wanted)
    if stack.project is not None and stack.project.files:
        _project_files(stack, out)
        tops.add("project")
    if stack.project is not None:
        if (out / "project-archives").is_dir():
            shutil.rmtree(out / "project-archives")
        if _copy_archives(stack, closure, out / "project-archives"):
            tops.add("project-archives")
    written = []
    for top in sorted(tops):
        target = out / top
        written += [target] if target.is_file() else sorted(
            p for p in target.rglob("*") if p.is_file())
    return written


def _put(out: Path, rel: str, data: bytes, mode: int) -> None:
    """out/rel holding `data` with `mode`: left alone when it already does."""
    target = out / rel
    _folders(out, rel)
    try:
        st = os.lstat(target)
    except FileNotFoundError:
        st = None
    if st is not None and stat.S_ISREG(st.st_mode):
        if st.st_size == len(data) and stat.S_IMODE(st.st_mode) == mode and \
                target.read_bytes() == data:
            return
    elif st is not None:   # a folder or a link where the file goes
        if stat.S_ISDIR(st.st_mode):
            shutil.rmtree(target)
        else:
            target.unlink()
    fd, tmp = tempfile.mkstemp(prefix=".envgen-render-", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            os.fchmod(f.fileno(), mode)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _folders(out: Path, rel: str) -> None:
    """The folders above out/rel, real folders of mode 0755 (a link or a file in the way
    is removed: nothing is written through a link)."""
    d = out
    for part in rel.split("/")[:-1]:
        d = d / part
        try:
            st = os.lstat(d)
        except FileNotFoundError:
            st = None
        if st is not None and not stat.S_ISDIR(st.st_mode):
            d.unlink()
            st = None
        if st is None:
            d.mkdir()
        if st is None or stat.S_IMODE(st.st_mode) != 0o755:
            d.chmod(0o755)


def _prune(folder: Path, rel: str, wanted: dict) -> None:
    """Remove what a folder of the context holds beyond `wanted` (an older render's)."""
    for entry in list(folder.iterdir()):
        path = f"{rel}/{entry.name}"
        if entry.is_dir() and not entry.is_symlink():
            if any(w.startswith(path + "/") for w in wanted):
                _prune(entry, path, wanted)
            else:
                shutil.rmtree(entry)
        elif path not in wanted:
            entry.unlink()


def _project_files(stack: Stack, out: Path) -> None:
    """A project's files, copied (and checked) into a folder beside out/project, then put in
    its place."""
    from ..resolve.project import copy_files
    stage = Path(tempfile.mkdtemp(prefix=".envgen-render-", dir=out))
    try:
        copy_files(stack.project, stage / "project")
        for d in [stage, *(p for p in stage.rglob("*") if p.is_dir())]:
            d.chmod(0o755)
        target = out / "project"
        if target.is_dir() and not target.is_symlink():
            shutil.rmtree(target)
        elif target.exists() or target.is_symlink():
            target.unlink()
        (stage / "project").replace(target)
    finally:
        shutil.rmtree(stage, ignore_errors=True)
