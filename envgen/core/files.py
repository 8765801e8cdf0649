"""Atomic file writes: a reader sees the old file or the new one, never half of one."""
from __future__ import annotations

import contextlib
import fcntl
import json
import os
import stat
from pathlib import Path

from .errors import EnvironmentMissing, InputError


def _token() -> str:
    """12 random hex digits for a temporary name (os.urandom: `secrets` costs a start 5 ms)."""
    return os.urandom(6).hex()

_TEMP_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)


def _create_beside(path: Path) -> tuple[int, Path]:
    """A new, empty file in path's folder, opened for writing. Created with mode 0666 so the
    kernel applies the umask (0644 under the usual 022), like any file `open()` makes;
    mkstemp's 0600 would leave locks and certificates unreadable to the rest of the team.
    O_EXCL keeps mkstemp's guarantee: never an existing file, never through a symlink."""
    for _ in range(100):
        tmp = path.with_name(f".{path.name}.{_token()}.tmp")
        try:
            return os.open(tmp, _TEMP_FLAGS, 0o666), tmp
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temporary name beside {path}")


def write_atomic(path: Path, text: str | bytes) -> Path:
    """Write `text` to a temporary file beside `path`, fsync it, then rename it over `path`:
    a reader sees the old file or the new one. A failed write leaves no temporary file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = text.encode() if isinstance(text, str) else text
    try:
        fd, tmp = _create_beside(path)
    except OSError as e:   # named by the file meant, not by the temporary one
        raise OSError(e.errno, e.strerror, str(path)) from None
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as e:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise OSError(e.errno, e.strerror, str(path)) from None
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    return path


_KINDS = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR,
          "a character device"), (stat.S_ISBLK, "a block device"), (stat.S_ISDIR, "a folder"))


def read_regular(path: Path, limit: int, what: str = "file") -> bytes:
    """The bytes of `path` when it is a regular file of at most `limit` bytes; else
    InputError naming the file. Opened without blocking and checked on the open descriptor,
    so a FIFO (or /dev/zero) never hangs or floods the reader; OSError passes through."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            kind = next((name for test, name in _KINDS if test(st.st_mode)), "not a file")
            raise InputError(f"the {what} is {kind}, not a regular file", file=str(path))
        if st.st_size > limit:
            raise InputError(f"the {what} is larger than {limit // 1024 // 1024 or 1} MiB"
                             if limit >= 1024 * 1024 else
                             f"the {what} is larger than {limit // 1024} KiB", file=str(path))
        chunks, total = [], 0
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
            total += len(chunk)
            if total > limit:   # it grew while being read
                raise InputError(f"the {what} grew past its size limit while being read",
                                 file=str(path))
        return b"".join(chunks)
    finally:
        os.close(fd)


def check_writable(folder: Path, what: str = "") -> Path:
    """`folder`, made and proven writable with a 4 KiB probe (room for a certificate or a
    log line, not only for a name) before any work starts; else EnvironmentMissing (exit 3)
    with the reason."""
    from .errors import EnvironmentMissing
    probe = folder / f".probe-{os.getpid()}"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        try:
            probe.write_bytes(b"x" * 4096)
        finally:   # a full disk fails the write after the file was made: remove it too
            with contextlib.suppress(OSError):
                probe.unlink()
    except OSError as e:
        raise EnvironmentMissing(f"cannot write {what + ' ' if what else ''}in {folder}: "
                                 f"{e.strerror or e}; set ENVGEN_HOME to a writable folder "
                                 f"with free space") from None
    return folder


def write_json(path: Path, obj) -> Path:
    return write_atomic(path, json.dumps(obj, indent=2, sort_keys=True) + "\n")


@contextlib.contextmanager
def locked(path: Path, on_wait=None):
    """An exclusive advisory lock beside `path`, so two envgen processes take turns;
    `on_wait()` is called once when another holds it (so a waiting run says why it waits)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(path.name + ".lock"), "a+") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if on_wait is not None:
                on_wait()
            fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


# What the system's refusal of a file operation says: a full disk or a folder envgen may not
# write is the host (exit 3); a path that cannot be one is the input (exit 2).
HOST_FAULTS = {"ENOSPC", "EDQUOT", "EACCES", "EPERM", "EROFS", "EIO", "EMFILE", "ENFILE"}
PATH_FAULTS = {"ENOENT", "ENOTDIR", "EISDIR", "ENAMETOOLONG", "EEXIST", "ELOOP", "EINVAL",
               "EXDEV"}


def fault_class(e: OSError) -> type[EnvironmentMissing] | type[InputError] | None:
    """EnvironmentMissing or InputError for an OSError of those kinds; None for any other."""
    import errno
    name = errno.errorcode.get(e.errno, "") if e.errno is not None else ""
    if name in HOST_FAULTS:
        return EnvironmentMissing
    if name in PATH_FAULTS:
        return InputError
    return None
