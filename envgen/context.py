"""Write a build context (rendered files plus the smoke payload) into a folder, atomically."""
from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from .errors import InputError
from .model import Closure, Stack
from .render import render_texts

from .smoke import SMOKE_DIR, payload_files
EXECUTABLE = {"base/build-base.sh"}


def payload_path(stack: Stack) -> Path:
    return SMOKE_DIR / f"{stack.smoke}_smoke.py"


def write_context(stack: Stack, closure: Closure, out: Path, base_ref: str | None = None,
                  buildkit: bool = True) -> list[Path]:
    """Render into `out`: staged in a sibling temp folder, then moved in entry by entry.
    Every file gets mode 0644 (0755 for the base script). Their mtimes stay the time of
    writing on purpose: BuildKit sends a context file again only when its size or mtime
    changed, so a fixed mtime would let a same-size edit (one sha256 for another) reach
    the build as the old bytes. Layers do not depend on these mtimes: the build copies
    the files and stamps the copies."""
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
    out.mkdir(parents=True, exist_ok=True)
    stage = Path(tempfile.mkdtemp(prefix=".envgen-render-", dir=out))
    try:
        for rel, text in texts.items():
            f = stage / rel
            f.parent.mkdir(parents=True, exist_ok=True)
            f.write_text(text)
            f.chmod(0o755 if rel in EXECUTABLE else 0o644)
        if stack.project is not None and stack.project.files:
            from .project import copy_files
            copy_files(stack.project, stage / "project")
        for d in [stage, *(p for p in stage.rglob("*") if p.is_dir())]:
            d.chmod(0o755)
        written = []
        for entry in sorted(stage.iterdir()):
            target = out / entry.name
            if target.is_dir() and not target.is_symlink():
                shutil.rmtree(target)
            elif target.exists() or target.is_symlink():
                target.unlink()
            entry.replace(target)
            written += [target] if target.is_file() else sorted(
                p for p in target.rglob("*") if p.is_file())
        return written
    finally:
        shutil.rmtree(stage, ignore_errors=True)
