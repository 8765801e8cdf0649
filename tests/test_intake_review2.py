"""init --from, second review: no secret and no line of a file outside the project is
echoed, errors name the team's file and line (never init's temporary file), constraints
never choose the framework, the framework's build is read from what the file says
(tensorflow-cpu, conda's cpuonly and cuda-version, a torch wheel's file name), and the
Python is one the project's requires-python admits. Offline: the readers and the choice of
stack need no network."""
from __future__ import annotations

from pathlib import Path

import pytest
from test_intake import envgen

from envgen.core.errors import InputError
from envgen.intake import read
from envgen.intake.choose import choose, framework_parts
from envgen.matrix.load import load_matrix
from envgen.resolve.stack import Host

ROOT = Path(__file__).resolve().parents[1]
M = load_matrix()


def w(folder: Path, name: str, text: str) -> Path:
    p = folder / name
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text)
    return p


# 1. a login or a token is never echoed; the error is at the team's own line

@pytest.mark.parametrize("entry", [
    "--extra-index-url https://alice:s3cretTOKEN@host/simple",
    "foo @ https://alice:s3cretTOKEN@pkgs.example/foo-1.0-py3-none-any.whl",
    "--index-url=https://host/simple?private_token=s3cretTOKEN"])
def test_an_environment_yml_pip_entry_never_echoes_a_login_or_token(tmp_path, entry):
    p = w(tmp_path, "environment.yml", f"name: x\ndependencies:\n  - pip:\n    - einops\n"
                                       f"    - {entry!r}\n")
    with pytest.raises(InputError) as e:
        read(p)
    assert "s3cret" not in str(e.value) and "alice" not in str(e.value), str(e.value)
    assert (e.value.file, e.value.line) == (str(p), 5)


@pytest.mark.parametrize("line", [
    "--extra-index-url https://pkgs.example.com/simple?private_token=s3cretTOKEN",
    "-i https://pkgs.example.com/simple?private_token=s3cretTOKEN",
    "foo @ https://files.example.com/foo-1.0-py3-none-any.whl?X-Amz-Signature=s3cretTOKEN"])
def test_a_token_in_a_url_query_is_refused_at_its_line_masked(tmp_path, line):
    p = w(tmp_path, "requirements.txt", f"einops\n{line}\n")
    with pytest.raises(InputError) as e:
        read(p)
    assert "s3cret" not in str(e.value) and e.value.line == 2, str(e.value)
    assert "=***" in str(e.value) and "ENVGEN_NETRC" in str(e.value), str(e.value)


def test_an_index_with_a_query_is_refused_by_init_at_the_teams_line(tmp_path):
    w(tmp_path, "requirements.txt",
      "einops==0.8.1\n--extra-index-url https://pkgs.example.com/simple?private_token=s3cret\n")
    r = envgen("init", "--from", "requirements.txt", cwd=tmp_path)
    assert r.returncode == 2, r.stderr
    assert "requirements.txt:2: " in r.stderr and "s3cret" not in r.stderr, r.stderr
    assert ".envgen-init-" not in r.stderr and not (tmp_path / "envgen.yaml").exists()


def test_an_error_in_inits_temporary_file_names_the_teams_file_and_line():
    from envgen.commands.init import _users_file
    from envgen.core.errors import MatrixError
    from envgen.intake.model import Intake
    written = ('stack: "torch"\nrequirements:\n  - "foo @ https://h/f.whl?k=s3cret"   '
               '# requirements.txt:7\nindexes: []\n')
    intake = Intake(path="requirements.txt", kind="requirements file", requirements=())
    for line, where in ((3, ("requirements.txt", 7)), (4, ("requirements.txt", None))):
        with pytest.raises(InputError) as e, _users_file("/x/.envgen-init-ab.yaml", written,
                                                         intake):
            raise MatrixError(message="entry 'https://h/f.whl?k=s3cret' is bad",
                              file="/x/.envgen-init-ab.yaml", line=line)
        assert (e.value.file, e.value.line) == where
        assert "s3cret" not in e.value.message and "?k=***" in e.value.message


# 2. no line of a file outside the project, and no value of a line that is no requirement

def test_a_folders_file_linked_outside_the_project_is_refused(tmp_path):
    outside = w(tmp_path, "passwd", "root:x:0:0:root:/root:/bin/bash\n")
    (tmp_path / "proj").mkdir()
    (tmp_path / "proj" / "requirements.txt").symlink_to(outside)
    for given in (tmp_path / "proj", tmp_path / "proj" / "requirements.txt"):
        with pytest.raises(InputError) as e:
            read(given)
        assert "outside the project folder" in str(e.value) and "root:x" not in str(e.value)


def test_an_include_from_a_parent_folder_is_refused_even_from_the_working_folder(
        tmp_path, monkeypatch):
    """CI runs `init --from pr/requirements.txt` beside its own secrets: the project is the
    folder of the file given, not the working folder."""
    w(tmp_path, ".env", "AWS_SECRET_ACCESS_KEY=abc123\n")
    p = w(tmp_path, "pr/requirements.txt", "-r ../.env\n")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InputError) as e:
        read(Path("pr/requirements.txt"))
    assert "inside the project folder" in str(e.value) and "abc123" not in str(e.value)
    assert e.value.line == 1 and p.exists()


@pytest.mark.parametrize("line,shown", [
    ("AWS_SECRET_ACCESS_KEY=abc123", "'AWS_SECRET_ACCESS_KEY=***'"),
    ("aws_secret_access_key = abc123", "'aws_secret_access_key ***'"),
    ("root:x:0:0:abc123:/root:/bin/bash", "'root:***'"),
    ('export TOKEN="abc123', "'export ***'"),
    ("--password=abc123", "'--password=***'"),
    ("einops --token=abc123", "'--token'")])
def test_a_line_that_is_no_requirement_shows_its_first_word_only(tmp_path, line, shown):
    w(tmp_path, ".env", f"{line}\n")
    with pytest.raises(InputError) as e:
        read(w(tmp_path, "requirements.txt", "einops\n-r .env\n"))
    assert "abc123" not in str(e.value) and shown in str(e.value), str(e.value)
    assert str(e.value).startswith(f"{tmp_path / '.env'}:1: ")


# 3. constraints constrain; they never choose the framework

def test_a_constraint_never_chooses_the_framework(tmp_path):
    w(tmp_path, "constraints.txt", "tensorflow==2.15.1\nnumpy<2\n")
    got = read(w(tmp_path, "requirements.txt", "einops\n-c constraints.txt\n"))
    assert framework_parts(got, M, None)[0] == []
    stack, _spec, why = choose(got, M, [Host()], None)
    assert stack.framework == "pytorch" and "names no framework" in why[0]
    w(tmp_path, "c2.txt", "torch==2.4.1\ntensorflow==2.15.1\n")
    got = read(w(tmp_path, "requirements.txt", "torch\n-c c2.txt\n"))
    assert framework_parts(got, M, None)[0] == ["torch==2.4.1"]   # it narrows torch


# 4. the framework's build, as the file says it

def test_tensorflow_cpu_chooses_tensorflows_cpu_build(tmp_path):
    got = read(w(tmp_path, "requirements.txt", "tensorflow-cpu==2.15.1\n"))
    assert framework_parts(got, M, None)[:2] == (["tensorflow==2.15.1"], "cpu")
    stack = choose(got, M, [Host()], None)[0]
    assert (stack.framework, stack.variant) == ("tensorflow", "cpu")
    assert dict(stack.packages)["tensorflow-cpu"] == "2.15.1"


@pytest.mark.parametrize("deps,variant", [
    ("  - pytorch-gpu=2.4.1\n  - cuda-version=11.8\n", "cu118"),
    ("  - pytorch=2.4.1\n  - cpuonly\n", "cpu")])
def test_condas_cuda_version_and_cpuonly_choose_the_variant(tmp_path, deps, variant):
    got = read(w(tmp_path, "environment.yml",
                 f"name: x\nchannels: [conda-forge]\ndependencies:\n  - python=3.11\n{deps}"))
    assert got.variant == variant and [x.name for x in got.requirements] == ["torch"]
    stack = choose(got, M, [Host()], got.python)[0]
    assert (stack.version, stack.variant) == ("2.4.1", variant)


def test_cpuonly_beside_a_cuda_line_is_refused_naming_both(tmp_path):
    with pytest.raises(InputError, match="names the cpu build, and line 4 the cu121"):
        read(w(tmp_path, "environment.yml", "name: x\ndependencies:\n  - pytorch=2.4.1\n"
                                            "  - pytorch-cuda=12.1\n  - cpuonly\n"))


@pytest.mark.parametrize("line", [
    "./wheels/torch-2.1.2+cu118-cp311-cp311-linux_x86_64.whl",
    "https://download.pytorch.org/whl/cu118/torch-2.1.2%2Bcu118-cp311-cp311-"
    "linux_x86_64.whl"])
def test_a_torch_wheel_by_path_or_url_is_the_framework_its_name_says(tmp_path, line):
    from envgen.intake.choose import framework_files
    w(tmp_path, "wheels/torch-2.1.2+cu118-cp311-cp311-linux_x86_64.whl", "not a zip")
    got = framework_files(read(w(tmp_path, "requirements.txt", f"einops\n{line}\n")), M)
    torch = got.requirements[1]
    assert (torch.text, torch.kind, torch.line) == ("torch==2.1.2+cu118", "index", 2)
    assert any("torch 2.1.2+cu118" in n and "not read" in n for n in got.notes)
    stack = choose(got, M, [Host()], None)[0]
    assert (stack.version, stack.variant) == ("2.1.2", "cu118")


# 5. requires-python

@pytest.mark.parametrize("requires,python", [(">=3.12", "3.12"), ("<3.11", "3.10"),
                                             (">=3.10", "3.11")])
def test_requires_python_chooses_a_python_the_project_admits(tmp_path, requires, python):
    got = read(w(tmp_path, "pyproject.toml", f'[project]\nname="app"\nversion="0.1.0"\n'
                                             f'requires-python="{requires}"\n'
                                             f'dependencies=["torch==2.4.1"]\n'))
    stack, spec, why = choose(got, M, [Host()], None)
    assert stack.python == python and f"python={python}" in spec
    assert any("pyproject.toml:4 requires-python" in r for r in why) or python == "3.11"


def test_requires_python_no_stack_python_meets_is_refused_with_the_reason(tmp_path):
    p = w(tmp_path, "pyproject.toml", '[project]\nname="app"\nversion="0.1.0"\n'
                                      'requires-python=">=3.14"\ndependencies=["torch==2.4.1"]\n')
    with pytest.raises(InputError) as e:
        choose(read(p), M, [Host()], None)
    assert (e.value.file, e.value.line) == (str(p), 4)
    assert "admits no Python" in e.value.message and "3.12" in e.value.message
    with pytest.raises(InputError, match="does not admit Python 3.11"):
        choose(read(p), M, [Host()], "3.11")


def test_a_requires_python_that_is_no_specifier_is_refused_at_its_line(tmp_path):
    p = w(tmp_path, "pyproject.toml", '[project]\nname="app"\nversion="0"\n'
                                      'requires-python="three"\ndependencies=[]\n')
    with pytest.raises(InputError, match="is not a version specifier") as e:
        read(p)
    assert e.value.line == 4


def test_init_refuses_a_requires_python_no_stack_meets_at_its_line(tmp_path):
    w(tmp_path, "pyproject.toml", '[project]\nname="app"\nversion="0.1.0"\n'
                                  'requires-python=">=3.14"\ndependencies=["torch==2.4.1"]\n')
    r = envgen("init", "--from", "pyproject.toml", cwd=tmp_path)
    assert r.returncode == 2 and "pyproject.toml:4: requires-python" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr and not (tmp_path / "envgen.yaml").exists()


# 6. uv.lock: the root's requirements as written; the stack's own pins win over the lock's

LOCK = '''version = 1
revision = 3
requires-python = ">=3.11, <3.13"

[[package]]
name = "app"
version = "0.1.0"
source = { virtual = "." }
dependencies = [
    { name = "pywin32", marker = "sys_platform == 'win32'" },
    { name = "requests", extra = ["socks"] },
]

[package.metadata]
requires-dist = [
    { name = "pywin32", marker = "sys_platform == 'win32'", specifier = ">=306" },
    { name = "requests", extras = ["socks"], specifier = "==2.32.3" },
]

[[package]]
name = "pysocks"
version = "1.7.1"
source = { registry = "https://pypi.org/simple" }

[[package]]
name = "pywin32"
version = "312"
source = { registry = "https://pypi.org/simple" }

[[package]]
name = "requests"
version = "2.32.3"
source = { registry = "https://pypi.org/simple" }
'''


def test_a_uv_lock_keeps_the_roots_extras_and_markers(tmp_path):
    p = w(tmp_path, "uv.lock", LOCK)
    got = read(p)
    direct = {x.text: x.line for x in got.requirements if not x.constraint}
    assert direct == {'pywin32>=306; sys_platform == "win32"': 16,
                      "requests[socks]==2.32.3": 17}
    # the direct ones as requires-dist states them; the lock pins the rest
    assert [x.text for x in got.requirements if x.constraint] == ["pysocks==1.7.1"]
    assert got.requires_python == "<3.13,>=3.11" and got.requires_python_at == f"{p}:3"


def test_without_metadata_a_uv_lock_reads_the_roots_dependencies_extras_and_markers(
        tmp_path):
    metadata = LOCK[LOCK.index("[package.metadata]"):LOCK.index('[[package]]\nname = "pys')]
    got = read(w(tmp_path, "uv.lock", LOCK.replace(metadata, "")))
    direct = sorted(x.text for x in got.requirements if not x.constraint)
    assert direct == ['pywin32==312; sys_platform == "win32"', "requests[socks]==2.32.3"]
    assert [x.text for x in got.requirements if x.constraint] == ["pysocks==1.7.1"]


def test_a_locks_pins_of_what_the_stack_pins_yield_to_the_stacks(monkeypatch):
    from envgen.commands import init
    from envgen.core.model import Pin
    from envgen.intake.model import Intake, Wanted
    from envgen.resolve import closure
    from envgen.resolve.spec import parse_spec
    from envgen.resolve.stack import resolve

    class Plain:
        pins = (Pin("nvidia-nvjitlink-cu12", "12.1.105"), Pin("filelock", "3.13.1"))
    monkeypatch.setattr(closure, "closure_for", lambda _s: (Plain, "stored"))
    stack = resolve(M, parse_spec("torch==2.4.1", M), Host())
    lock = Intake(path="uv.lock", kind="uv.lock", requirements=(
        Wanted("torch==2.4.1", "torch", "uv.lock", 17),
        Wanted("nvidia-nvjitlink-cu12==12.9.86", "nvidia-nvjitlink-cu12", "uv.lock", 259,
               constraint=True),
        Wanted("filelock==3.13.1", "filelock", "uv.lock", 40, constraint=True),
        Wanted("six==1.16.0", "six", "uv.lock", 300, constraint=True)))
    got = init._lock_yields(lock, stack)
    assert [x.name for x in got.requirements] == ["torch", "filelock", "six"]
    assert "nvidia-nvjitlink-cu12 12.9.86 → 12.1.105" in got.notes[-1]
    assert "yield to pytorch-cu121's" in got.notes[-1]


def test_an_error_at_a_lock_line_never_says_loosen_that_pin():
    from envgen.commands.init import _sentence
    from envgen.core.errors import EnvironmentMissing
    from envgen.intake.model import Intake, Wanted
    from envgen.resolve.spec import parse_spec
    from envgen.resolve.stack import resolve
    stack = resolve(M, parse_spec("pytorch-cu121", M), Host())
    lock = Intake(path="uv.lock", kind="uv.lock", requirements=(
        Wanted("six==1.16.0", "six", "uv.lock", 30, constraint=True),))
    s = _sentence(EnvironmentMissing("uv could not resolve: Because six==1.16.0 has no "
                                     "wheels, we can conclude nothing."), lock, stack, False)
    assert (s.file, s.line) == ("uv.lock", 30)
    assert "loosen that pin" not in s.message and "lock again (uv lock)" in s.message


# 7. conda names taken from PyPI as they are; the project's own extras read locally

def test_a_conda_name_taken_from_pypi_as_is_is_said_and_refused_without_a_wheel(
        tmp_path, monkeypatch):
    from envgen.commands import init
    from envgen.resolve import closure
    got = read(w(tmp_path, "environment.yml", "name: x\ndependencies:\n  - python=3.11\n"
                                              "  - pytorch=2.4.1\n  - numpy\n  - ffmpeg\n"))
    assert {x.name: x.origin for x in got.requirements} == {
        "torch": "", "numpy": "conda", "ffmpeg": "conda"}
    assert any("taken from PyPI under the same name" in n and "numpy, ffmpeg" in n
               for n in got.notes)
    files = {"numpy": [{"filename": "numpy-2.0.0-cp311-cp311-manylinux_2_17_x86_64.whl"}],
             "ffmpeg": [{"filename": "ffmpeg-1.4.tar.gz"}]}
    monkeypatch.setattr(closure, "fetch_json",
                        lambda url: {"files": files[url.rstrip("/").rsplit("/", 1)[1]]})
    with pytest.raises(InputError) as e:
        init._conda_names(got)
    assert e.value.line == 6 and "conda's ffmpeg" in e.value.message
    assert "no wheel" in e.value.message


def test_a_projects_extra_naming_itself_is_read_from_its_own_file(tmp_path):
    p = w(tmp_path, "pyproject.toml", '[project]\nname="acme-trainer-internal"\n'
                                      'version="0.1"\ndependencies=["six==1.16.0"]\n'
                                      '[project.optional-dependencies]\n'
                                      'train=["einops==0.8.1"]\n'
                                      'all=["acme_trainer_internal[train] ; '
                                      'sys_platform == \'linux\'", "rich"]\n'
                                      'loop=["acme-trainer-internal[loop,train]"]\n')
    got = read(p, extras=("all", "loop"))
    assert [x.text for x in got.requirements] == [
        "six==1.16.0", 'einops==0.8.1; sys_platform == "linux"', "rich", "einops==0.8.1"]
    assert any("names this project itself" in n for n in got.notes)
