"""Make .nemo/nemo-files.tar.xz, the files bench/gpu/nemo.sh carries to the lent GPU machine:
the distributions nemo-toolkit[asr] adds over that host's own install, as one xz tarball.

    python bench/gpu/nemo_pack.py bench/gpu/host/h200-freeze-2026-12-03.txt

1. `uv pip compile` of the requirement for the host's Python with the host's `pip freeze` as
   its preferences (uv keeps a pin of an existing output file where the requirement admits
   it), so NeMo is resolved over the versions the host already has;
2. every pin that is not the host's own version is fetched with `pip download --no-deps`
   (wheels for the host's Python and platform; a distribution that publishes none, such as
   antlr4-python3-runtime, as its sdist);
3. each wheel is rewritten ZIP_STORED (xz then compresses across the whole tarball: 36 MB of
   wheels became 24.5 MB on 2026-12-02) and the lot packed with `xz -9e`.
The compile's output and the file list are written beside the tarball, so a run can be
compared with the one the certificate records (its log's "Would install" line)."""
from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from envgen.core.errors import EnvironmentMissing
from envgen.core.model import canonical_name
from envgen.resolve.closure import uv_binary

ROOT = Path(__file__).resolve().parents[2]
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;#]+)")


def pins(text: str) -> dict[str, str]:
    return {canonical_name(m[1]): m[2]
            for line in text.splitlines() if (m := PIN.match(line.strip()))}


def compile_over(freeze: Path, requirement: str, python: str, out: Path) -> dict[str, str]:
    """The closure of the requirement, preferring the host's versions."""
    shutil.copyfile(freeze, out)  # uv reads an existing output file as its preferences
    req = out.with_name("requirement.in")
    req.write_text(requirement + "\n")
    try:
        uv = uv_binary()
    except EnvironmentMissing as e:
        sys.exit(f"nemo_pack: {e}")
    subprocess.run([uv, "pip", "compile", str(req), "-o", str(out), "--python-version", python,
                    "--python-platform", "x86_64-manylinux_2_28", "--no-header", "--quiet"],
                   check=True)
    return pins(out.read_text())


def fetch(name: str, version: str, python: str, dest: Path) -> None:
    base = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--dest", str(dest),
            f"{name}=={version}"]
    wheel = base + ["--only-binary=:all:", "--python-version", python,
                    "--platform", "manylinux_2_28_x86_64", "--platform", "manylinux2014_x86_64",
                    "--platform", "any"]
    if subprocess.run(wheel, capture_output=True).returncode != 0:
        subprocess.run(base + ["--no-binary=:all:"], check=True)  # no wheel: its sdist


def stored(wheel: Path) -> None:
    """Rewrite a wheel uncompressed; its RECORD hashes are of the members, not the archive."""
    tmp = wheel.with_suffix(".tmp")
    with zipfile.ZipFile(wheel) as src, zipfile.ZipFile(tmp, "w", zipfile.ZIP_STORED) as dst:
        for info in src.infolist():
            data = src.read(info)  # before the type changes: read() decompresses by it
            info.compress_type = zipfile.ZIP_STORED
            dst.writestr(info, data)
    tmp.replace(wheel)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("freeze", type=Path, help="the host's `pip freeze`")
    ap.add_argument("--requirement", default="nemo-toolkit[asr]==3.0.0")
    ap.add_argument("--python", default="3.12", help="the host's Python (3.12.3 on the H200)")
    ap.add_argument("-o", "--out", type=Path, default=ROOT / ".nemo" / "nemo-files.tar.xz")
    a = ap.parse_args(argv)
    host = pins(a.freeze.read_text())
    a.out.parent.mkdir(parents=True, exist_ok=True)
    closure = compile_over(a.freeze, a.requirement, a.python,
                           a.out.with_name("nemo-compiled.txt"))
    extra = {n: v for n, v in sorted(closure.items()) if host.get(n) != v}
    with tempfile.TemporaryDirectory() as tmp:
        files = Path(tmp) / "files"
        files.mkdir()
        for name, version in extra.items():
            fetch(name, version, a.python, files)
        raw = sum(f.stat().st_size for f in files.iterdir())
        for wheel in files.glob("*.whl"):
            stored(wheel)
        names = sorted(f.name for f in files.iterdir())
        subprocess.run(["tar", "-C", str(files), "-cf", str(a.out.with_suffix("")), *names],
                       check=True)
        subprocess.run(["xz", "-9e", "-f", "-T1", str(a.out.with_suffix(""))], check=True)
    a.out.with_name("nemo-files.txt").write_text("\n".join(names) + "\n")
    capped = ", ".join(f"{n} {extra[n]}" for n in ("lightning", "fsspec", "packaging")
                       if n in extra)
    print(f"{len(extra)} distributions over the host ({capped}); "
          f"{raw / 1e6:.1f} MB of files -> {a.out.stat().st_size / 1e6:.1f} MB {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
