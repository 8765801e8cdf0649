"""The compiled-template cache: it makes no render differ, is used only while it is
private to its user, and an edited template is compiled afresh."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def render(home: Path, out: Path, env=None) -> str:
    r = subprocess.run([sys.executable, "-m", "envgen", "render", "pytorch-cu121", "-o",
                        str(out)], capture_output=True, text=True, cwd=ROOT, timeout=120,
                       env={**os.environ, "ENVGEN_HOME": str(home), **(env or {})})
    assert r.returncode == 0, r.stderr
    return (out / "Dockerfile").read_text()


def test_cached_and_uncached_renders_are_the_same(tmp_path):
    home = tmp_path / "home"
    first = render(home, tmp_path / "a")
    cached = list((home / "cache" / "templates").glob("__jinja2_*.cache"))
    assert cached, "the first render fills the cache"
    assert render(home, tmp_path / "b") == first
    assert render(home, tmp_path / "c", {"ENVGEN_NO_CACHE": "1"}) == first


def test_a_cache_others_can_write_is_not_read(tmp_path):
    home = tmp_path / "home"
    render(home, tmp_path / "a")
    folder = home / "cache" / "templates"
    for f in folder.glob("__jinja2_*.cache"):
        f.write_bytes(b"not bytecode")   # a torn or planted entry
        f.chmod(0o666)
    folder.chmod(0o777)
    try:
        assert render(home, tmp_path / "b") == render(tmp_path / "fresh", tmp_path / "c")
        assert all(f.read_bytes() == b"not bytecode" for f in folder.glob("__jinja2_*"))
    finally:
        folder.chmod(0o700)


def test_an_escaping_environment_never_loads_a_plain_compile(tmp_path):
    import jinja2

    from envgen.render.env import private_bytecode_cache
    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "x.j2").write_text("{{ v }}")
    cache = tmp_path / "c"
    cache.mkdir(mode=0o700)

    def env(escape: bool) -> jinja2.Environment:
        return jinja2.Environment(loader=jinja2.FileSystemLoader(str(tmp_path / "t")),
                                  bytecode_cache=private_bytecode_cache()(str(cache)),
                                  autoescape=escape)
    assert env(False).get_template("x.j2").render(v="<b>") == "<b>"
    assert env(True).get_template("x.j2").render(v="<b>") == "&lt;b&gt;"
