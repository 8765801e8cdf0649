"""The start-up budget of the commands people run in loops and shell prompts, guarded by
what a process imports rather than by its wall time (which a shared machine makes noisy):
a cached matrix is read without PyYAML or jsonschema, resolving without the resolver's
network and subprocess modules, and none of them pays for `dataclasses` (inspect, ast,
dis) or packaging.tags (logging, platform, subprocess). docs/benchmarks.md has the times."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# Never at the start of these commands (a package counts with all its submodules).
HEAVY = ("yaml", "jsonschema", "dataclasses", "packaging.tags", "packaging.utils",
         "subprocess", "socket", "ssl", "http", "email", "urllib.request", "concurrent",
         "logging", "asyncio")
NOT_FOR_RESOLVE = ("jinja2", "inspect", "envgen.resolve.closure", "envgen.render", "threading")

PROBE = """
import json, sys
from envgen.cli import main
sys.stdout = open("/dev/null", "w")
code = main(sys.argv[1:])
sys.stdout = sys.__stdout__
print(json.dumps({"code": code, "modules": sorted(sys.modules)}))
"""


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    """An ENVGEN_HOME whose matrix cache is warm (as after any first command)."""
    home = tmp_path_factory.mktemp("home")
    env = {**os.environ, "ENVGEN_HOME": str(home), "PYTHONPATH": str(ROOT)}
    env.pop("ENVGEN_NO_CACHE", None)
    subprocess.run([sys.executable, "-m", "envgen", "matrix", "validate"], env=env,
                   check=True, capture_output=True, timeout=120)
    return home


def modules(home: Path, *argv: str) -> set[str]:
    env = {**os.environ, "ENVGEN_HOME": str(home), "PYTHONPATH": str(ROOT),
           "ENVGEN_PROJECT": ""}
    env.pop("ENVGEN_NO_CACHE", None)
    r = subprocess.run([sys.executable, "-c", PROBE, *argv], env=env, capture_output=True,
                       text=True, timeout=120, cwd=home)
    assert r.returncode == 0, r.stderr[-2000:]
    doc = json.loads(r.stdout)
    assert doc["code"] == 0, argv
    return set(doc["modules"])


def loaded(mods: set[str], names) -> list[str]:
    return sorted(m for m in mods for n in names if m == n or m.startswith(n + "."))


def test_resolve_from_a_cached_matrix_imports_nothing_heavy(home):
    mods = modules(home, "resolve", "pytorch-cu121", "--json")
    assert "envgen.resolve.stack" in mods and "envgen.core.record" in mods
    assert loaded(mods, HEAVY + NOT_FOR_RESOLVE) == []


def test_matrix_validate_from_its_cache_imports_nothing_heavy(home):
    mods = modules(home, "matrix", "validate", "--json")
    assert loaded(mods, HEAVY + NOT_FOR_RESOLVE) == []


def test_render_imports_jinja_once_and_then_reads_its_texts_back(home, tmp_path):
    first = modules(home, "render", "pytorch-cu121", "-o", str(tmp_path / "ctx"))
    assert "jinja2" in first and "envgen.resolve.closure" in first
    assert loaded(first, HEAVY) == []
    again = modules(home, "render", "pytorch-cu121", "-o", str(tmp_path / "ctx2"))
    assert "envgen.render.cache" in again and loaded(again, ("jinja2", "markupsafe")) == []
    assert loaded(again, HEAVY) == []


def test_a_changed_matrix_is_validated_again_with_every_check(home, tmp_path):
    """The guard above is not bought by skipping checks: a matrix the cache has not seen is
    read with the YAML loader and checked against the schema."""
    m = tmp_path / "m"
    m.mkdir()
    for f in (ROOT / "matrices").glob("*.yaml"):
        (m / f.name).write_bytes(f.read_bytes())
    mods = modules(home, "--matrix", str(m), "matrix", "validate")
    assert loaded(mods, ("yaml", "envgen.matrix.schema")) != []
