"""A team's requirements may name a package that has only an sdist. uv reads its requirements
from the sdist's static metadata when it states them (PEP 643 PKG-INFO, PEP 621
pyproject.toml), and otherwise runs its build backend, on this machine, outside any
container. envgen says when that happened, and ENVGEN_NO_HOST_BUILDS=1 refuses it. The real
uv runs here against an sdist whose in-tree build backend leaves a mark when it runs."""
from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest

from envgen.core.environ import check
from envgen.core.errors import InputError
from envgen.core.model import Pin
from envgen.resolve import closure as cl
from envgen.resolve import project_closure as pc
from envgen.resolve.sdists import static_requirements


@pytest.fixture(autouse=True)
def no_reporter():
    """Notes go out as plain lines: no reporter an earlier test made stays current."""
    from envgen.core import progress
    progress._current.clear()
    yield
    progress._current.clear()


BACKEND = '''import os, pathlib
pathlib.Path(os.environ["EVIL_MARK"]).write_text("ran")
def get_requires_for_build_wheel(config_settings=None):
    return []
def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    d = pathlib.Path(metadata_directory, "x-1.0.dist-info")
    d.mkdir()
    (d / "METADATA").write_text("Metadata-Version: 2.1\\nName: x\\nVersion: 1.0\\n")
    return d.name
'''
IN_TREE = ('[build-system]\nrequires = []\nbuild-backend = "evil"\nbackend-path = ["."]\n')


def sdist(path: Path, files: dict[str, str], top: str = "x-1.0") -> Path:
    with tarfile.open(path, "w:gz") as t:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(f"{top}/{name}" if top else name)
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
    return path


PKG = "Metadata-Version: {v}\nName: x\nVersion: 1.0\n{extra}"


@pytest.mark.parametrize("files, static", [
    ({"PKG-INFO": PKG.format(v="2.2", extra="Requires-Dist: idna\n")}, True),
    ({"PKG-INFO": PKG.format(v="2.4", extra="Dynamic: License\n")}, True),
    ({"PKG-INFO": PKG.format(v="2.1", extra="Requires-Dist: idna\n")}, False),
    ({"PKG-INFO": PKG.format(v="2.2", extra="Dynamic: Requires-Dist\n")}, False),
    ({"PKG-INFO": PKG.format(v="2.3", extra="Dynamic: provides-extra\n")}, False),
    ({"PKG-INFO": PKG.format(v="two", extra="")}, False),
    ({"PKG-INFO": PKG.format(v="2.1", extra=""),
      "pyproject.toml": '[project]\nname = "x"\nversion = "1.0"\ndependencies = ["idna"]\n'},
     True),
    ({"pyproject.toml": '[project]\nname = "x"\ndynamic = ["version"]\n'}, True),
    ({"pyproject.toml": '[project]\nname = "x"\ndynamic = ["dependencies"]\n'}, False),
    ({"pyproject.toml": '[project\nname = "x"\n'}, False),
    ({"pyproject.toml": IN_TREE, "evil.py": BACKEND}, False),
    ({"setup.py": "from setuptools import setup\nsetup(name='x')\n"}, False),
    # a subfolder's static PKG-INFO is not the sdist's own
    ({"sub/PKG-INFO": PKG.format(v="2.2", extra=""), "setup.py": ""}, False),
])
def test_static_requirements_are_read_from_the_sdists_own_metadata(tmp_path, files, static):
    assert static_requirements(sdist(tmp_path / "x-1.0.tar.gz", files)) is static


def test_an_unreadable_sdist_is_not_static(tmp_path):
    bad = tmp_path / "x-1.0.tar.gz"
    bad.write_bytes(b"not an archive")
    assert static_requirements(bad) is False


def _inputs(links: Path, index: str) -> dict:
    return {"requirements": ["x==1.0"], "constraints": [], "python": "3.11",
            "platform": "manylinux_2_36_x86_64", "index_url": index, "sdists": True,
            "find_links": [str(links)]}


def test_uv_runs_the_backend_here_unless_host_builds_are_refused(tmp_path, monkeypatch):
    from recorded_index import RecordedIndex
    links = tmp_path / "links"
    links.mkdir()
    sdist(links / "x-1.0.tar.gz", {"pyproject.toml": IN_TREE, "evil.py": BACKEND,
                                   "PKG-INFO": PKG.format(v="2.1", extra="")})
    mark = tmp_path / "mark"
    monkeypatch.setenv("EVIL_MARK", str(mark))
    with RecordedIndex() as idx:
        with pytest.raises(InputError) as e:
            cl.compile_pins(_inputs(links, idx.url), no_build=True)
        assert e.value.exit_code == 2 and "x has no wheel" in str(e.value)
        assert "ENVGEN_NO_HOST_BUILDS=1" in str(e.value)
        assert not mark.exists()             # refused before any of the sdist's code ran
        pins, _ = cl.compile_pins(_inputs(links, idx.url))
    assert pins == {"x": "1.0"}
    assert mark.read_text() == "ran"         # the sdist's own backend ran on this machine


def test_the_sdists_uv_built_here_are_named_and_static_ones_are_not(tmp_path, capsys):
    built = sdist(tmp_path / "x-1.0.tar.gz", {"pyproject.toml": IN_TREE, "evil.py": BACKEND})
    static = sdist(tmp_path / "y-2.0.tar.gz", {"PKG-INFO": PKG.format(v="2.2", extra="")},
                   top="y-2.0")
    pins = [Pin("x", "1.0", file="x-1.0.tar.gz", sha256="1" * 64),
            Pin("y", "2.0", file="y-2.0.tar.gz", sha256="2" * 64),
            Pin("k", "3.0", file="k-3.0.tar.gz", sha256="3" * 64),   # uv was told its metadata
            Pin("w", "1.0", file="w-1.0-py3-none-any.whl", sha256="4" * 64)]
    pc._tell_host_builds(pins, {"x": built, "y": static, "k": None},
                         {"dependency_metadata": [{"name": "k", "version": "3.0",
                                                   "requires-dist": []}]})
    err = capsys.readouterr().err
    assert "uv ran the build backend of 1 sdist(s) on this machine" in err
    assert "x 1.0" in err and "y 2.0" not in err and "k 3.0" not in err
    pc._tell_host_builds(pins[1:], {"y": static, "k": None},
                         {"dependency_metadata": [{"name": "k", "version": "3.0",
                                                   "requires-dist": []}]})
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("value, ok", [("1", True), ("0", True), ("yes", False),
                                       ("1\n", False)])
def test_the_variable_takes_1_or_0(value, ok):
    if ok:
        check({"ENVGEN_NO_HOST_BUILDS": value})
    else:
        with pytest.raises(InputError, match="ENVGEN_NO_HOST_BUILDS"):
            check({"ENVGEN_NO_HOST_BUILDS": value})


def test_the_note_goes_through_the_commands_reporter(capsys):
    import json

    from envgen.commands._common import close_progress
    from envgen.core import progress
    progress.note("plain, with no reporter made")
    assert capsys.readouterr().err == "  note: plain, with no reporter made\n"
    progress.reporter("json")
    progress.note("uv ran the build backend of 1 sdist(s)")
    line = capsys.readouterr().err.strip()
    assert json.loads(line)["event"] == "note" and "1 sdist(s)" in json.loads(line)["message"]
    progress.reporter("quiet")
    progress.note("not shown")
    assert capsys.readouterr().err == ""
    close_progress()
    progress.note("after the command's reporter closed")
    assert capsys.readouterr().err.startswith("  note: after")


PROJECT = '[project]\nname = "x"\n'


@pytest.mark.parametrize("files", [
    {"PKG-INFO": PKG.format(v="2.2", extra="")},
    {"PKG-INFO": PKG.format(v="2.2", extra="Dynamic: Requires-Dist\n")},
    {"PKG-INFO": PKG.format(v="2.1", extra="")},
    {"pyproject+": PROJECT + 'version = "1.0"\ndependencies = []\n'},
    {"pyproject+": PROJECT + 'dynamic = ["version"]\ndependencies = []\n'},
    {"pyproject+": PROJECT + 'version = "1.0"\ndynamic = ["dependencies"]\n'},
], ids=["pkg-info-2.2", "pkg-info-2.2-dynamic", "pkg-info-2.1", "pyproject",
        "pyproject-dynamic-version", "pyproject-dynamic-dependencies"])
def test_what_envgen_calls_static_is_what_the_real_uv_reads_without_running_it(
        tmp_path, monkeypatch, files):
    """The note's premise, checked against uv itself: the in-tree backend leaves its mark
    exactly when static_requirements says the sdist states its requirements in no static
    form."""
    from recorded_index import RecordedIndex
    links = tmp_path / "links"
    links.mkdir()
    extra = files.pop("pyproject+", "")
    path = sdist(links / "x-1.0.tar.gz", {**files, "evil.py": BACKEND,
                                          "pyproject.toml": IN_TREE + extra})
    mark = tmp_path / "mark"
    monkeypatch.setenv("EVIL_MARK", str(mark))
    with RecordedIndex() as idx:
        assert cl.compile_pins(_inputs(links, idx.url))[0] == {"x": "1.0"}
    assert mark.exists() is not static_requirements(path)


DEEP = "a = " + "[" * 100_000 + "]" * 100_000 + "\n"


def test_a_pyproject_nested_too_deeply_is_a_reason_never_a_traceback(tmp_path):
    """tomllib recurses once per nested array: a hostile sdist's pyproject.toml gives a
    sentence (its build requirements) or counts as not static, never RecursionError."""
    from envgen.resolve.kernels import requires_dist
    from envgen.resolve.sdists import build_requires
    path = sdist(tmp_path / "x-1.0.tar.gz", {"pyproject.toml": DEEP})
    assert static_requirements(path) is False
    assert build_requires(path) == "x-1.0.tar.gz: pyproject.toml is not valid TOML (nested " \
                                   "too deeply)"
    assert requires_dist(path) is None


def test_a_teams_pyproject_nested_too_deeply_is_one_sentence_at_its_file(tmp_path):
    from envgen.intake.pyproject import _toml
    f = tmp_path / "pyproject.toml"
    f.write_text('[project]\nname = "x"\n' + DEEP)
    with pytest.raises(InputError) as e:
        _toml(f, "pyproject.toml")
    assert e.value.exit_code == 2 and "nested too deeply" in str(e.value)
    assert e.value.file == str(f)
