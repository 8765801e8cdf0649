"""envgen ci devcontainer SPEC: a devcontainer.json for the stack's image, started the way
certification starts it, as the image's own user."""
import copy
import json
import re
from pathlib import Path

import pytest
from certificates import made

from envgen.cli import main
from envgen.core.errors import InputError
from envgen.core.image import default_tag
from envgen.matrix import load_matrix
from envgen.render import devcontainer
from envgen.resolve.spec import parse_spec
from envgen.resolve.stack import Host, resolve
from envgen.runtime import profile as run_profile

ROOT = Path(__file__).resolve().parents[1]
M = load_matrix()
ID = "sha256:" + "a" * 64
PINNED = "registry.example.com/team/pytorch-cu121@sha256:" + "c" * 64


def stack(spec):
    return resolve(M, parse_spec(spec, M), Host())


def run(capsys, *argv):
    rc = main(["ci", "devcontainer", *argv])
    out, err = capsys.readouterr()
    return rc, out, err


def doc(capsys, *argv):
    rc, out, err = run(capsys, *argv)
    assert rc == 0, err
    return json.loads(out)


# ---- the document -------------------------------------------------------------------------

def test_a_gpu_stack_runs_its_image_with_a_gpu_as_the_images_user(capsys):
    d = doc(capsys, "pytorch-cu121")
    st = stack("pytorch-cu121")
    assert list(d) == ["name", "image", "hostRequirements", "runArgs", "containerEnv",
                       "remoteUser", "overrideCommand"]
    assert d["image"] == default_tag(st) == "envgen/pytorch-cu121:2.4.1-py3.11-debian-bookworm"
    assert d["name"] == "envgen pytorch-cu121: torch 2.4.1, CUDA 12.1"
    assert d["hostRequirements"] == {"gpu": True}
    assert d["runArgs"] == ["--shm-size=8g", "--ulimit=memlock=-1",
                            "--ulimit=stack=67108864"]
    assert d["containerEnv"] == run_profile.NCCL_ENV
    assert d["remoteUser"] == "envgen"
    assert d["overrideCommand"] is True        # the image's CMD is the smoke payload


def test_the_gpu_reaches_the_container_once():
    """hostRequirements.gpu makes the Dev Containers CLI add `--gpus all`; a second --gpus in
    runArgs would be a second device request, the GPUs injected twice."""
    d = json.loads(devcontainer.devcontainer(stack("pytorch-cu128"), "x/y:1"))
    assert d["hostRequirements"]["gpu"] is True
    assert not any(a.startswith(("--gpus", "--device", "--runtime")) for a in d["runArgs"])


def test_the_run_flags_and_user_are_those_certification_and_the_image_use():
    # certification's containers start through the Docker engine with the profile's flags
    certify_source = (ROOT / "envgen" / "runtime" / "engine.py").read_text()
    assert "profile.docker_kwargs()" in certify_source
    kw = run_profile.Profile().docker_kwargs()
    assert kw["shm_size"] == "8g"
    assert [(u.name, u.soft, u.hard) for u in kw["ulimits"]] == list(run_profile.ULIMITS)
    users = re.findall(r"^USER (\S+)$", (ROOT / "templates" / "Dockerfile.j2").read_text(),
                       flags=re.M)
    assert users[-1] == devcontainer.REMOTE_USER


@pytest.mark.parametrize("spec", ["pytorch-cpu", "jax-cpu"])
def test_a_cpu_stack_makes_the_gpu_optional_and_sets_no_nccl_variables(capsys, spec):
    d = doc(capsys, spec)
    assert d["hostRequirements"] == {"gpu": "optional"}
    assert "containerEnv" not in d
    assert d["name"].endswith(", CPU")
    assert d["image"] == default_tag(stack(spec))


def test_a_framework_over_pytorch_and_a_requirement_spec(capsys):
    d = doc(capsys, "lightning-cu128")
    assert d["image"].startswith("envgen/lightning-cu128:")
    assert d["name"].startswith("envgen lightning-cu128: lightning ")
    d = doc(capsys, "torch>=2.4,python=3.12")
    assert d["image"] == default_tag(stack("torch>=2.4,python=3.12"))


def test_every_value_has_the_type_the_containers_dev_spec_gives_it(capsys):
    """The devcontainer JSON schema is not available offline (check-jsonschema does not
    bundle it), so the fields used are checked against the spec's types here."""
    for spec in ("pytorch-cu121", "pytorch-cpu", "jax-cuda12"):
        d = doc(capsys, spec)
        assert isinstance(d["name"], str) and isinstance(d["image"], str)
        assert d["hostRequirements"]["gpu"] in (True, "optional")
        assert all(isinstance(a, str) for a in d["runArgs"])
        assert all(isinstance(k, str) and isinstance(v, str)
                   for k, v in d.get("containerEnv", {}).items())
        assert isinstance(d["remoteUser"], str) and isinstance(d["overrideCommand"], bool)


# ---- where the image comes from -----------------------------------------------------------

def test_a_registry_names_the_image_envgen_lock_pushes(capsys):
    d = doc(capsys, "pytorch-cu121", "--registry", "registry.example.com:5000/team")
    tag = default_tag(stack("pytorch-cu121")).split(":", 1)[1]
    assert d["image"] == f"registry.example.com:5000/team/pytorch-cu121:{tag}"


@pytest.mark.parametrize("registry", ["ghcr.io/${{ github.repository_owner }}/envgen",
                                      "Registry.example.com/Team", "x; rm -rf /",
                                      "registry.example.com/team:latest", "a\nb", ""])
def test_a_bad_registry_is_refused_with_exit_2(capsys, registry):
    rc, out, err = run(capsys, "pytorch-cu121", "--registry", registry)
    assert (rc, out) == (2, "") and "Traceback" not in err


def lock(**change):
    entry = {"stack": stack("pytorch-cu121").to_json(),
             "image": {"tag": "envgen/pytorch-cu121:2.4.1", "id": ID, "repo_digests": [],
                       "pinned": PINNED, "layers": []},
             "base": {"reference": "envgen/base", "name": None, "id": None},
             "requirements": [],
             "certificate": made(image_id=ID, stack=stack("pytorch-cu121").to_json())}
    entry["image"].update(change)
    return {"lock_version": 1, "created": "2026-12-01T00:00:00Z", "matrix_sha256": "x",
            "stacks": {"pytorch-cu121": entry}}


def write(tmp_path, data):
    path = tmp_path / "envgen.lock"
    path.write_text(json.dumps(data, indent=2))
    return str(path)


def test_a_lock_gives_the_image_pinned_by_digest(tmp_path, capsys):
    d = doc(capsys, "pytorch-cu121", "--lock", write(tmp_path, lock()))
    assert d["image"] == PINNED
    assert d["hostRequirements"] == {"gpu": True}


def test_the_lock_describes_the_locked_stack_not_todays_resolution(tmp_path, capsys):
    data = lock()
    data["stacks"]["pytorch-cu121"]["stack"]["framework"]["version"] = "2.4.0"
    d = doc(capsys, "pytorch-cu121", "--lock", write(tmp_path, data))
    assert d["name"] == "envgen pytorch-cu121: torch 2.4.0, CUDA 12.1"


def test_a_stack_the_lock_lacks_or_has_not_pinned_is_exit_2_naming_the_lock(tmp_path, capsys):
    path = write(tmp_path, lock())
    rc, out, err = run(capsys, "pytorch-cu128", "--lock", path)
    assert (rc, out) == (2, "")
    assert path in err and "no stack 'pytorch-cu128' (it has: pytorch-cu121)" in err
    path = write(tmp_path, lock(pinned=None))
    rc, out, err = run(capsys, "pytorch-cu121", "--lock", path)
    assert (rc, out) == (2, "") and "not pinned by digest" in err


def test_a_hostile_lock_is_refused_before_anything_is_printed(tmp_path, capsys):
    data = lock(pinned='x@sha256:1", "postCreateCommand": "id')
    rc, out, err = run(capsys, "pytorch-cu121", "--lock", write(tmp_path, data))
    assert (rc, out) == (2, "") and "image.pinned" in err
    data = copy.deepcopy(lock())
    data["stacks"]["pytorch-cu121"]["stack"]["python"] = "3.11\nRUN id"
    rc, out, _ = run(capsys, "pytorch-cu121", "--lock", write(tmp_path, data))
    assert (rc, out) == (2, "")


def test_from_lock_raises_input_error_with_the_file():
    with pytest.raises(InputError) as e:
        devcontainer.from_lock({"stacks": {}}, "pytorch-cu121", "team.lock")
    assert e.value.file == "team.lock" and "it has: none" in e.value.message


# ---- the command line ---------------------------------------------------------------------

@pytest.mark.parametrize("specs", [[], ["pytorch-cu121", "pytorch-cu128"]])
def test_devcontainer_takes_exactly_one_spec(capsys, specs):
    rc, out, err = run(capsys, *specs)
    assert (rc, out) == (2, "") and "exactly one SPEC" in err


@pytest.mark.parametrize("spec", ["pytorch-cu121;rm -rf /", "$(id)", "pytorch-cu121\n",
                                  "mxnet-cu121", "../../etc/passwd", "x" * 5000])
def test_a_hostile_spec_is_refused_with_exit_2_and_no_output(capsys, spec):
    rc, out, err = run(capsys, spec)
    assert (rc, out) == (2, "")
    assert err.startswith("envgen: error:") and "Traceback" not in err
    assert len(err.splitlines()) <= 3


@pytest.mark.parametrize("argv", [["--envgen-source", "git+https://github.com/e/e@" + "0" * 40],
                                  ["--registry", "r.example.com/t", "--lock", "envgen.lock"],
                                  ["--refresh"], ["--gpu-runner", "gpu"]])
def test_flags_that_do_not_go_with_a_devcontainer_are_refused(capsys, argv):
    rc, out, err = run(capsys, "pytorch-cu121", *argv)
    assert (rc, out) == (2, "") and "Traceback" not in err


def test_the_cli_prints_what_the_library_renders(capsys):
    rc, out, _ = run(capsys, "pytorch-cu126")
    st = stack("pytorch-cu126")
    assert rc == 0 and out == devcontainer.devcontainer(st, default_tag(st))


# ---- a project's image: named NAME.STACK, as lock names and pushes it ---------------------

@pytest.fixture
def project_stack(tmp_path, monkeypatch, capsys):
    """The stack of a project folder made by `envgen init pytorch-cu121` (name rev-proj)."""
    from envgen.resolve.request import host
    from envgen.resolve.request import resolve as resolve_here
    folder = tmp_path / "rev-proj"
    folder.mkdir()
    monkeypatch.chdir(folder)
    assert main(["init", "pytorch-cu121"]) == 0
    capsys.readouterr()
    st = resolve_here(M, "pytorch-cu121", host(M))
    assert st.key == "rev-proj.pytorch-cu121"
    return st


def test_a_projects_registry_image_is_the_one_lock_push_pushes(project_stack, capsys,
                                                               monkeypatch):
    from types import SimpleNamespace

    from envgen.commands import lock as lock_command
    from envgen.runtime import registry
    pushed = []
    monkeypatch.setattr(registry, "push", lambda c, image_id, target, tag:
                        pushed.append(f"{target}:{tag}") or f"{target}@sha256:{'c' * 64}")
    client = SimpleNamespace(images=SimpleNamespace(get=lambda i: SimpleNamespace(attrs={})))
    entry = {"certificate": {"passed": True, "image_id": ID},
             "image": {"id": ID, "tag": default_tag(project_stack)}}
    # lock names the entry by the stack's key (lock_entry) and pushes it under that name
    lock_command._push(client, project_stack.key, entry, "ghcr.io/team/envgen", lambda m: None)
    d = doc(capsys, "pytorch-cu121", "--registry", "ghcr.io/team/envgen")
    assert [d["image"]] == pushed
    assert d["image"] == ("ghcr.io/team/envgen/rev-proj.pytorch-cu121:"
                          "pytorch-cu121-py3.11-debian-bookworm")


def test_a_projects_lock_gives_its_image_pinned_by_digest(project_stack, tmp_path, capsys):
    data = lock()
    entry = data["stacks"].pop("pytorch-cu121")
    entry["stack"] = project_stack.to_json()
    entry["certificate"] = made(image_id=ID, stack=project_stack.to_json())
    data["stacks"][project_stack.key] = entry
    d = doc(capsys, "pytorch-cu121", "--lock", write(tmp_path, data))
    assert d["image"] == PINNED
    assert d["name"].startswith("envgen pytorch-cu121: torch ")
