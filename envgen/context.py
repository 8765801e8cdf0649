"""Write a build context (rendered files plus the smoke payload) into a folder, atomically."""
from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from .errors import InputError
from .model import Stack
from .render import render_texts

SMOKE_DIR = Path(__file__).resolve().parent / "smoke"


def payload_path(stack: Stack) -> Path:
    return SMOKE_DIR / f"{stack.smoke}_smoke.py"


def write_context(stack: Stack, out: Path, base_ref: str | None = None,
                  buildkit: bool = True) -> list[Path]:
    """Render into `out`: staged in a sibling temp folder, then moved in file by file."""
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise InputError(f"-o {out}: exists and is not a folder")
    try:
        texts = render_texts(stack, base_ref, buildkit)
    except ValueError as e:  # a quoting filter refused a value
        raise InputError(f"cannot render {stack.stack}: {e}") from e
    payload = payload_path(stack)
    if not payload.is_file():
        raise InputError(f"no smoke payload {payload.name} for framework {stack.framework}")
    out.mkdir(parents=True, exist_ok=True)
    stage = Path(tempfile.mkdtemp(prefix=".envgen-render-", dir=out))
    try:
        for name, text in texts.items():
            (stage / name).write_text(text)
        shutil.copyfile(payload, stage / payload.name)
        written = []
        for f in sorted(stage.iterdir()):
            target = out / f.name
            f.replace(target)
            written.append(target)
        return written
    finally:
        shutil.rmtree(stage, ignore_errors=True)
