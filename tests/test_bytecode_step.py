"""The pip steps' bytecode command (views.COMPILE), run for real in sh on a small venv: it
compiles exactly the files newer than the step's marker, as checked-hash .pyc that are the
same bytes on every run, replaces a timestamp .pyc Python wrote by itself, and a file that
does not compile does not fail the step."""
import os
import shutil
import subprocess
import sys
import time

import pytest

from envgen.render.views import COMPILE


def _step(venv, marker, path_first=None):
    path = f"{venv}/bin:/usr/bin:/bin"
    env = {"PATH": f"{path_first}:{path}" if path_first else path, "marker": str(marker)}
    r = subprocess.run(["sh", "-c", f'set -eu; marker="$marker"; {COMPILE}'],
                       capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    return r


@pytest.fixture
def venv(tmp_path):
    if shutil.which("sh") is None:
        pytest.skip("no sh")
    v = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(v)], check=True)
    return v


def test_the_step_compiles_only_its_own_files_reproducibly(venv, tmp_path):
    site = next(venv.glob("lib/python*/site-packages"))
    (site / "old.py").write_text("X = 1\n")            # a lower layer's file
    marker = tmp_path / "marker"
    time.sleep(0.05)
    marker.write_text("")
    time.sleep(0.05)
    pkg = site / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("from .mod import f\n")
    (pkg / "mod.py").write_text("def f():\n    return {'b', 'a', 'c'}, frozenset({3, 1})\n")
    (pkg / "py2.py").write_text("print 'python 2'\n")   # does not compile: no .pyc, no failure
    # a timestamp .pyc Python wrote by itself before the step
    subprocess.run([f"{venv}/bin/python", "-c", "import pkg.mod"], check=True, cwd=tmp_path)
    _step(venv, marker)
    cache = pkg / "__pycache__"
    tag = sys.implementation.cache_tag
    first = {p.name: p.read_bytes() for p in cache.iterdir()}
    assert sorted(first) == [f"__init__.{tag}.pyc", f"mod.{tag}.pyc"]
    for data in first.values():
        assert int.from_bytes(data[4:8], "little") == 0b11   # hash-based, checked
    assert not (site / "__pycache__").exists(), "the older file is not the step's"
    shutil.rmtree(cache)
    os.utime(pkg / "mod.py", (time.time() + 5, time.time() + 5))   # another build's time
    _step(venv, marker)
    assert {p.name: p.read_bytes() for p in cache.iterdir()} == first


def test_a_failing_file_listing_fails_the_step_and_no_list_is_left(venv, tmp_path):
    """No pipe hides the listing's failure (sh has no pipefail): a marker gone missing
    fails the step instead of compiling nothing; a good run leaves only the marker."""
    env = {"PATH": f"{venv}/bin:/usr/bin:/bin", "marker": str(tmp_path / "gone")}
    r = subprocess.run(["sh", "-c", f'set -eu; marker="$marker"; {COMPILE}'],
                       capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode != 0
    marker = tmp_path / "marker"
    marker.write_text("")
    _step(venv, marker)
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith("marker.")] == []


def test_the_shares_give_the_same_bytes_however_many_run_at_once(venv, tmp_path):
    """The shares run at most `nproc` at a time: one core or many, every .pyc is the same."""
    site = next(venv.glob("lib/python*/site-packages"))
    marker = tmp_path / "marker"
    marker.write_text("")
    time.sleep(0.05)
    pkg = site / "many"
    pkg.mkdir()
    for i in range(20):   # more files than shares, so each share holds several
        (pkg / f"m{i:02d}.py").write_text(f"S = {{'x{i}', 'y', 'z'}}\nT = ('a', 'b', {i})\n")
    seen = []
    for cores in ("1", "3", "16"):
        fake = tmp_path / f"bin{cores}"
        fake.mkdir()
        (fake / "nproc").write_text(f"#!/bin/sh\necho {cores}\n")
        (fake / "nproc").chmod(0o755)
        shutil.rmtree(pkg / "__pycache__", ignore_errors=True)
        _step(venv, marker, path_first=fake)
        seen.append({p.name: p.read_bytes() for p in (pkg / "__pycache__").iterdir()})
    assert len(seen[0]) == 20
    assert seen[0] == seen[1] == seen[2]
