"""The smoke import of a git reference or a URL/path requirement is read from the file envgen
already holds for it (the archive of its commit, the wheel), not guessed from its name."""
from __future__ import annotations

import hashlib
import io
import tarfile
import zipfile

from envgen.core.model import Pin
from envgen.intake.modules import modules


def archive(path, prefix, files):
    with tarfile.open(path, "w:gz") as tar:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(f"{prefix}/{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def never(url):
    raise AssertionError(f"the index was asked ({url}) for a file envgen holds")


def sha(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_git_archive_names_its_packages_not_its_distribution(tmp_path, monkeypatch):
    monkeypatch.setenv("ENVGEN_HOME", str(tmp_path / "home"))
    a = archive(tmp_path / "envgen_tinylib-0.3.1.tar.gz", "envgen_tinylib-0.3.1",
                {"pyproject.toml": "[project]\n", "src/tiny/__init__.py": "",
                 "src/tiny/core.py": "", "tools.py": "", "setup.py": ""})
    pin = Pin("envgen-tinylib", "0.3.1", file=a.name, sha256=sha(a))
    mods, notes = modules([pin], {"envgen-tinylib"}, "https://pypi.org/simple", fetch=never,
                          local={"envgen-tinylib": a})
    assert (mods, notes) == (["tiny", "tools"], [])


def test_a_local_wheel_names_its_top_level_txt(tmp_path, monkeypatch):
    monkeypatch.setenv("ENVGEN_HOME", str(tmp_path / "home"))
    w = tmp_path / "teamwheel-0.2.0-py3-none-any.whl"
    with zipfile.ZipFile(w, "w") as z:
        z.writestr("teamwheel-0.2.0.dist-info/top_level.txt", "team_core\n")
        z.writestr("team_core/__init__.py", "")
    pin = Pin("teamwheel", "0.2.0", file=w.name, sha256=sha(w))
    assert modules([pin], {"teamwheel"}, "https://pypi.org/simple", fetch=never,
                   local={"teamwheel": w}) == (["team_core"], [])


def test_a_held_file_that_changed_is_not_read_and_the_guess_says_why(tmp_path, monkeypatch):
    monkeypatch.setenv("ENVGEN_HOME", str(tmp_path / "home"))
    a = archive(tmp_path / "envgen_tinylib-0.3.1.tar.gz", "envgen_tinylib-0.3.1",
                {"tiny/__init__.py": ""})
    pin = Pin("envgen-tinylib", "0.3.1", file=a.name, sha256="0" * 64)
    mods, notes = modules([pin], {"envgen-tinylib"}, "https://pypi.org/simple", fetch=never,
                          local={"envgen-tinylib": a})
    assert mods == ["envgen_tinylib"]
    assert "changed since it was pinned" in notes[0] and "guessed" in notes[0]


def test_a_package_kept_deeper_is_read_only_under_the_distributions_own_name(tmp_path):
    from envgen.intake.modules import modules_of_archive
    layout = {"setup.py": "", "python2/crcmod/__init__.py": "", "python3/crcmod/__init__.py": "",
              "test/helpers/__init__.py": ""}
    data = archive(tmp_path / "crcmod-1.7.tar.gz", "crcmod-1.7", layout).read_bytes()
    assert modules_of_archive(data, False, "crcmod") == ["crcmod"]
    # another name deeper down is not taken for the distribution's
    assert modules_of_archive(data, False, "other") == []
    assert modules_of_archive(data, False) == []
