"""A project's sdists build with backends pinned by hash: what each sdist's [build-system]
asks for, how the closure records the resolved wheels (and refuses them from a lock), the
builder stage that installs them with --require-hashes and builds without isolation, and
the rendered fallback for a closure written before they were pinned. Offline;
tests/test_project_from_real.py builds real sdists through this stage (crcmod's C
extension, the git-dep project's pure package)."""
from __future__ import annotations

import io
import tarfile
import zipfile
from pathlib import Path

import pytest

from envgen.core.errors import EnvironmentMissing, InputError
from envgen.core.model import Closure, Pin
from envgen.resolve.closure import parse_closure
from envgen.resolve.sdists import DEFAULT_BUILD_REQUIRES, build_requires


def sdist(path: Path, files: dict[str, str]) -> Path:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as t:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(f"x-1.0/{name}")
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
    path.write_bytes(buf.getvalue())
    return path


@pytest.mark.parametrize("files, wanted", [
    ({"setup.py": ""}, DEFAULT_BUILD_REQUIRES),
    ({"pyproject.toml": "[tool.black]\nline-length = 99\n"}, DEFAULT_BUILD_REQUIRES),
    ({"pyproject.toml": '[build-system]\nrequires = ["hatchling>=1.20"]\n'
                        'build-backend = "hatchling.build"\n'}, ("hatchling>=1.20",)),
    # setuptools before 70.1 asks for wheel at build time, which no isolation installs
    ({"pyproject.toml": '[build-system]\nrequires = ["setuptools>=61"]\n'},
     ("setuptools>=61", "wheel")),
    ({"pyproject.toml": '[build-system]\nrequires = ["setuptools", "wheel>=0.40",'
                        ' "cython; python_version < \'3.12\'"]\n'},
     ("setuptools", "wheel>=0.40", 'cython; python_version < "3.12"')),
    # a subfolder's pyproject.toml is not the sdist's own
    ({"setup.py": "", "docs/pyproject.toml": '[build-system]\nrequires = ["sphinx"]\n'},
     DEFAULT_BUILD_REQUIRES),
])
def test_an_sdists_build_requirements_are_read_from_its_own_pyproject(tmp_path, files, wanted):
    assert build_requires(sdist(tmp_path / "x-1.0.tar.gz", files)) == tuple(wanted)


@pytest.mark.parametrize("text, why", [
    ("[build-system\nrequires = 1", "is not valid TOML"),
    ('[build-system]\nbuild-backend = "x"\n', "is not a list of"),
    ('[build-system]\nrequires = "setuptools"\n', "is not a list of"),
    ('[build-system]\nrequires = ["set tools!!"]\n', "is not valid"),
    ('[build-system]\nrequires = ["b @ https://example.invalid/b.whl"]\n', "names a URL"),
    # an option or a second line would reach uv's requirements file
    ('[build-system]\nrequires = ["--index-url=https://evil.invalid/simple"]\n', "not valid"),
    ('[build-system]\nrequires = ["setuptools\\n--extra-index-url x"]\n', "not valid"),
])
def test_a_build_requirement_envgen_cannot_pin_is_a_reason(tmp_path, text, why):
    got = build_requires(sdist(tmp_path / "x-1.0.tar.gz", {"pyproject.toml": text}))
    assert isinstance(got, str) and why in got and "x-1.0.tar.gz" in got


def test_an_oversized_pyproject_is_a_reason_not_the_default(tmp_path):
    big = '[build-system]\nrequires = ["hatchling"]\n' + "#" * (1 << 20) + "\n"
    got = build_requires(sdist(tmp_path / "x-1.0.tar.gz", {"pyproject.toml": big}))
    assert isinstance(got, str) and "not a regular file of at most 1 MiB" in got


def _tar(path: Path, members) -> Path:
    """members: (name, text, or None for a symlink to pyproject.toml)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as t:
        for name, text in members:
            info = tarfile.TarInfo(name)
            if text is None:
                info.type, info.linkname = tarfile.SYMTYPE, "../elsewhere/pyproject.toml"
                t.addfile(info)
                continue
            info.size = len(text.encode())
            t.addfile(info, io.BytesIO(text.encode()))
    path.write_bytes(buf.getvalue())
    return path


HATCH = '[build-system]\nrequires = ["hatchling"]\n'
EVIL = '[build-system]\nrequires = ["evil-backend"]\n'


def test_the_sdists_own_folder_gives_its_pyproject_not_another_top_level_one(tmp_path):
    # another top-level folder's pyproject.toml, listed first, is not the sdist's
    got = build_requires(_tar(tmp_path / "d3-1.0.tar.gz", [
        ("zzz/pyproject.toml", EVIL), ("d3-1.0/pyproject.toml", HATCH)]))
    assert got == ("hatchling",)
    # two top-level folders, neither the sdist's own: a reason, not a guess
    got = build_requires(_tar(tmp_path / "d4-1.0.tar.gz", [
        ("a/pyproject.toml", EVIL), ("b/pyproject.toml", HATCH)]))
    assert isinstance(got, str) and "more than one top-level pyproject.toml" in got
    # one member listed twice is one file (the later, as tar extracts it), not oversized
    assert build_requires(_tar(tmp_path / "d1-1.0.tar.gz", [
        ("d1-1.0/pyproject.toml", EVIL), ("d1-1.0/pyproject.toml", HATCH)])) == ("hatchling",)
    # a symlink is not read through
    got = build_requires(_tar(tmp_path / "d2-1.0.tar.gz", [("d2-1.0/pyproject.toml", None)]))
    assert isinstance(got, str) and "not a regular file" in got


def test_a_zip_sdist_is_read_and_an_unreadable_one_is_a_reason(tmp_path):
    z = tmp_path / "x-1.0.zip"
    with zipfile.ZipFile(z, "w") as f:
        f.writestr("x-1.0/pyproject.toml", '[build-system]\nrequires = ["flit_core>=3.2"]\n')
    assert build_requires(z) == ("flit_core>=3.2",)
    bad = tmp_path / "y-1.0.tar.gz"
    bad.write_bytes(b"not an archive")
    assert "cannot be read as an archive" in build_requires(bad)


SETUPTOOLS = Pin("setuptools", "80.9.0", file="setuptools-80.9.0-py3-none-any.whl",
                 sha256="b" * 64)
WHEEL = Pin("wheel", "0.45.1", file="wheel-0.45.1-py3-none-any.whl", sha256="c" * 64)


def closure_json(**extra) -> dict:
    c = Closure(key="f" * 64, inputs={"requirements": ["x"]}, created="2026-12-01T00:00:00Z",
                pins=(Pin("x", "1.0", file="x-1.0.tar.gz", sha256="a" * 64),))
    return {**c.to_json(), **extra}


def test_the_closure_records_the_build_backends_and_a_lock_cannot_loosen_them():
    good = {"packages": [SETUPTOOLS.to_json(), WHEEL.to_json()]}
    c = parse_closure(closure_json(sdist_build=good), "envgen.lock")
    assert c.sdist_build == (SETUPTOOLS, WHEEL)
    assert c.to_json()["sdist_build"] == good
    assert "sdist_build" not in parse_closure(closure_json(), "c.json").to_json()
    unhashed = {**SETUPTOOLS.to_json(), "hashes": [], "hash_note": "the index gave none"}
    sdist_file = {**SETUPTOOLS.to_json(), "file": "setuptools-80.9.0.tar.gz"}
    for bad, why in (
            ([], "must be an object of packages"),
            ({"packages": [], "more": 1}, "must be an object of packages"),
            ({"packages": []}, "a list of 1-100 packages"),
            ({"packages": [SETUPTOOLS.to_json()] * 101}, "a list of 1-100 packages"),
            ({"packages": [unhashed]}, "a wheel pinned by its sha256"),
            ({"packages": [sdist_file]}, "a wheel pinned by its sha256"),
            ({"packages": [SETUPTOOLS.to_json(), SETUPTOOLS.to_json()]}, "twice"),
            ({"packages": [{"name": "x; rm -rf /", "version": "1"}]}, "not a distribution")):
        with pytest.raises(InputError) as e:
            parse_closure(closure_json(sdist_build=bad), "envgen.lock")
        assert why in e.value.message and e.value.file == "envgen.lock"


def _project_over_cu121(tools=(SETUPTOOLS, WHEEL)):
    """A project over pytorch-cu121 with one pure sdist and these backends, offline."""
    from test_pure_sdists import _project_over_cu121 as project
    st, closure = project(tools)
    return st, closure(True)


def _stage(df: str) -> str:
    start = df.index("AS project-build")
    return df[start:df.index("\nFROM ", start)]


def test_the_builder_stage_installs_the_pinned_backends_and_builds_without_isolation():
    from envgen.render.views import BASE_PIP, PROJECT_BUILD_TOOLS, render_texts
    st, c = _project_over_cu121()
    texts = render_texts(st, c)
    stage = _stage(texts["Dockerfile"])
    tools = texts["install/7-project-build-tools/requirements.txt"]
    assert "setuptools==80.9.0 \\\n    --hash=sha256:" + "b" * 64 in tools
    assert "wheel==0.45.1 \\\n    --hash=sha256:" + "c" * 64 in tools
    assert (f"{BASE_PIP} install --no-cache-dir --progress-bar off --no-compile --no-deps "
            f"--only-binary=:all: --require-hashes --target {PROJECT_BUILD_TOOLS} -r "
            f"/opt/envgen/tools/requirements.txt") in stage
    assert (f"PYTHONPATH={PROJECT_BUILD_TOOLS} {BASE_PIP} wheel --no-cache-dir --progress-bar "
            f"off --no-deps --no-build-isolation --no-binary=antlr4-python3-runtime") in stage
    assert "source=install/7-project-build-tools,target=/opt/envgen/tools" in stage
    assert "from the index unpinned" not in stage
    # the tools are in no layer of the image: no step after the stage names them
    rest = texts["Dockerfile"][texts["Dockerfile"].index("\nFROM ", texts["Dockerfile"].index(
        "AS project-build")):]
    assert "7-project-build-tools" not in rest and PROJECT_BUILD_TOOLS not in rest


def test_a_closure_from_before_the_pins_renders_the_isolated_build_and_says_so():
    from envgen.render.views import render_texts
    st, c = _project_over_cu121(tools=())
    texts = render_texts(st, c)
    stage = _stage(texts["Dockerfile"])
    assert "whose build backends come from the index unpinned" in stage
    assert "--no-build-isolation" not in stage and "PYTHONPATH=" not in stage
    assert not any(k.startswith("install/7-project-build-tools/") for k in texts)


def test_the_resolution_pins_the_union_of_the_sdists_backends(monkeypatch, tmp_path):
    """_sdist_build_pins reads each sdist's requires, asks uv once for all of them on the
    stack's Python and platform, and pins each wheel by hash; an sdist that cannot be read
    or a tool with no hashed wheel stops it with the reason."""
    import envgen.resolve.closure as cl
    import envgen.resolve.project_closure as pc
    from envgen.core.model import ProjectLayer
    st, _c = _project_over_cu121()
    a = sdist(tmp_path / "a-1.0.tar.gz", {"setup.py": ""})
    b = sdist(tmp_path / "b-1.0.tar.gz", {"pyproject.toml": '[build-system]\nrequires = '
                                                            '["hatchling"]\n'})
    pins = [Pin("a", "1.0", file="a-1.0.tar.gz", sha256="1" * 64),
            Pin("b", "1.0", file="b-1.0.tar.gz", sha256="2" * 64),
            Pin("k", "1.0", file="k-1.0.tar.gz", sha256="3" * 64),     # a kernel sdist
            Pin("w", "1.0", file="w-1.0-py3-none-any.whl", sha256="4" * 64)]
    files = {"a": a, "b": b}
    asked = {}
    # the index lists each sdist by its own name and sha256: index_file hands back the
    # kept file only for the entry the caller's `wanted` accepts
    listed = {"a": ("a-1.0.tar.gz", "1" * 64), "b": ("b-1.0.tar.gz", "2" * 64)}

    def index_file(index, name, wanted):
        entry = listed.get(name)
        ok = entry is not None and wanted({"filename": entry[0], "hashes": {"sha256": entry[1]}})
        return files.get(name) if ok else None
    monkeypatch.setattr(cl, "index_file", index_file)
    monkeypatch.setattr(cl, "compile_pins", lambda inputs: (asked.update(inputs) or {
        "setuptools": "80.9.0", "wheel": "0.45.1", "hatchling": "1.27.0"}, "uv"))
    hashed = {"setuptools": SETUPTOOLS, "wheel": WHEEL,
              "hatchling": Pin("hatchling", "1.27.0", file="hatchling-1.27.0-py3-none-any.whl",
                               sha256="d" * 64)}
    monkeypatch.setattr(cl, "hash_pin", lambda n, v, *a, **k: hashed[n])
    layer = ProjectLayer(name="p")
    index = "https://pypi.invalid/simple"

    def build_pins(pins, kernels=("k",)):   # as project_closure calls it: the files read once
        paths = pc._sdist_paths([p for p in pins if p.name not in kernels], layer, index)
        return pc._sdist_build_pins(st, layer, pins, index, set(kernels), paths)
    got = build_pins(pins)
    assert [p.name for p in got] == ["hatchling", "setuptools", "wheel"]
    assert asked["requirements"] == ["hatchling", "setuptools>=40.8.0", "wheel"]
    assert asked["python"] == st.python and asked["platform"] == st.base.platform
    assert "sdists" not in asked   # so uv resolves wheels only (--only-binary :all:)
    # a tool the index serves only as an sdist cannot be installed by hash as a wheel
    hashed["hatchling"] = Pin("hatchling", "1.27.0", file="hatchling-1.27.0.tar.gz",
                              sha256="d" * 64, note="no wheel for this platform")
    with pytest.raises(EnvironmentMissing) as e:
        build_pins(pins)
    assert "the build tool hatchling 1.27.0" in e.value.message
    # an sdist whose own file names what envgen cannot pin: bad input (exit 2)
    files["b"] = sdist(tmp_path / "b2-1.0.tar.gz", {"pyproject.toml": '[build-system]\n'
                                                     'requires = ["h @ https://x.invalid/h"]\n'})
    with pytest.raises(InputError) as e:
        build_pins(pins)
    assert "names a URL" in e.value.message and e.value.exit_code == 2
    # an sdist the index does not serve: the reason, nothing resolved (exit 3)
    files.pop("b")
    with pytest.raises(EnvironmentMissing) as e:
        build_pins(pins)
    assert "b-1.0.tar.gz could not be fetched" in e.value.message and e.value.exit_code == 3
    # no sdist, nothing to pin, no question asked
    asked.clear()
    assert build_pins(pins[3:], ()) == ()
    assert asked == {}
    # the index's file of another sha256 than the pin's is not taken for it
    files["b"] = b
    other = [pins[0], Pin("b", "1.0", file="b-1.0.tar.gz", sha256="5" * 64)]
    with pytest.raises(EnvironmentMissing, match="b-1.0.tar.gz could not be fetched"):
        build_pins(other, ())


def test_only_the_project_build_stages_sdists_need_backends_and_a_stale_cache_is_resolved_again():
    """The stack's own source builds (deepspeed, built over torch in the image) and CUDA-kernel
    sdists have stages of their own; a cached closure with project sdists and no
    sdist_build (written before the backends were pinned) counts as stale."""
    from envgen.matrix.load import load_matrix
    from envgen.resolve.project_closure import project_sdists, unpinned_backends
    from envgen.resolve.spec import parse_spec
    from envgen.resolve.stack import resolve
    m = load_matrix()
    ds = resolve(m, parse_spec("deepspeed-cu124", m))
    assert ds.from_source
    own = Pin(ds.from_source[0], "0.15.0", file=f"{ds.from_source[0]}-0.15.0.tar.gz",
              sha256="5" * 64)
    team = Pin("x", "1.0", file="x-1.0.tar.gz", sha256="6" * 64)
    kern = Pin("flash-attn", "2.6.3", file="flash_attn-2.6.3.tar.gz", sha256="7" * 64)
    wheel = Pin("w", "1.0", file="w-1.0-py3-none-any.whl", sha256="8" * 64)
    pins = (own, team, kern, wheel)
    assert project_sdists(pins, ds, ("flash-attn",)) == [team]

    def closure(**kw):
        return Closure(key="f" * 64, inputs={}, pins=pins, created="2026-12-01T00:00:00Z",
                       kernels=("flash-attn",), **kw)
    assert unpinned_backends(closure(), ds)
    assert not unpinned_backends(closure(sdist_build=(SETUPTOOLS, WHEEL)), ds)
    only_own = Closure(key="f" * 64, inputs={}, pins=(own, wheel), created="2026-12-01T00:00:00Z")
    assert not unpinned_backends(only_own, ds)


def test_a_lock_carries_the_build_backends_to_a_rebuild():
    """`envgen verify --rebuild` renders from the lock alone: the lock's closure summary keeps
    sdist_build, read back and checked as any closure's; a loosened one is refused."""
    from envgen.core.model import ProjectLayer
    from envgen.lock.verify import lock_closure
    from envgen.matrix.load import load_matrix
    from envgen.resolve.spec import parse_spec
    from envgen.resolve.stack import resolve
    m = load_matrix()
    st = resolve(m, parse_spec("pytorch-cu121", m)).replace(
        project=ProjectLayer(name="p", pip=(("x", "1.0"),)))
    entry = {"stack": st.to_json(),
             "closure": {"key": "f" * 64, "resolver": "uv", "created": "2026-12-01T00:00:00Z",
                         "sdist_build": {"packages": [SETUPTOOLS.to_json(), WHEEL.to_json()]}},
             "requirements": [Pin("x", "1.0", file="x-1.0.tar.gz", sha256="a" * 64).to_json()]}
    assert lock_closure(entry).sdist_build == (SETUPTOOLS, WHEEL)
    entry["closure"]["sdist_build"]["packages"][0]["hashes"] = []
    with pytest.raises(InputError):
        lock_closure(entry)


def test_a_cached_closure_from_before_the_pins_is_resolved_again(monkeypatch, tmp_path):
    """project_closure reads a cached closure back without uv, unless it has project sdists
    and no sdist_build: then it resolves again and caches the pinned one."""
    import envgen.resolve.closure as cl
    import envgen.resolve.project_closure as pc
    monkeypatch.setenv("ENVGEN_HOME", str(tmp_path))
    st, _c = _project_over_cu121()
    plain = st.plain()
    inputs = {"requirements": ["x==1.0"], "constraints": [], "python": st.python,
              "platform": st.base.platform, "index_url": None}
    monkeypatch.setattr(pc, "project_inputs", lambda stack, layer: inputs)
    x = Pin("x", "1.0", file="x-1.0.tar.gz", sha256="a" * 64)
    old = Closure(key=cl.key_of(inputs), inputs=inputs, pins=(x,), stack=st.stack,
                  created="2026-12-01T00:00:00Z")
    cl.write_json(cl.cache_dir() / f"{old.key}.json", old.to_json())
    resolved = []
    monkeypatch.setattr(cl, "probe_index", lambda index: None)
    monkeypatch.setattr(cl, "compile_pins",
                        lambda i: (resolved.append(1) or {"x": "1.0"}, "uv 0.13.9"))
    monkeypatch.setattr(cl, "hash_pin", lambda *a, **k: x)
    monkeypatch.setattr(pc, "_kernels", lambda *a: ((), ()))
    monkeypatch.setattr(pc, "_sdist_paths", lambda *a: {})
    monkeypatch.setattr(pc, "_pure_sdists", lambda *a: ("x",))
    monkeypatch.setattr(pc, "_sdist_build_pins", lambda *a: (SETUPTOOLS, WHEEL))
    c, where = pc.project_closure(plain, st.project)
    assert resolved == [1] and "resolved now" in where
    assert c.sdist_build == (SETUPTOOLS, WHEEL)
    again, where = pc.project_closure(plain, st.project)
    assert resolved == [1] and where.startswith("cached closure")
    assert again.sdist_build == (SETUPTOOLS, WHEEL)


def test_init_names_the_sdists_it_builds_and_their_backends():
    from envgen.commands.init import _sdist_notes
    st, c = _project_over_cu121()
    (note,) = _sdist_notes(c, st)
    assert "antlr4-python3-runtime 4.9.3" in note
    assert "with setuptools 80.9.0, wheel 0.45.1, each a wheel checked by its sha256" in note
    st, old = _project_over_cu121(tools=())
    (note,) = _sdist_notes(old, st)
    assert "from the index, unpinned" in note
    plain = old.__class__(key=old.key, inputs=old.inputs, pins=old.pins[:-1],
                          created=old.created)
    assert _sdist_notes(plain, st) == []
