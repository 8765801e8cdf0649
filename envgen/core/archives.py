"""What reading a zip or tar archive from outside (an sdist, a wheel, a git archive) can
raise besides a clean answer: a damaged deflate, xz or bz2 stream, a truncated file, a
member stored with a method Python does not decompress, an encrypted member. A reader that
catches these turns a hostile archive into its reason instead of a traceback."""
from __future__ import annotations

import lzma
import tarfile
import zipfile
import zlib

# damaged contents, whatever carried the bytes
CONTENT_ERRORS: tuple[type[BaseException], ...] = (
    EOFError, ValueError, tarfile.TarError, zipfile.BadZipFile, zlib.error, lzma.LZMAError,
    NotImplementedError,   # a zip member's compression method
    RuntimeError,          # an encrypted zip member
)
# and a file on this machine, or in memory: gzip.BadGzipFile and bz2's errors are OSError
ARCHIVE_ERRORS = (OSError, *CONTENT_ERRORS)
# the most members envgen lists in one archive (an sdist: DeepSpeed's has about 1,300); a
# small compressed file can hold millions of empty ones
MAX_MEMBERS = 50_000
