"""A value of the wrong type where init --from reads a team's pyproject.toml, uv.lock,
pylock.toml or setup.py is one sentence with its file:line (exit 2), never an internal
error; a value that would change what is installed without saying so (a marker smuggled
into a locked version, a continuation at the end of a file, an extra given as one string)
is read as pip and setuptools read it, or refused. Offline: the readers run before any
resolution."""
from __future__ import annotations

import pytest

from envgen.core.errors import InputError
from envgen.intake import read

PROJECT = '[project]\nname = "x"\n'
LOCK_HEAD = 'version = 1\n\n[[package]]\nname = "numpy"\n'
PYLOCK_HEAD = 'lock-version = "1.0"\n\n[[packages]]\nname = "numpy"\nversion = "1.26.4"\n'

WRONG = [
    ("pyproject.toml", PROJECT + 'dynamic = 5\ndependencies = ["numpy"]\n', (), ":3",
     "[project] dynamic must be an array"),
    ("pyproject.toml", PROJECT + "dependencies = [{a = 1}]\n", (), ":3",
     "dependencies must be a list of requirement strings"),
    ("pyproject.toml", 'tool = "x"\n' + PROJECT + 'dependencies = ["numpy"]\n', (), ":1",
     "[tool] must be a table"),
    ("pyproject.toml", PROJECT + 'dependencies = ["numpy"]\n[tool.uv]\nsources = ["a"]\n',
     (), ":5", "[tool.uv.sources] must be a table"),
    ("pyproject.toml", PROJECT + 'dependencies = ["numpy"]\n[tool.uv]\nindex = 5\n',
     (), ":5", "[[tool.uv.index]] must be an array"),
    ("pyproject.toml", PROJECT + 'dependencies = []\noptional-dependencies = "train"\n',
     ("train",), ":4", "[project.optional-dependencies] must be a table"),
    ("uv.lock", LOCK_HEAD + 'version = "1.26.4"\nsource = 5\n', (), ":4",
     "package 'numpy': source must be a table"),
    ("uv.lock", LOCK_HEAD + 'version = "1.26.4"\nsource = { registry = '
                            '"https://pypi.org/simple" }\nwheels = 5\n', (), ":4",
     "package 'numpy': wheels must be an array"),
    ("uv.lock", LOCK_HEAD.replace("numpy", "team") + 'version = "0.1.0"\nsource = '
                                                      '{ editable = "." }\ndependencies = 5\n',
     (), ":4", "package 'team': dependencies must be an array"),
    ("uv.lock", LOCK_HEAD + "version = \"1.26.4; os_name == 'nt'\"\nsource = { registry = "
                            '"https://pypi.org/simple" }\n', (), ":4",
     "is not a PEP 440 version"),
    ("pylock.toml", PYLOCK_HEAD + 'wheels = [{ hashes = "abc" }]\n', (), ":4",
     "package 'numpy': hashes must be a table"),
    ("pylock.toml", PYLOCK_HEAD + "sdist = { hashes = 5 }\n", (), ":4",
     "package 'numpy': hashes must be a table"),
    ("pylock.toml", PYLOCK_HEAD.replace('"1.26.4"', '">=1.0"'), (), ":4",
     "is not a PEP 440 version"),
    ("setup.py", "from setuptools import setup\nsetup(name='x', install_requires=['numpy'], "
                 "extras_require={1: ['a'], 'a': ['b']})\n", ("b",), ":2",
     "extras_require has 1, a"),
    ("setup.py", "from setuptools import setup\nsetup(name='x', extras_require={'a': 5})\n",
     ("a",), ":2", "extras_require['a'] must be a list of strings"),
    ("requirements.txt", "numpy==1.26.4\n@@not a requirement@@ \\", (), ":2",
     "is not a requirement"),
    ("requirements.txt", "einops\nx @ file://evil.example.com/tmp/x-1.0-py3-none-any.whl\n",
     (), ":2", "names the host 'evil.example.com'"),
    ("environment.yml", "dependencies:\n  - python=abc\n  - numpy\n", (), ":2",
     "'python=abc': envgen needs the Python as X.Y"),
    ("environment.yml", "dependencies:\n  - python=3\n  - numpy\n", (), ":2",
     "'python=3': envgen needs the Python as X.Y"),
    ("environment.yml", "dependencies:\n  - numpy\n  - pytorch-cuda=12\n", (), ":3",
     "needs the CUDA version as X.Y"),
    ("environment.yml", "dependencies:\n  - numpy\n  - cudatoolkit=.*\n", (), ":3",
     "needs the CUDA version as X.Y"),
]


@pytest.mark.parametrize("name,text,extras,where,what", WRONG, ids=[c[4] for c in WRONG])
def test_a_value_of_the_wrong_type_is_one_sentence_at_its_line(tmp_path, name, text, extras,
                                                                 where, what):
    p = tmp_path / name
    p.write_text(text)
    with pytest.raises(InputError) as e:
        read(p, extras=extras)
    said = str(e.value)
    assert what in said, said
    assert f"{name}{where}" in said, said
    assert "\n" not in said


def test_a_dependency_group_that_is_not_a_list_is_one_sentence(tmp_path):
    p = tmp_path / "pyproject.toml"
    p.write_text(PROJECT + 'dependencies = []\n[dependency-groups]\ndev = "x"\n')
    with pytest.raises(InputError) as e:
        read(p, groups=("dev",))
    assert "pyproject.toml:5: dependency-groups.dev must be a list" in str(e.value)


def test_a_continuation_at_the_end_of_the_file_is_still_read(tmp_path):
    p = tmp_path / "requirements.txt"
    p.write_text("einops==0.8.0\nnumpy==1.26.4 \\")
    assert [w.text for w in read(p).requirements] == ["einops==0.8.0", "numpy==1.26.4"]


def test_an_extra_written_as_one_string_is_read_a_line_each(tmp_path):
    """setuptools reads extras_require={'a': 'numpy'} as one requirement a line, as it reads
    install_requires: not n, u, m, p, y."""
    p = tmp_path / "setup.py"
    p.write_text("from setuptools import setup\nsetup(name='x', extras_require="
                 "{'a': 'numpy\\neinops'})\n")
    assert [w.name for w in read(p, extras=("a",)).requirements] == ["numpy", "einops"]


def test_an_include_from_outside_the_project_is_refused_and_never_echoed(tmp_path,
                                                                         monkeypatch):
    """-r /etc/passwd would put a line of that file into an error a CI log keeps."""
    monkeypatch.chdir(tmp_path)
    secret = tmp_path.parent / f"{tmp_path.name}-secret.txt"
    secret.write_text("TOKEN=abc123 not a requirement\n")
    p = tmp_path / "requirements.txt"
    for include in (str(secret), f"../{secret.name}"):
        p.write_text(f"einops\n-r {include}\n")
        with pytest.raises(InputError) as e:
            read(p)
        assert "requirements.txt:2: " in str(e.value) and "inside the project" in str(e.value)
        assert "abc123" not in str(e.value)
    (tmp_path / "sub").mkdir()   # a file in a folder below, and back up to the first's
    (tmp_path / "sub" / "dev.txt").write_text("-r ../base.txt\nnumpy\n")
    (tmp_path / "base.txt").write_text("einops\n")
    p.write_text("-r sub/dev.txt\n")
    assert [w.name for w in read(p).requirements] == ["einops", "numpy"]


def test_an_include_loop_and_a_name_too_long_name_their_line(tmp_path):
    p = tmp_path / "requirements.txt"
    (tmp_path / "other.txt").write_text("numpy\n-r requirements.txt\n")
    p.write_text("einops\n-r other.txt\n")
    with pytest.raises(InputError) as e:
        read(p)
    assert "other.txt:2: includes itself" in str(e.value)
    for line in (f"-r {'a' * 300}", f"./{'a' * 300}.whl"):
        p.write_text(f"einops\n{line}\n")
        with pytest.raises(InputError) as e:
            read(p)
        assert "requirements.txt:2: " in str(e.value) and "File name too long" in str(e.value)
        assert len(str(e.value)) < len(str(p)) + 200


def test_a_setup_py_too_deep_for_pythons_parser_is_one_sentence(tmp_path):
    p = tmp_path / "setup.py"
    p.write_text("from setuptools import setup\nsetup(name='x', version='1'" + "+'1'" * 30000
                 + ", install_requires=['numpy'])\n")
    with pytest.raises(InputError) as e:
        read(p)
    assert "setup.py: " in str(e.value) and "too deep" in str(e.value)


@pytest.mark.parametrize("name, text", [
    ("setup.py", "from setuptools import setup\nsetup(name='x', extras_require="
                 "{'Fast_Math': ['numpy'], 'other': ['einops']})\n"),
    ("setup.cfg", "[metadata]\nname = x\n[options.extras_require]\nFast_Math = numpy\n"
                  "other = einops\n")])
@pytest.mark.parametrize("asked", ["fast-math", "FAST.math", "Fast_Math"])
def test_an_extra_is_found_by_its_normalised_name_as_pip_finds_it(tmp_path, name, text,
                                                                   asked):
    """PEP 685: pip install .[fast-math] installs the extra a setup.py spells Fast_Math."""
    p = tmp_path / name
    p.write_text(text)
    assert [w.name for w in read(p, extras=(asked,)).requirements] == ["numpy"]
    with pytest.raises(InputError, match="--extra 'nope'"):
        read(p, extras=("nope",))


def test_a_find_links_folder_is_noted_as_pip_reads_it_not_refused(tmp_path):
    """`--find-links ./wheels` is common in a team's requirements file: envgen resolves from
    the index, so it says what becomes of the folder instead of refusing the file."""
    p = tmp_path / "requirements.txt"
    p.write_text("--find-links ./wheels\n-f https://example.org/links/\nnumpy==1.26.4\n")
    got = read(p)
    assert [w.name for w in got.requirements] == ["numpy"]
    notes = [n for n in got.notes if "--find-links" in n]
    assert len(notes) == 2 and notes[0].endswith(
        "pinned by its sha256") and f"{p}:1:" in notes[0] and f"{p}:2:" in notes[1]
    for bad_value, words in (("-x", "looks like an option"),
                             ("https://u:hunter2@example.org/", "login")):
        p.write_text(f"--find-links {bad_value}\nnumpy==1.26.4\n")
        with pytest.raises(InputError, match=words) as e:
            read(p)
        assert "hunter2" not in str(e.value)


def test_each_dependency_is_placed_on_its_own_line_even_forty_thousand_of_them(tmp_path):
    """Each value's line used to be counted from the top of the file, once per value: 14 s
    for 40,000 dependencies here. The same text twice is placed on each of its lines."""
    import time
    deps = ",\n".join(f'  "pkg{i}>=1.0"' for i in range(40_000))
    p = tmp_path / "pyproject.toml"
    p.write_text(f'[project]\nname = "x"\ndependencies = [\n  "numpy",\n  "numpy",\n{deps}\n]\n'
                 '[project.optional-dependencies]\nfast = ["einops", "einops"]\n')
    t = time.monotonic()
    got = read(p, extras=("fast",)).requirements
    took = time.monotonic() - t
    assert [w.where.rsplit(":", 1)[1] for w in got[:2]] == ["4", "5"]
    assert got[40_001].where.endswith(":40005") and got[40_001].name == "pkg39999"
    assert [w.where.rsplit(":", 1)[1] for w in got[-2:]] == ["40008", "40008"]
    assert took < 8, f"{took:.1f} s"
