"""A project's pure-Python sdists build without Debian's compiler: which sdists hold a native
source, what the closure records of them (and refuses from a lock), and the builder stage's
apt list. Offline; tests/test_project_from_real.py builds both kinds for real (crcmod 1.7's
C extension with gcc, the git-dep project's pure package without)."""
from __future__ import annotations

import io
import tarfile
import zipfile
from pathlib import Path

import pytest

from envgen.core.errors import InputError
from envgen.core.model import Closure, Pin
from envgen.resolve.closure import parse_closure
from envgen.resolve.sdists import needs_compiler


def tar(path: Path, *members: str) -> Path:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as t:
        for name in members:
            info = tarfile.TarInfo(f"x-1.0/{name}")
            t.addfile(info, io.BytesIO(b""))
    path.write_bytes(buf.getvalue())
    return path


@pytest.mark.parametrize("members, native", [
    (("setup.py", "x/__init__.py", "PKG-INFO"), False),
    (("setup.py", "x/__init__.py", "x/_speed.c"), True),
    (("pyproject.toml", "src/lib.rs", "Cargo.toml"), True),
    (("setup.py", "x/_fast.pyx"), True),
    (("CMakeLists.txt", "x/__init__.py"), True),
])
def test_a_native_source_or_build_file_needs_the_compiler(tmp_path, members, native):
    assert needs_compiler(tar(tmp_path / "x-1.0.tar.gz", *members)) is native


def test_a_zip_sdist_is_read_and_an_unreadable_one_needs_the_compiler(tmp_path):
    z = tmp_path / "x-1.0.zip"
    with zipfile.ZipFile(z, "w") as f:
        f.writestr("x-1.0/setup.py", "")
    assert needs_compiler(z) is False
    bad = tmp_path / "y-1.0.tar.gz"
    bad.write_bytes(b"not an archive")
    assert needs_compiler(bad) is True


def closure_json(**extra) -> dict:
    c = Closure(key="f" * 64, inputs={"requirements": ["x"]}, created="2026-12-01T00:00:00Z",
                pins=(Pin("x", "1.0", file="x-1.0.tar.gz", sha256="a" * 64),))
    return {**c.to_json(), **extra}


def test_the_closure_records_pure_sdists_and_a_lock_cannot_name_a_stranger():
    c = parse_closure(closure_json(pure_sdists=["x"]), "envgen.lock")
    assert c.pure_sdists == ("x",) and c.to_json()["pure_sdists"] == ["x"]
    assert "pure_sdists" not in parse_closure(closure_json(), "c.json").to_json()
    for bad in (["y"], "x", [1]):
        with pytest.raises(InputError) as e:
            parse_closure(closure_json(pure_sdists=bad), "envgen.lock")
        assert "'pure_sdists' must name packages of the closure" in e.value.message


def _project_over_cu121(tools=()):
    """A project over pytorch-cu121 (a local Debian base) with one sdist, offline; `tools`,
    its build backends' pins (tests/test_sdist_build.py)."""
    from envgen.core.model import ProjectLayer
    from envgen.matrix.load import load_matrix
    from envgen.resolve.closure import closure_for
    from envgen.resolve.spec import parse_spec
    from envgen.resolve.stack import resolve
    m = load_matrix()
    plain = resolve(m, parse_spec("pytorch-cu121", m))
    base = closure_for(plain, resolve=False)[0]
    x = Pin("antlr4-python3-runtime", "4.9.3", file="antlr4-python3-runtime-4.9.3.tar.gz",
            sha256="a" * 64)
    st = plain.replace(packages=plain.packages + ((x.name, x.version),),
                       project=ProjectLayer(name="p", pip=((x.name, x.version),)))

    def closure(pure):
        return Closure(key=base.key, inputs=base.inputs, pins=base.pins + (x,),
                       created=base.created, stack=st.stack,
                       pure_sdists=(x.name,) if pure else (), sdist_build=tuple(tools))
    return st, closure


def test_the_builder_stage_of_pure_sdists_installs_no_compiler():
    """With the closure saying the sdist is pure, the builder stage on a local base runs no
    apt step and builds with the base's own pip wheel; without, apt installs gcc, g++ and
    the headers and pip runs from the stage's venv."""
    from envgen.core.model import LOCAL_BASE_PACKAGES
    from envgen.render.views import BASE_PIP, render_texts
    st, closure = _project_over_cu121()
    assert st.base.kind == "local"
    assert "python3-venv" in LOCAL_BASE_PACKAGES   # Debian's pip wheel, which BASE_PIP runs

    def stage(pure):
        df = render_texts(st, closure(pure))["Dockerfile"]
        return df[df.index("AS project-build"):df.index("\nFROM ", df.index("AS project-build"))]
    pure, native = stage(True), stage(False)
    assert "apt-get" not in pure and "venv /opt/build" not in pure
    assert f" && {BASE_PIP} wheel " in pure
    assert "--no-install-recommends gcc g++ python3-dev python3-venv" in native
    assert " && /opt/build/bin/pip wheel " in native
    # the sdists by name, not :all: (which reached the isolated build environment, where pip
    # then built setuptools from its own sdist: 12 s for one small sdist, 5 s without)
    for df in (pure, native):
        assert " --no-binary=antlr4-python3-runtime --use-pep517 " in df
        assert "--no-binary=:all:" not in df


def test_no_debian_mirror_is_asked_for_a_project_whose_sdists_are_all_pure(monkeypatch):
    """build_args asks for a mirror (a network probe) only when a step runs apt."""
    import envgen.build.base as base_mod
    from envgen.build.buildkit import build_args
    asked = []
    monkeypatch.setattr(base_mod, "choose_mirror",
                        lambda b: asked.append(b) or "https://mirror.invalid/debian")
    st, closure = _project_over_cu121()
    assert build_args(st, closure(True)) == {}
    assert asked == []
    assert build_args(st, closure(False)) == {
        "ENVGEN_DEBIAN_MIRROR": "https://mirror.invalid/debian"}
    assert len(asked) == 1


def test_a_mirror_is_asked_exactly_when_the_dockerfile_reads_one():
    """reads_debian_mirror agrees with the rendered Dockerfile: pure sdists alone declare no
    ENVGEN_DEBIAN_MIRROR, a native sdist's stage and a project's apt packages do."""
    from envgen.render.views import reads_debian_mirror, render_texts
    st, closure = _project_over_cu121()
    from envgen.core.model import ProjectLayer
    apt_only = st.plain().replace(project=ProjectLayer(name="p", apt=("libgomp1",)))
    plain = closure(False)
    plain = plain.__class__(key=plain.key, inputs=plain.inputs, pins=plain.pins[:-1],
                            created=plain.created, stack=apt_only.stack)
    for stack, c, reads in ((st, closure(True), False), (st, closure(False), True),
                            (apt_only, plain, True)):
        df = render_texts(stack, c)["Dockerfile"]
        assert ("ARG ENVGEN_DEBIAN_MIRROR=" in df) is reads
        assert reads_debian_mirror(stack, c) is reads
