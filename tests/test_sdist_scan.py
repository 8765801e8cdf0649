"""An sdist is read once for the three questions resolving a project asks of it (what its
backend needs, whether it needs a compiler, whether its requirements are static), and read
again when the file changes."""
import io
import os
import tarfile

from envgen.resolve import sdists


def _sdist(path, pyproject: str, extra: dict | None = None):
    files = {"demo-1.0/PKG-INFO": "Metadata-Version: 2.2\nName: demo\nVersion: 1.0\n",
             "demo-1.0/pyproject.toml": pyproject, "demo-1.0/demo/__init__.py": "",
             **(extra or {})}
    with tarfile.open(path, "w:gz") as t:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))


def _count_opens(monkeypatch):
    opened = []
    real = tarfile.open

    def counting(*a, **kw):
        opened.append(a[0] if a else kw.get("name"))
        return real(*a, **kw)
    monkeypatch.setattr(sdists.tarfile, "open", counting)
    return opened


def test_the_three_questions_read_the_archive_once(tmp_path, monkeypatch):
    path = tmp_path / "demo-1.0.tar.gz"
    _sdist(path, '[build-system]\nrequires = ["flit_core>=3.9"]\n'
                 'build-backend = "flit_core.buildapi"\n')
    opened = _count_opens(monkeypatch)
    assert sdists.build_requires(path) == ("flit_core>=3.9",)
    assert sdists.needs_compiler(path) is False
    assert sdists.static_requirements(path) is True
    assert sdists.names(path)[:2] == ["demo-1.0/PKG-INFO", "demo-1.0/pyproject.toml"]
    assert len(opened) == 1


def test_a_changed_file_is_read_again(tmp_path, monkeypatch):
    path = tmp_path / "demo-1.0.tar.gz"
    _sdist(path, '[build-system]\nrequires = ["flit_core>=3.9"]\n')
    assert sdists.needs_compiler(path) is False
    _sdist(path, '[build-system]\nrequires = ["setuptools>=69"]\n',
           {"demo-1.0/demo/_speed.c": "int x;\n"})
    os.utime(path, ns=(1, 1))   # a different age, whatever the clock's resolution
    opened = _count_opens(monkeypatch)
    assert sdists.needs_compiler(path) is True
    assert sdists.build_requires(path) == ("setuptools>=69", "wheel")
    assert len(opened) == 1


def test_a_file_that_is_not_an_archive_is_unreadable_for_every_question(tmp_path):
    path = tmp_path / "demo-1.0.tar.gz"
    path.write_bytes(b"not a tar at all" * 100)
    assert sdists.names(path) is None
    assert sdists.needs_compiler(path) is True          # the safe side
    assert sdists.static_requirements(path) is False
    assert sdists.build_requires(path) == "demo-1.0.tar.gz cannot be read as an archive"
    assert sdists.build_requires(tmp_path / "gone.tar.gz") == \
        "gone.tar.gz cannot be read as an archive"
