"""init --from's readers (envgen/intake/): each kind of file read into requirements with
file:line, and hostile input refused with one sentence, its file:line and exit 2, nothing
written. No network: the readers run before any resolution."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from envgen.core.errors import InputError
from envgen.intake import read

ROOT = Path(__file__).resolve().parents[1]


def w(folder: Path, name: str, text: str) -> Path:
    p = folder / name
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text)
    return p


def test_requirements_file_forms(tmp_path):
    w(tmp_path, "base.txt", "requests>=2\n")
    p = w(tmp_path, "requirements.txt", (
        "# team\n--extra-index-url https://download.pytorch.org/whl/cu118\n-r base.txt\n"
        "torch==2.1.2+cu118\nnumpy>=1.24 ; python_version >= \"3.9\"\n"
        "einops==0.8.1 \\\n    --hash=sha256:" + "a" * 64 + "\n"
        "foo @ git+https://example.com/foo.git@v1.0\n"))
    got = read(p)
    by = {x.name: x for x in got.requirements}
    assert by["requests"].where.endswith("base.txt:1")
    assert by["torch"].text == "torch==2.1.2+cu118" and by["torch"].line == 4
    assert by["numpy"].text == 'numpy>=1.24; python_version >= "3.9"'
    assert by["einops"].hashes == ("a" * 64,) and by["einops"].line == 6
    assert by["foo"].kind == "git"
    assert got.indexes == ("", "https://download.pytorch.org/whl/cu118")


def test_pyproject_extras_groups_and_uv_sources(tmp_path):
    p = w(tmp_path, "pyproject.toml", '''[project]
name = "team"
version = "1"
dependencies = ["einops>=0.8", "tqdm"]
[project.optional-dependencies]
viz = ["rich==13.9.4"]
[dependency-groups]
dev = ["pytest>=8", {include-group = "lint"}]
lint = ["ruff"]
[tool.uv.sources]
tqdm = { git = "https://github.com/tqdm/tqdm", tag = "v4.67.1" }
[[tool.uv.index]]
name = "mirror"
url = "https://mirror.example/simple"
''')
    got = read(p, extras=("viz",), groups=("dev",))
    names = [x.name for x in got.requirements]
    assert names == ["einops", "tqdm", "rich", "pytest", "ruff"]
    assert got.requirements[1].kind == "git" and "@v4.67.1" in got.requirements[1].text
    assert got.requirements[2].line == 6
    assert got.indexes == ("", "https://mirror.example/simple")


def test_setup_py_is_read_not_run(tmp_path):
    marker = tmp_path / "ran"
    p = w(tmp_path, "setup.py", f'''import os
open({str(marker)!r}, "w").write("x")
from setuptools import setup
DEPS = ["einops>=0.8", "tqdm"]
setup(name="team", version=os.environ.get("V", "1"), install_requires=DEPS,
      extras_require={{"viz": ["rich"]}})
''')
    got = read(p, extras=("viz",))
    assert [x.name for x in got.requirements] == ["einops", "tqdm", "rich"]
    assert not marker.exists()
    assert any("computed, not read: version" in n for n in got.notes)


def test_setup_cfg_and_conda_and_locks(tmp_path):
    cfg = w(tmp_path, "a/setup.cfg", "[metadata]\nname = t\n[options]\ninstall_requires =\n"
            "    einops>=0.8\n    tqdm\n")
    assert [x.line for x in read(cfg).requirements] == [5, 6]
    env = w(tmp_path, "b/environment.yml", "name: t\nchannels: [pytorch, nvidia]\n"
            "dependencies:\n  - python=3.10\n  - pytorch=2.1.2\n  - pytorch-cuda=11.8\n"
            "  - cudnn\n  - numpy>=1.24\n  - pip:\n    - einops==0.8.1\n")
    got = read(env)
    assert got.python == "3.10" and got.variant == "cu118"
    assert [(x.text, x.line) for x in got.requirements] == [
        ("torch==2.1.2", 5), ("numpy>=1.24", 8), ("einops==0.8.1", 10)]
    assert any("conda's pytorch → PyPI's torch" in n for n in got.notes)
    lock = w(tmp_path, "c/uv.lock", '''version = 1
[[package]]
name = "team"
version = "1"
source = { virtual = "." }
dependencies = [{ name = "einops" }]
[[package]]
name = "einops"
version = "0.8.1"
source = { registry = "https://pypi.org/simple" }
wheels = [{ url = "https://x/einops-0.8.1-py3-none-any.whl", hash = "sha256:''' + "b" * 64 + '''" }]
[[package]]
name = "typing-extensions"
version = "4.15.0"
source = { registry = "https://pypi.org/simple" }
''')
    got = read(lock)
    assert [(x.text, x.constraint, x.hashes) for x in got.requirements] == [
        ("einops==0.8.1", False, ("b" * 64,)), ("typing-extensions==4.15.0", True, ())]
    pylock = w(tmp_path, "d/pylock.toml", 'lock-version = "1.0"\n[[packages]]\n'
               'name = "einops"\nversion = "0.8.1"\n')
    assert read(pylock).requirements[0].text == "einops==0.8.1"


def test_a_folder_says_which_file_it_read(tmp_path):
    w(tmp_path, "requirements.txt", "einops\n")
    w(tmp_path, "setup.py", "from setuptools import setup\nsetup(install_requires=['x'])\n")
    got = read(tmp_path)
    assert got.path.endswith("requirements.txt")
    assert "passed over: setup.py" in got.notes[0]


BAD = [
    ("requirements.txt", "\x89PNG\r\n\x1a\n\x00\x00", "requirements.txt:", "not UTF-8"),
    ("pyproject.toml", "this is = = not toml\n", "pyproject.toml:1", "not TOML"),
    ("environment.yml", "- just\n- a list\n", "environment.yml", "no 'dependencies'"),
    ("requirements.txt", "einops\nthis is not a requirement!\n", "requirements.txt:2",
     "is not a requirement"),
    ("requirements.txt", "-r requirements.txt\n", "requirements.txt", "include loop"),
    ("requirements.txt", "foo @ http://example.com/foo-1.0.tar.gz\n", "requirements.txt:1",
     "scheme 'http'"),
    ("requirements.txt", "foo @ ftp://example.com/foo-1.0.tar.gz\n", "requirements.txt:1",
     "scheme 'ftp'"),
    ("requirements.txt", "foo @ git+https://example.com/foo.git@--upload-pack=x\n",
     "requirements.txt:1", "none starts with '-'"),
    ("requirements.txt", "--index-url --trusted-host=evil\n", "requirements.txt:1",
     "looks like an option"),
    ("requirements.txt", "--extra-index-url=-x\n", "requirements.txt:1", "looks like an option"),
    ("setup.py", "from setuptools import setup\nsetup(name='t', install_requires=open("
                 "'r.txt').read().split())\n", "setup.py:2", "install_requires is computed"),
    ("requirements.txt", "einops\nfoo; sys_platform == 'win32' and sys_platform == "
                         "'linux'\n", "requirements.txt:2", "false on every platform"),
    ("requirements.txt", "-e .\n", "requirements.txt:1", "editable"),
    ("requirements.txt", "einops --no-deps\n", "requirements.txt:1", "only option"),
]


@pytest.mark.parametrize("name,text,where,what", BAD, ids=[b[3] for b in BAD])
def test_bad_input_is_one_sentence(tmp_path, name, text, where, what):
    p = tmp_path / name
    p.write_bytes(text.encode("latin-1") if "\x89" in text else text.encode())
    with pytest.raises(InputError) as e:
        read(p)
    assert where in str(e.value), str(e.value)
    assert what in str(e.value), str(e.value)
    assert "\n" not in str(e.value)


def test_a_ten_megabyte_file_is_refused(tmp_path):
    p = tmp_path / "requirements.txt"
    p.write_text("einops\n" * (10 * 1024 * 1024 // 7))
    with pytest.raises(InputError, match="larger than 4 MiB"):
        read(p)


def test_a_fifo_does_not_hang(tmp_path):
    p = tmp_path / "requirements.txt"
    os.mkfifo(p)
    with pytest.raises(InputError, match="FIFO"):
        read(p)


def envgen(*argv, cwd):
    return subprocess.run([sys.executable, "-m", "envgen", *argv], capture_output=True,
                          text=True, cwd=cwd, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT),
                               "ENVGEN_HOME": str(cwd / "home")})


@pytest.mark.parametrize("text,where", [
    ("einops\n-r requirements.txt\n", "requirements.txt"),
    ("torch==2.4.1\nfoo @ ftp://x/foo-1.tar.gz\n", "requirements.txt:2"),
])
def test_cli_exit_2_and_nothing_written(tmp_path, text, where):
    w(tmp_path, "requirements.txt", text)
    r = envgen("init", "--from", "requirements.txt", "--json", cwd=tmp_path)
    assert r.returncode == 2, r.stderr
    err = json.loads(r.stdout or r.stderr.splitlines()[-1]) if r.stdout.strip() else None
    assert where in r.stderr or (err and where in f"{err.get('file')}:{err.get('line')}")
    assert "Traceback" not in r.stderr
    assert not (tmp_path / "envgen.yaml").exists()
    assert not list(tmp_path.glob(".envgen-init-*"))


def test_a_framework_the_matrix_lacks_names_the_line(tmp_path):
    w(tmp_path, "requirements.txt", "einops\ntorch==1.0.0\n")
    r = envgen("init", "--from", "requirements.txt", cwd=tmp_path)
    assert r.returncode == 2, r.stderr
    assert "requirements.txt:2" in r.stderr and "torch==1.0.0" in r.stderr, r.stderr
    assert not (tmp_path / "envgen.yaml").exists()


def test_a_git_reference_names_its_own_line(tmp_path):
    w(tmp_path, "requirements.txt", "einops\nfoo @ git+https://example.com/foo.git@v1\n")
    r = envgen("init", "--from", "requirements.txt", cwd=tmp_path)
    assert r.returncode == 2 and "requirements.txt:2" in r.stderr, r.stderr
    assert not (tmp_path / "envgen.yaml").exists()


def test_a_pin_built_only_for_other_pythons_is_one_sentence(monkeypatch, tmp_path):
    from envgen.commands import init
    from envgen.core.model import Closure, Pin
    from envgen.resolve import closure as closure_mod
    req = w(tmp_path, "requirements.txt", "einops\nnumpy==1.21.0\n")
    files = [{"filename": f"numpy-1.21.0-cp3{m}-cp3{m}-manylinux_2_12_x86_64.whl"}
             for m in (7, 8, 9)] + [{"filename": "numpy-1.21.0.zip"}]
    monkeypatch.setenv("ENVGEN_HOME", str(tmp_path / "home"))
    monkeypatch.setattr(closure_mod, "fetch_json", lambda url: {"files": files})
    pins = (Pin("numpy", "1.21.0", file="numpy-1.21.0.zip", sha256="c" * 64),)
    c = Closure(key="0" * 64, inputs={}, pins=pins, resolver="", created="", stack="")

    class S:
        python, index_url = "3.11", None
    with pytest.raises(InputError) as e:
        init._check_builds(read(req), c, S())
    assert str(e.value).endswith("requirements.txt:2: numpy==1.21.0: numpy 1.21.0 has no "
                                 "build for Python 3.11 (cp37 to cp39): python=3.9 resolves "
                                 "it (--python 3.9), or a newer numpy that has one") or \
        "has no build for Python 3.11 (cp37 to cp39)" in str(e.value), str(e.value)
    # an sdist-only package (no wheel at all) is built, not refused
    monkeypatch.setattr(closure_mod, "fetch_json",
                        lambda url: {"files": [{"filename": "numpy-1.21.0.zip"}]})
    pins = (Pin("numpy", "1.21.0", file="numpy-1.21.0.zip", sha256="d" * 64),)
    c = Closure(key="0" * 64, inputs={}, pins=pins, resolver="", created="", stack="")
    init._check_builds(read(req), c, S())


def _repo(tmp_path, version_line='version = "0.3.1"'):
    import shutil as sh
    repo = tmp_path / "repo"
    sh.copytree(ROOT / "tests" / "projects" / "git-dep" / "tinylib-src", repo)
    py = repo / "pyproject.toml"
    py.write_text(py.read_text().replace('version = "0.3.1"', version_line))
    git = ["git", "-C", str(repo), "-c", "user.email=t@e", "-c", "user.name=t"]
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "init"], check=True)
    subprocess.run([*git, "tag", "v0.3.1"], check=True)
    head = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True,
                          check=True).stdout.strip()
    return repo, head


def test_a_git_ref_is_pinned_to_its_commit_and_archived(tmp_path, monkeypatch):
    from envgen.resolve import gitref
    monkeypatch.setenv("ENVGEN_HOME", str(tmp_path / "home"))
    repo, head = _repo(tmp_path)
    url = repo.as_uri()
    assert gitref.commit_of(url, "v0.3.1") == head
    assert gitref.commit_of(url, "main") == head
    with pytest.raises(InputError, match="no branch or tag 'v9'"):
        gitref.commit_of(url, "v9")
    path, sha, version = gitref.archive("envgen-tinylib", url, head)
    assert path.name == "envgen_tinylib-0.3.1.tar.gz" and version == "0.3.1"
    import hashlib
    assert hashlib.sha256(path.read_bytes()).hexdigest() == sha
    path.unlink()   # made again from the commit: the same bytes
    assert gitref.archive("envgen-tinylib", url, head)[1] == sha


def test_a_git_ref_whose_version_is_computed_is_refused(tmp_path, monkeypatch):
    from envgen.resolve import gitref
    monkeypatch.setenv("ENVGEN_HOME", str(tmp_path / "home"))
    repo, head = _repo(tmp_path, 'dynamic = ["version"]')
    with pytest.raises(InputError, match="computed"):
        gitref.archive("envgen-tinylib", repo.as_uri(), head)


@pytest.mark.parametrize("tail", ["#subdirectory=sub", "?ref=main", "#egg=x&subdirectory=s",
                                  "#sha256=" + "a" * 64])
def test_a_git_reference_with_a_subdirectory_or_query_is_refused(tail):
    """envgen packs the repository's root: a #subdirectory= would be dropped and the root's
    package pinned in its place, so it is refused; #egg=NAME says nothing and is read."""
    from envgen.resolve import gitref
    with pytest.raises(InputError, match="no query or fragment but #egg=NAME"):
        gitref.split(f"git+https://git.example/team/mono.git@v1.0{tail}")
    assert gitref.split("git+https://git.example/team/mono.git@v1.0#egg=pkg") == (
        "https://git.example/team/mono.git", "v1.0")


def test_a_setup_cfg_that_is_not_utf8_still_gives_its_version(tmp_path, monkeypatch):
    from envgen.resolve import gitref
    monkeypatch.setenv("ENVGEN_HOME", str(tmp_path / "home"))
    repo, _ = _repo(tmp_path, 'dynamic = ["version"]')
    (repo / "setup.cfg").write_bytes(b"[metadata]\nversion = 0.3.2\nauthor = Jos\xe9\n")
    git = ["git", "-C", str(repo), "-c", "user.email=t@e", "-c", "user.name=t"]
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "cfg"], check=True)
    head = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True,
                          check=True).stdout.strip()
    assert gitref.archive("envgen-tinylib", repo.as_uri(), head)[2] == "0.3.2"


@pytest.mark.parametrize("line,variant", [
    ("jax[cpu]==0.12.0.1", "cpu"), ("jax[cuda12]==0.12.0.1", "cuda12"),
    ("jax==0.12.0.1", None), ("jax[tpu]==0.12.0.1", None)])
def test_an_extra_naming_a_variant_picks_it(tmp_path, line, variant):
    """JAX's own install lines (`jax[cpu]`, `jax[cuda12]`) choose the build; an extra that
    is no variant leaves the choice to the target."""
    from envgen.intake.choose import framework_parts
    from envgen.matrix.load import load_matrix
    got = read(w(tmp_path, "requirements.txt", f"{line}\neinops\n"))
    parts, picked, _ = framework_parts(got, load_matrix(), "3.13")
    assert parts == ["jax==0.12.0.1"] and picked == variant


def test_a_hosts_file_is_the_target(tmp_path):
    """--hosts: the stack must run on every host's driver and GPUs; a GPU one host has that
    the pin cannot serve is the refusal, at the requirement's line. Bad hosts files are
    one sentence with file:line; --hosts with --gpu is refused; nothing is written."""
    w(tmp_path, "requirements.txt", "einops\ntorch==2.4.1\n")
    w(tmp_path, "hosts.yaml", 'hosts:\n  - name: a\n    driver: "570.86.10"\n'
      '    gpus: ["A100"]\n  - name: b\n    driver: "575.57.08"\n    gpus: ["RTX 5090"]\n')
    r = envgen("init", "--from", "requirements.txt", "--hosts", "hosts.yaml", cwd=tmp_path)
    assert r.returncode == 2, r.stderr
    assert "requirements.txt:2" in r.stderr and "compute capability 12.0" in r.stderr, r.stderr
    w(tmp_path, "bad.yaml", "hosts:\n  - name: a\n    driver: 535\n    gpus: [NoSuch]\n")
    r = envgen("init", "--from", "requirements.txt", "--hosts", "bad.yaml", cwd=tmp_path)
    assert r.returncode == 2 and "bad.yaml:3" in r.stderr and "NoSuch" in r.stderr, r.stderr
    r = envgen("init", "--from", "requirements.txt", "--hosts", "hosts.yaml", "--gpu", "A100",
               cwd=tmp_path)
    assert r.returncode == 2 and "not both" in r.stderr, r.stderr
    assert not (tmp_path / "envgen.yaml").exists()


@pytest.mark.parametrize("value", ['einops==0.8.1; platform_release != "\U0001F600"',
                                   "a\u2028b\x85c\x7fd\u2029", ["\U0001F600", "é"],
                                   {"gpus": ["H100"], "driver": "535.104.05"}])
def test_what_init_writes_into_envgen_yaml_reads_back_the_same(value):
    """A character outside the Basic Multilingual Plane (JSON writes it as a surrogate
    pair, which YAML refuses) or one YAML folds (U+2028, NEL) reads back as written."""
    import yaml

    from envgen.intake.choose import _comment, q
    assert yaml.safe_load(f"k: {q(value)}   # {_comment('d' + chr(0x2028) + 'x.txt')}\n") \
        == {"k": value}
