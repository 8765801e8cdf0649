"""Docker image → SIF: `docker save` of an envgen-built image, then `apptainer build` from
that archive, with the image's ID as one more label. The image's own labels (the stack,
the matrix and closure digests) come along into the SIF; its sha256 is what certifies it."""
from __future__ import annotations

import hashlib
import os
import shutil
import time
from pathlib import Path

from ..core import home as state
from ..core.errors import BuildFailed, EnvironmentMissing, InputError, shown
from . import apptainer
from .docker import inspect_target

# Written by envgen, not a template: three lines of fixed text and two checked values.
DEFINITION = """\
Bootstrap: docker-archive
From: image.tar

%labels
    io.envgen.image.id {image_id}
    io.envgen.sif.from {stack}
"""


def sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def check_output(out: str) -> Path:
    """The SIF's path, absolute (a name that starts with '-' never reaches a command line
    as an option), in a folder that exists, not over a folder, a device or a pipe."""
    p = Path(os.path.abspath(out))
    if p.is_dir():
        raise InputError(f"-o {shown(out)}: is a folder; name the SIF file to write")
    if p.exists() and not p.is_file():
        raise InputError(f"-o {shown(out)}: is not a regular file (a device, a pipe or a "
                         f"socket); name the SIF file to write")
    if not p.parent.is_dir():
        raise InputError(f"-o {shown(out)}: {shown(str(p.parent))} is not a folder")
    if not os.access(p.parent, os.W_OK):
        raise EnvironmentMissing(f"-o {shown(out)}: the folder {shown(str(p.parent))} is "
                                 f"not writable")
    return p


def _copy_in(built: Path, dest: Path) -> None:
    """`built` at `dest` by a copy beside it, then a rename; no part is left on failure."""
    part = dest.with_name(f".{dest.name}.part")
    try:
        shutil.copyfile(built, part)
        os.replace(part, dest)
    except BaseException:
        part.unlink(missing_ok=True)
        raise


COMPRESSIONS = ("gzip", "lz4", "zstd")   # gzip: what every kernel and squashfuse reads


def make_sif(c, ref: str, out: str, timeout: int = 1800, compression: str = "gzip",
             progress=None) -> dict:
    """Build the SIF of image `ref` at `out` (replaced only once the new one is whole)."""
    say = progress or (lambda _m: None)
    target = inspect_target(c, ref)
    dest = check_output(out)
    version = apptainer.version()
    started = time.monotonic()
    with state.scratch("sif") as tmp:
        work = Path(tmp)
        say(f"saving {target.image_id[:19]} ({target.stack.stack}) with docker save")
        try:
            with open(work / "image.tar", "wb") as f:
                for chunk in c.images.get(target.image_id).save(named=False):
                    f.write(chunk)
        except OSError as e:
            raise EnvironmentMissing(f"cannot write the image's archive in {tmp} "
                                     f"({e.strerror or e})") from None
        (work / "image.def").write_text(DEFINITION.format(image_id=target.image_id,
                                                          stack=target.stack.stack))
        say(f"building the SIF with apptainer {version} ({compression})")
        squash = [] if compression == "gzip" else ["--mksquashfs-args", f"-comp {compression}"]
        try:
            code, stdout, stderr = apptainer.run(
                ["build", "--force", *squash, "out.sif", "image.def"], timeout, binds=(tmp,),
                cwd=tmp)
        except TimeoutError:
            raise BuildFailed(f"apptainer build did not finish within {timeout} s") from None
        built = work / "out.sif"
        if code != 0 or not built.is_file():
            raise BuildFailed(f"apptainer build failed (exit {code}): "
                              f"{apptainer.last_line(stderr or stdout)}")
        digest = sha256_of(built)
        size = built.stat().st_size
        built.chmod(0o644)
        try:
            os.replace(built, dest)
        except OSError:   # another file system: copy beside the target, then rename
            _copy_in(built, dest)
    return {"sif": str(dest), "sha256": f"sha256:{digest}", "size_bytes": size,
            "image_id": target.image_id, "image_tags": sorted(target.tags),
            "stack": target.stack.stack, "apptainer": version, "compression": compression,
            "seconds": round(time.monotonic() - started, 2)}
