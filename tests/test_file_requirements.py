"""A requirement naming a file by URL or path (envgen/resolve/urlref.py): init --from pins it
by its sha256 (`#sha256=` in envgen.yaml), envgen.yaml refuses one without it, a changed
file is refused naming the requirement, and the render installs a wheel from beside the
project layer's requirements.txt. No network: file URLs only."""
from __future__ import annotations

import hashlib
import zipfile
from pathlib import Path

import pytest

from envgen.core.errors import InputError
from envgen.resolve import urlref

TINY = (Path(__file__).parent / "projects" / "torch-requirements" / "wheels"
        / "envgen_tinywheel-0.2.0-py3-none-any.whl")
SHA = hashlib.sha256(TINY.read_bytes()).hexdigest()


@pytest.fixture(autouse=True)
def _home(tmp_path, monkeypatch):
    monkeypatch.setenv("ENVGEN_HOME", str(tmp_path / "home"))


def test_a_file_url_is_kept_by_its_sha256_and_gives_its_version():
    path, sha, version = urlref.fetch("envgen-tinywheel", TINY.as_uri())
    assert sha == SHA and version == "0.2.0" and path.read_bytes() == TINY.read_bytes()
    assert path.parent.name == SHA
    # pinned: the kept copy answers; a wrong pin is refused naming both digests
    assert urlref.fetch("envgen-tinywheel", TINY.as_uri(), SHA)[0] == path


def test_changed_bytes_are_refused_naming_the_requirement(tmp_path):
    other = tmp_path / TINY.name
    with zipfile.ZipFile(other, "w") as z:
        z.writestr("x.txt", "changed")
    with pytest.raises(InputError, match="its sha256 is .* not the .* written for it"):
        urlref.fetch("envgen-tinywheel", other.as_uri(), SHA)


@pytest.mark.parametrize("url,what", [
    ("http://example.com/x-1.0-py3-none-any.whl", "https and file"),
    ("ftp://example.com/x-1.0-py3-none-any.whl", "https and file"),
    ("-https://example.com/x.whl", "https and file"),
    ("https://example.com/x-1.0-py3-none-any.whl#md5=abc", "#sha256="),
    ("https://example.com/x-1.0.exe", "no wheel or sdist"),
])
def test_bad_urls_are_one_sentence(url, what):
    with pytest.raises(InputError, match=what):
        urlref.split(url)


def test_a_file_of_another_distribution_is_refused():
    with pytest.raises(InputError, match="is envgen-tinywheel, not einops"):
        urlref.fetch("einops", TINY.as_uri())


def test_envgen_yaml_takes_a_file_only_with_its_sha256(tmp_path):
    from envgen.resolve import project
    line = f"envgen-tinywheel @ {TINY.as_uri()}"
    for text, ok in ((line, False), (f"{line}#sha256={SHA}", True)):
        f = tmp_path / "envgen.yaml"
        f.write_text(f'stack: pytorch-cu121\nname: t\nrequirements:\n  - "{text}"\n')
        if ok:
            got = project.load(f)
            assert project.file_requirements(got.layer) == [
                ("envgen-tinywheel", TINY.as_uri(), SHA)]
            assert [p.name for p in project.wheel_files(got.layer)] == [TINY.name]
        else:
            with pytest.raises(InputError, match=r"URL#sha256") as e:
                project.load(f)
            assert e.value.line == 4


def test_init_pins_a_local_wheel_line_and_checks_its_hash(tmp_path):
    from envgen.commands.init import _pin_files
    from envgen.intake import read
    (tmp_path / "w").mkdir()
    (tmp_path / "w" / TINY.name).write_bytes(TINY.read_bytes())
    req = tmp_path / "requirements.txt"
    req.write_text(f"einops\n./w/{TINY.name}\n")
    got = _pin_files(read(req))
    assert got.requirements[1].text.endswith(f"#sha256={SHA}")
    req.write_text(f"./w/{TINY.name} --hash=sha256:{'0' * 64}\n")
    with pytest.raises(InputError, match="not one of the --hash values") as e:
        _pin_files(read(req))
    assert e.value.line == 1
