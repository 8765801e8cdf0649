"""A team's files read as pip, uv and conda read them: nothing silently dropped or changed,
nothing computed taken for a literal, a login never echoed, and every refusal one sentence
at its line (exit 2), quickly."""
from __future__ import annotations

import time
from pathlib import Path

import pytest

from envgen.core.errors import InputError
from envgen.intake.conda import read_environment
from envgen.intake.pyproject import read_pyproject
from envgen.intake.requirements import read_requirements
from envgen.intake.setuppy import read_setup_py


def w(folder: Path, name: str, text: str) -> Path:
    p = folder / name
    p.write_text(text)
    return p


def texts(intake) -> list[str]:
    return [x.text for x in intake.requirements]


def test_a_comment_ending_in_a_backslash_does_not_eat_the_next_line(tmp_path):
    got = read_requirements(w(tmp_path, "r.txt", "numpy==1.26.4\n# pinned below: a bug \\\n"
                                                 "scipy==1.11.4\npandas\n"))
    assert texts(got) == ["numpy==1.26.4", "scipy==1.11.4", "pandas"]


@pytest.mark.parametrize("change", [
    'install_requires.append("uvloop>=0.17")', 'install_requires.extend(["tensorboard"])',
    'install_requires += ["tensorboard"]',
    'if True:\n    install_requires = ["other"]', 'install_requires[0] = "numpy<2"'])
def test_a_setup_py_list_changed_after_its_binding_is_computed_not_read(tmp_path, change):
    w(tmp_path, "setup.py", 'from setuptools import setup\ninstall_requires = ["numpy>=1.20"]\n'
      f'{change}\nsetup(name="x", install_requires=install_requires)\n')
    with pytest.raises(InputError, match="install_requires is computed"):
        read_setup_py(tmp_path / "setup.py")


@pytest.mark.parametrize("line", [
    "-r https://deploy:ghp_SECRETTOKEN123@raw.githubusercontent.com/x/y/main/r.txt",
    "git+https://alice:ghp_SECRETTOKEN123@github.com/org/repo.git@v1",
    "https://u:ghp_SECRETTOKEN123@files.example.com/p-1.0-py3-none-any.whl --no-deps",
    "pkg @ git+https://alice:ghp_SECRETTOKEN123@github.com/org/repo.git@v1"])
def test_a_line_with_a_login_is_refused_without_echoing_it(tmp_path, line):
    with pytest.raises(InputError) as e:
        read_requirements(w(tmp_path, "r.txt", f"einops\n{line}\n"))
    assert "SECRET" not in str(e.value) and "carries a login" in str(e.value)
    assert e.value.line == 2 and e.value.exit_code == 2


def test_an_include_loop_of_links_and_a_huge_line_are_one_sentence_quickly(tmp_path):
    (tmp_path / "l1").symlink_to("l2")
    (tmp_path / "l2").symlink_to("l1")
    with pytest.raises(InputError, match="cannot be read"):
        read_requirements(w(tmp_path, "r.txt", "-r l1\n"))
    start = time.monotonic()
    with pytest.raises(InputError, match="a line of 800,000 characters"):
        read_requirements(w(tmp_path, "big.txt", "x" * 800_000 + "\n"))
    assert time.monotonic() - start < 5


def test_a_marker_on_a_path_url_or_git_line_is_kept(tmp_path):
    (tmp_path / "foo-1.0-py3-none-any.whl").write_bytes(b"")
    got = read_requirements(w(tmp_path, "r.txt", (
        './foo-1.0-py3-none-any.whl ; sys_platform == "linux"\n'
        'https://example.com/bar-1.0-py3-none-any.whl ; sys_platform == "linux"\n'
        'git+https://github.com/o/r.git@v1#egg=baz ; python_version >= "3.9"\n'
        "--require-hashes\n")))
    assert [t.split(" @ ")[0] for t in texts(got)] == ["foo", "bar", "baz"]
    assert all(t.endswith(('sys_platform == "linux"', 'python_version >= "3.9"'))
               for t in texts(got))
    assert any("--require-hashes noted" in n for n in got.notes)


def test_a_subdirectory_is_refused_wherever_a_file_names_it(tmp_path):
    with pytest.raises(InputError, match="subdirectory"):
        read_requirements(w(tmp_path, "r.txt",
                            "git+https://g.example/r.git@v1#egg=p&subdirectory=python\n"))
    w(tmp_path, "pyproject.toml", '[project]\nname = "a"\nversion = "1"\n'
      'dependencies = ["tools"]\n[tool.uv.sources]\n'
      'tools = { git = "https://g.example/r.git", tag = "v2", subdirectory = "pkg" }\n')
    with pytest.raises(InputError, match="subdirectory"):
        read_pyproject(tmp_path / "pyproject.toml")


def test_a_range_with_a_uv_source_takes_the_source_and_keeps_extras_and_marker(tmp_path):
    w(tmp_path, "pyproject.toml", '[project]\nname = "a"\nversion = "1"\n'
      "dependencies = ['mylib[cli]>=1.0 ; python_version >= \"3.9\"']\n[tool.uv.sources]\n"
      'mylib = { git = "https://g.example/mylib.git", tag = "v1.0" }\n')
    (req,) = texts(read_pyproject(tmp_path / "pyproject.toml"))
    assert req == 'mylib[cli] @ git+https://g.example/mylib.git@v1.0 ; python_version >= "3.9"'


def test_conda_specs_read_as_conda_reads_them(tmp_path):
    got = read_environment(w(tmp_path, "environment.yml", (
        "name: t\ndependencies:\n  - python 3.10\n  - numpy 1.26\n  - scipy=1.11.*\n"
        "  - pandas 2.1.4 py310h_0\n  - einops=0.8\n")))
    assert texts(got) == ["numpy==1.26.*", "scipy==1.11.*", "pandas==2.1.4", "einops==0.8.*"]
    assert got.python == "3.10"


def test_a_pinned_reference_keeps_its_extras():
    from packaging.requirements import Requirement

    from envgen.commands.init import _named
    assert _named(Requirement("mypkg[train,cuda] @ git+https://g.example/r.git@v1")) == \
        "mypkg[cuda,train]"
    assert _named(Requirement("plain @ https://g.example/p-1.0-py3-none-any.whl")) == "plain"


@pytest.mark.parametrize("entry, words", [
    ('[packages.archive]\nurl = "https://artifacts.corp.example/internal_utils-3.2.0.tar.gz"\n'
     'hashes = {sha256 = "' + "a" * 64 + '"}\n', "[packages.archive] source"),
    ('[packages.vcs]\ntype = "git"\nurl = "https://g.example/r.git"\ncommit-id = "' + "b" * 40
     + '"\nsubdirectory = "pkg"\n', "subdirectory")])
def test_a_pylock_package_from_an_archive_or_a_subdirectory_is_refused(tmp_path, entry, words):
    """Not read as the index's package of that name (someone else's on PyPI)."""
    from envgen.intake.pyproject import read_pylock
    w(tmp_path, "pylock.toml", 'lock-version = "1.0"\ncreated-by = "x"\n[[packages]]\n'
      f'name = "internal-utils"\nversion = "3.2.0"\n{entry}')
    with pytest.raises(InputError, match=words.replace("[", r"\[").replace("]", r"\]")):
        read_pylock(tmp_path / "pylock.toml")


def test_a_uv_lock_with_two_versions_of_one_package_keeps_where_each_applies(tmp_path):
    from envgen.intake.pyproject import read_uv_lock
    sha = "sha256:" + "c" * 64
    w(tmp_path, "uv.lock", (
        'version = 1\nrequires-python = ">=3.9"\n\n[[package]]\nname = "app"\n'
        'version = "0.1.0"\nsource = { virtual = "." }\ndependencies = [\n'
        '    { name = "numpy" },\n]\n\n'
        '[[package]]\nname = "numpy"\nversion = "2.0.2"\n'
        'source = { registry = "https://pypi.org/simple" }\n'
        "resolution-markers = [\"python_full_version < '3.10'\"]\n"
        f'sdist = {{ url = "https://x/numpy-2.0.2.tar.gz", hash = "{sha}" }}\n\n'
        '[[package]]\nname = "numpy"\nversion = "2.2.6"\n'
        'source = { registry = "https://pypi.org/simple" }\n'
        "resolution-markers = [\"python_full_version >= '3.10'\"]\n"
        f'sdist = {{ url = "https://x/numpy-2.2.6.tar.gz", hash = "{sha}" }}\n'))
    got = read_uv_lock(tmp_path / "uv.lock")
    assert texts(got) == ['numpy==2.0.2; python_full_version < "3.10"',
                          'numpy==2.2.6; python_full_version >= "3.10"']
    assert [x.line for x in got.requirements] == [13, 20]
