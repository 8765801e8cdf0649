"""envgen.yaml (the project file) and `envgen init`, without a daemon: what it reads, every
refusal with file:line and exit 2, how its layer goes over a stack, how it renders, and the
checks a lock's or label's project object goes through."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from envgen.core.errors import InputError, MatrixError
from envgen.matrix import load_matrix
from envgen.matrix.wire import stack_problems
from envgen.resolve import project
from envgen.resolve.spec import parse_spec
from envgen.resolve.stack import host_from_flags, resolve

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GOOD = """\
stack: pytorch-cu121
name: trainer
pip:
  - Einops == 0.8.1
apt: [jq, git]
copy:
  - train.py
  - src: conf/
    dest: settings/
smoke: python app/train.py --steps "2 0"
"""


def cli(*argv, cwd, env=None):
    return subprocess.run([sys.executable, "-m", "envgen", *argv], capture_output=True,
                          text=True, cwd=cwd, timeout=120,
                          env={**os.environ, "PYTHONPATH": ROOT, **(env or {}),
                               "DOCKER_HOST": "unix:///nonexistent.sock"})


@pytest.fixture
def folder(tmp_path):
    (tmp_path / "train.py").write_text("print('hi')\n")
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "a.yaml").write_text("lr: 1\n")
    (tmp_path / "conf" / "__pycache__").mkdir()
    (tmp_path / "conf" / "__pycache__" / "x.pyc").write_bytes(b"\0")
    (tmp_path / "run.sh").write_text("#!/bin/sh\n")
    (tmp_path / "run.sh").chmod(0o755)
    (tmp_path / "envgen.yaml").write_text(GOOD)
    return tmp_path


def test_a_project_file_reads_into_its_layer(folder):
    p = project.load(folder / "envgen.yaml")
    assert p.spec == "pytorch-cu121"
    layer = p.layer
    assert layer.name == "trainer" and layer.pip == (("einops", "0.8.1"),)
    assert layer.apt == ("git", "jq")
    assert [(s, d) for s, d, _, _ in layer.files] == [("conf/a.yaml", "settings/a.yaml"),
                                                       ("train.py", "train.py")]
    assert layer.smoke == ("python", "app/train.py", "--steps", "2 0")   # split, no shell


def test_an_executable_keeps_its_mode_and_caches_are_skipped(folder):
    (folder / "envgen.yaml").write_text(GOOD.replace("  - train.py", "  - run.sh\n  - conf"))
    files = project.load(folder / "envgen.yaml").layer.files
    modes = {d: m for _, d, _, m in files}
    assert modes["run.sh"] == 0o755 and modes["conf/a.yaml"] == 0o644
    assert not any("__pycache__" in d for d in modes)


@pytest.mark.parametrize("edit, line, words", [
    (("stack: pytorch-cu121", "stack: ''"), 1, "'stack' must name"),
    (("name: trainer", "name: Trainer!"), 2, "'name'"),
    (("  - Einops == 0.8.1", "  - einops>=0.8"), 4, "exact pin"),
    (("  - Einops == 0.8.1", "  - einops==0.8.1 --hash=sha256:00"), 4, "exact pin"),
    (("  - Einops == 0.8.1", "  - einops==0.8.1\n  - EINOPS==0.8.1"), 5, "listed twice"),
    (("apt: [jq, git]", "apt: [jq, 'git; rm -rf /']"), 5, "not a Debian package"),
    (("apt: [jq, git]", "apt: [jq=1.6]"), 5, "not a Debian package"),
    # apt-get install reads a trailing '-' as "remove": python3- would remove Python
    (("apt: [jq, git]", "apt: [jq, python3-]"), 5, "not a Debian package"),
    (("apt: [jq, git]", "apt: [jq, c]"), 5, "not a Debian package"),
    (("  - train.py", "  - ../secret"), 7, "relative path"),
    (("  - train.py", "  - /etc/passwd"), 7, "relative path"),
    (("  - train.py", "  - missing.py"), 7, "no such file"),
    (("    dest: settings/", "    dest: '-rf'"), 8, "relative path"),
    (("smoke: python app/train.py --steps \"2 0\"", "smoke: 'python \"unclosed'"), 10,
     "cannot be split"),
    (("smoke: python app/train.py --steps \"2 0\"", "smoke: [python, {a: 1}]"), 10,
     "must be a command"),
    (("smoke: python app/train.py --steps \"2 0\"", "smokes: [python]"), 10, "unknown key"),
    # what the image's stack label and a lock refuse is refused here, before a build
    (("smoke: python app/train.py --steps \"2 0\"", "smoke: [python, \"a\\u2028b\"]"), 10,
     "must be a command"),
    (("smoke: python app/train.py --steps \"2 0\"", "smoke: [python, \"a\\x7fb\"]"), 10,
     "must be a command"),
    (("pip:\n  - Einops == 0.8.1", "pip: einops==0.8.1"), 3, "must be a list"),
    # uv reads the rest of a line after ' #' as a comment, even inside a marker's quotes
    (("pip:\n  - Einops == 0.8.1",
      "pip: []\nrequirements: ['einops==0.8.1; platform_release != \"a #b\"']"), 4,
     "holds ' #'"),
    (("pip:\n  - Einops == 0.8.1", "pip: []\nrequirements: [\"einops\\u2028==0.8\"]"), 4,
     "must be one requirement line"),
    # a file where another entry makes a folder: refused at load, before render writes
    (("  - train.py", "  - {src: train.py, dest: settings}"), 8, "would be a file and the folder"),
    (("  - train.py", "  - {src: train.py, dest: settings/a.yaml}"), 8, "two sources"),
])
def test_each_bad_value_is_refused_at_its_line(folder, edit, line, words):
    (folder / "envgen.yaml").write_text(GOOD.replace(*edit))
    with pytest.raises(MatrixError) as e:
        project.load(folder / "envgen.yaml")
    assert e.value.line == line, e.value.message
    assert words in e.value.message


def test_a_file_copied_into_a_folder_keeps_its_name_and_one_record(folder):
    """dest ending in / is a folder, as in a Dockerfile's COPY: two files into one folder
    are two files, and the record (stack.json, the image's label) names what the image
    holds: before, both were recorded at 'x/' and the second file's bytes won."""
    (folder / "b.py").write_text("print('b')\n")
    (folder / "envgen.yaml").write_text(GOOD.replace(
        "  - train.py", "  - {src: train.py, dest: x/}\n  - {src: b.py, dest: x/}"))
    files = project.load(folder / "envgen.yaml").layer.files
    assert [f[1] for f in files if f[1].startswith("x")] == ["x/b.py", "x/train.py"]
    (folder / "envgen.yaml").write_text(GOOD.replace(
        "  - train.py", "  - {src: train.py, dest: x}\n  - {src: b.py, dest: x/}"))
    with pytest.raises(MatrixError, match="would be a file and the folder"):
        project.load(folder / "envgen.yaml")


def test_a_symlink_is_refused_as_a_source_and_as_the_file(folder, tmp_path_factory):
    outside = tmp_path_factory.mktemp("outside") / "key"
    outside.write_text("secret\n")
    (folder / "link.py").symlink_to(outside)
    (folder / "envgen.yaml").write_text(GOOD.replace("  - train.py", "  - link.py"))
    with pytest.raises(MatrixError, match="symbolic link"):
        project.load(folder / "envgen.yaml")
    (folder / "conf" / "inner").symlink_to(outside)   # inside a copied folder too
    (folder / "envgen.yaml").write_text(GOOD)
    with pytest.raises(MatrixError, match="not a regular file"):
        project.load(folder / "envgen.yaml")
    (folder / "conf" / "inner").unlink()
    (folder / "real.yaml").write_text(GOOD)
    (folder / "envgen.yaml").unlink()
    (folder / "envgen.yaml").symlink_to(folder / "real.yaml")
    with pytest.raises(InputError, match="symbolic link"):
        project.load(folder / "envgen.yaml")


def test_the_layer_goes_over_the_stack_and_plain_takes_it_off(folder):
    m = load_matrix(None)
    stack = resolve(m, parse_spec("pytorch-cu121", m), host_from_flags(m))
    over = project.apply(stack, project.load(folder / "envgen.yaml").layer)
    assert dict(over.packages)["einops"] == "0.8.1"
    assert over.key == "trainer.pytorch-cu121" and stack.key == "pytorch-cu121"
    assert over.plain() == stack
    assert over.reasons[-1].startswith("project trainer: 1 pip package(s), 2 apt")
    from envgen.core.model import Stack
    back = Stack.from_json(over.to_json())   # the label and the lock round-trip
    assert back.project == over.project and back.to_json() == over.to_json()
    assert stack_problems(over.to_json()) == []


def test_a_pin_that_differs_from_the_stacks_is_refused(folder):
    m = load_matrix(None)
    stack = resolve(m, parse_spec("pytorch-cu121", m), host_from_flags(m))
    (folder / "envgen.yaml").write_text(GOOD.replace("Einops == 0.8.1", "torch==2.5.0"))
    with pytest.raises(InputError, match="pins torch 2.4.1"):
        project.apply(stack, project.load(folder / "envgen.yaml").layer)
    (folder / "envgen.yaml").write_text(GOOD.replace("Einops == 0.8.1", "torch==2.4.1"))
    same = project.apply(stack, project.load(folder / "envgen.yaml").layer)
    assert same.project.pip == () and same.plain() == stack   # the stack brings it


@pytest.mark.parametrize("key, value, words", [
    ("name", "x y", "name"),
    ("pip", {"einops": ">=1"}, "exact versions"),
    ("apt", ["jq; reboot"], "Debian package"),
    ("files", [{"src": "../x", "dest": "x", "sha256": "0" * 64, "mode": "644"}], "files"),
    ("files", [{"src": "x", "dest": "x", "sha256": "0" * 64, "mode": "4755"}], "files"),
    ("smoke", ["python", "a\nb"], "smoke"),
    ("extra", 1, "an object of"),
])
def test_a_hostile_project_in_a_lock_or_label_is_refused(folder, key, value, words):
    m = load_matrix(None)
    stack = resolve(m, parse_spec("pytorch-cu121", m), host_from_flags(m))
    data = project.apply(stack, project.load(folder / "envgen.yaml").layer).to_json()
    data["project"][key] = value
    problems = stack_problems(data)
    assert problems and words in problems[0]


def test_render_puts_the_layer_over_the_plain_stacks_layers(folder, tmp_path_factory):
    (folder / "envgen.yaml").write_text(GOOD.replace("  - Einops == 0.8.1\n", "").replace(
        "pip:\n", "pip: []\n"))
    plain = tmp_path_factory.mktemp("plain")
    assert cli("render", "pytorch-cu121", "-o", str(plain), cwd=plain).returncode == 0
    r = cli("render", "-o", "ctx", cwd=folder)
    assert r.returncode == 0, r.stderr
    ctx = folder / "ctx"
    text = (ctx / "Dockerfile").read_text()
    cut = text.index("# Project trainer: apt packages git, jq")
    # everything above the project's steps is the plain stack's Dockerfile, to the byte
    plain_text = (plain / "Dockerfile").read_text()
    assert plain_text.startswith(text[:cut])
    assert '"$ENVGEN_DEBIAN_MIRROR" bookworm main' in text   # never the mirror's name
    assert "install --no-install-recommends git jq" in text.replace(" -y", "")
    assert (ctx / "project" / "settings" / "a.yaml").read_text() == "lr: 1\n"
    assert json.loads((ctx / "stack.json").read_text())["project"]["apt"] == ["git", "jq"]
    # a file edited after it was read is not built as something else
    from envgen.resolve.project import copy_files
    layer = project.load(folder / "envgen.yaml").layer
    (folder / "train.py").write_text("print('changed')\n")
    with pytest.raises(InputError, match="changed since"):
        copy_files(layer, folder / "again")


def test_init_writes_a_file_that_reads_back_and_never_overwrites(tmp_path):
    r = cli("init", "pytorch-cu121", "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["stack"] == "pytorch-cu121" and out["schema_version"] == 1
    assert out["name"] == tmp_path.name.lower().replace("_", "_")[:63] or out["name"]
    p = project.load(tmp_path / "envgen.yaml")
    assert p.layer.pip == () and p.layer.smoke == ()
    again = cli("init", "jax-cpu", cwd=tmp_path)
    assert again.returncode == 2 and "--force" in again.stderr
    assert project.load(tmp_path / "envgen.yaml").spec == "pytorch-cu121"
    spec = cli("init", "torch==2.4.1,python=3.11", "--force", "--name", "t", cwd=tmp_path)
    assert spec.returncode == 0, spec.stderr
    assert project.load(tmp_path / "envgen.yaml").spec == "torch==2.4.1,python=3.11"
    bad = cli("init", "nosuchframework", "--force", cwd=tmp_path)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr


def test_every_spec_command_reads_the_project_and_ENVGEN_PROJECT_turns_it_off(folder):
    r = cli("resolve", "--json", cwd=folder)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["project"]["name"] == "trainer"
    off = cli("resolve", cwd=folder, env={"ENVGEN_PROJECT": ""})
    assert off.returncode == 2 and "no SPEC given" in off.stderr
    named = cli("resolve", "jax-cpu", "--json", cwd=folder, env={"ENVGEN_PROJECT": ""})
    assert named.returncode == 0 and "project" not in json.loads(named.stdout)
    (folder / "envgen.yaml").write_text(GOOD.replace("apt: [jq, git]", "apt: [jq, J!]"))
    bad = cli("build", cwd=folder)
    assert bad.returncode == 2
    assert f"{folder / 'envgen.yaml'}:5" in bad.stderr and "Traceback" not in bad.stderr


def test_a_named_spec_of_another_stack_wins_over_the_project_file_and_says_so(folder):
    r = cli("resolve", "jax-cpu", "--json", cwd=folder)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["stack"] == "jax-cpu" and "project" not in json.loads(r.stdout)
    assert "envgen.yaml (project trainer over pytorch-cu121) left out: 'jax-cpu' names " \
           "another stack" in r.stderr
    bake = cli("ci", "bake", "pytorch-cu118", cwd=folder)
    assert bake.returncode == 0, bake.stderr
    assert "trainer" not in bake.stdout and "envgen/pytorch-cu118:" in bake.stdout
    dev = cli("ci", "devcontainer", "jax-cpu", cwd=folder)
    assert dev.returncode == 0, dev.stderr
    assert "trainer" not in dev.stdout


def test_the_projects_own_stack_named_or_not_gets_its_layer_and_says_so(folder):
    for argv in (["resolve", "--json"], ["resolve", "pytorch-cu121", "--json"]):
        r = cli(*argv, cwd=folder)
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout)["project"]["name"] == "trainer"
        assert "envgen.yaml: project trainer goes over pytorch-cu121 (image envgen/trainer)" \
            in r.stderr


def test_a_render_that_fails_leaves_no_folder_it_made(tmp_path, monkeypatch):
    """A write that fails halfway (a full disk, a file changed since it was read) removes
    the -o folder the render made; one that existed before is left to its owner."""
    import envgen.build.context as context
    from envgen.resolve.closure import closure_for
    m = load_matrix()
    st = resolve(m, parse_spec("pytorch-cu121", m))
    closure = closure_for(st, resolve=False)[0]
    calls = []

    def put(out, rel, data, mode):
        calls.append(rel)
        if len(calls) == 3:
            raise OSError(28, "No space left on device")
        return real(out, rel, data, mode)
    real = context._put
    monkeypatch.setattr(context, "_put", put)
    with pytest.raises(OSError):
        context.write_context(st, closure, tmp_path / "new" / "ctx")
    assert not (tmp_path / "new").exists() and len(calls) == 3
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("kept\n")
    calls.clear()
    with pytest.raises(OSError):
        context.write_context(st, closure, tmp_path / "mine")
    assert (tmp_path / "mine" / "notes.txt").read_text() == "kept\n"


@pytest.mark.parametrize("spec", ["torch==notaversion", "pytorch-cu121,,==,python=3.99"])
def test_a_spec_in_the_project_file_that_fails_is_told_at_its_line(tmp_path, spec):
    (tmp_path / "envgen.yaml").write_text(f"name: t\nstack: '{spec}'\n")
    r = cli("resolve", cwd=tmp_path, env={"ENVGEN_HOME": str(tmp_path / "home")})
    assert r.returncode == 2, r.stderr
    assert "envgen.yaml:2: " in r.stderr and "Traceback" not in r.stderr, r.stderr


def test_render_does_not_write_over_a_folder_whose_dockerfile_is_not_envgens(tmp_path):
    """`render -o .` in a team's repository: its Dockerfile, requirements.txt and install/
    folder are not replaced or emptied; a new folder, one with other names only, and one
    envgen rendered into are written."""
    import envgen.build.context as context
    from envgen.resolve.closure import closure_for
    m = load_matrix()
    st = resolve(m, parse_spec("pytorch-cu121", m))
    closure = closure_for(st, resolve=False)[0]
    team = tmp_path / "team"
    (team / "install").mkdir(parents=True)
    (team / "install" / "notes.md").write_text("ours\n")
    (team / "requirements.txt").write_text("einops\n")
    with pytest.raises(InputError, match=r"it holds install, requirements.txt that envgen "
                                         r"did not render"):
        context.write_context(st, closure, team)
    assert (team / "install" / "notes.md").read_text() == "ours\n"
    assert (team / "requirements.txt").read_text() == "einops\n"
    (team / "Dockerfile").write_text("FROM debian\n")
    with pytest.raises(InputError, match="Dockerfile, install, requirements.txt"):
        context.write_context(st, closure, team)
    other = tmp_path / "other"
    other.mkdir()
    (other / "README.md").write_text("kept\n")
    context.write_context(st, closure, other)          # nothing of its own is replaced
    assert (other / "README.md").read_text() == "kept\n"
    assert (other / "Dockerfile").read_text().startswith(context.HEADER)
    (other / "install" / "stale.txt").write_text("old render\n")
    context.write_context(st, closure, other)          # envgen's own folder: rendered again
    assert not (other / "install" / "stale.txt").exists()


def test_a_project_whose_label_would_overflow_a_dockerfile_line_is_refused_at_render(
        tmp_path):
    """Every copied file is in the image's stack label (about 160 bytes each): past a
    Dockerfile line's 65,535 bytes BuildKit cannot parse the file, so render refuses it
    naming envgen.yaml, and writes nothing."""
    (tmp_path / "src").mkdir()
    for i in range(450):
        (tmp_path / "src" / f"module_{i:04d}.py").write_text(f"X = {i}\n")
    (tmp_path / "envgen.yaml").write_text("stack: pytorch-cu121\nname: big\ncopy: [src/]\n")
    r = cli("render", "-o", "out", cwd=tmp_path, env={"ENVGEN_HOME": str(tmp_path / "h")})
    assert r.returncode == 2, r.stderr
    assert "envgen.yaml: " in r.stderr and "450 copied files" in r.stderr, r.stderr
    assert "over the 65,535 a Dockerfile line may hold" in r.stderr
    assert not (tmp_path / "out").exists()
    for i in range(300, 450):   # fewer files: it renders
        (tmp_path / "src" / f"module_{i:04d}.py").unlink()
    r = cli("render", "-o", "out", cwd=tmp_path, env={"ENVGEN_HOME": str(tmp_path / "h")})
    assert r.returncode == 0, r.stderr
    assert max(len(x) for x in (tmp_path / "out" / "Dockerfile").read_bytes().split(b"\n")) \
        <= 65535


def test_a_folders_hidden_files_are_not_copied_and_one_named_alone_is_refused(folder):
    (folder / "conf" / ".gitignore").write_text("*.ckpt\n")
    (folder / "conf" / ".env").write_text("WANDB_API_KEY=secret\n")
    (folder / "conf" / ".cache").mkdir()
    (folder / "conf" / ".cache" / "x").write_text("x\n")
    files = project.load(folder / "envgen.yaml").layer.files
    assert sorted(f[1] for f in files if f[1].startswith("settings/")) == ["settings/a.yaml"]
    (folder / "envgen.yaml").write_text(GOOD.replace("  - train.py", "  - conf/.env"))
    with pytest.raises(MatrixError, match="relative path inside the project"):
        project.load(folder / "envgen.yaml")
