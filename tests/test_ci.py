"""envgen ci: the GitHub workflow and docker-bake.json, parsed back as a reader would."""
import argparse
import json
import os
import shlex
import shutil
import subprocess
from importlib.metadata import PathDistribution

import pytest
import yaml

from envgen.cli import build_parser, main
from envgen.core.errors import InputError
from envgen.matrix import load_matrix
from envgen.render import ci
from envgen.resolve.spec import parse_spec
from envgen.resolve.stack import resolve

COMMIT = "0123456789abcdef0123456789abcdef01234567"
GIT = f"git+https://github.com/envgen/envgen@{COMMIT}"
HASHED = "envgen-gpu==0.2.0 --hash=sha256:" + "ab" * 32


@pytest.fixture(scope="module")
def m():
    return load_matrix()


def workflow(specs, source=GIT, **kw):
    return yaml.safe_load(ci.github_workflow(specs, envgen_source=source, **kw))


def runs(job):
    return [s["run"] for s in job["steps"] if "run" in s]


def install_runs(w):
    return {job: next(s["run"] for s in j["steps"] if s.get("name") == "Install envgen (pinned)")
            for job, j in w["jobs"].items()}


# ---- the job graph ------------------------------------------------------------------------

def test_the_workflow_builds_once_certifies_on_the_gpu_then_merges_the_locks():
    jobs = workflow(["pytorch-cu121", "pytorch-cu128"])["jobs"]
    assert list(jobs) == ["build", "certify-gpu", "lock", "verify"]
    assert "needs" not in jobs["build"] and "needs" not in jobs["verify"]
    assert jobs["certify-gpu"]["needs"] == "build"
    assert jobs["lock"]["needs"] == "certify-gpu"
    assert jobs["build"]["runs-on"] == jobs["lock"]["runs-on"] == "ubuntu-latest"
    assert jobs["certify-gpu"]["runs-on"] == ["self-hosted", "gpu"]
    for name in ("build", "certify-gpu"):
        assert jobs[name]["strategy"]["matrix"]["stack"] == ["pytorch-cu121", "pytorch-cu128"]
    assert all(isinstance(j["timeout-minutes"], int) for j in jobs.values())


def test_build_certifies_on_the_cpu_pushes_by_digest_and_uploads_the_stack_lock():
    build = workflow(["pytorch-cu121"])["jobs"]["build"]
    assert build["env"]["ENVGEN_STACK"] == "${{ matrix.stack }}"
    r = runs(build)
    assert r.index('envgen build "$ENVGEN_STACK" --certify --gpus none --json') < \
        r.index('envgen lock "$ENVGEN_STACK" --push "$ENVGEN_REPOSITORY" '
                '-o "envgen-$ENVGEN_KEY.lock" --json')
    upload = build["steps"][-1]
    assert upload["uses"] == ci.UPLOAD_ARTIFACT
    assert upload["with"]["name"] == "envgen-cpu-${{ matrix.key }}"
    assert upload["with"]["path"] == "envgen-${{ matrix.key }}.lock"


def test_the_gpu_job_verifies_the_pushed_image_then_certifies_it_by_digest():
    gpu = workflow(["pytorch-cu121"])["jobs"]["certify-gpu"]
    steps = gpu["steps"]
    download = next(s for s in steps if s.get("uses") == ci.DOWNLOAD_ARTIFACT)
    assert download["with"]["name"] == "envgen-cpu-${{ matrix.key }}"
    r = runs(gpu)
    # the build job's lock holds a CPU pass (--level cpu); the GPU lock is then verified
    # at the level its CUDA stack needs
    assert r.index('envgen verify "envgen-$ENVGEN_KEY.lock" --level cpu --json') < \
        r.index('envgen certify "$ENVGEN_IMAGE" --gpus all --json') < \
        r.index('envgen lock "$ENVGEN_IMAGE" -o "envgen-$ENVGEN_KEY.lock" --json') < \
        r.index('envgen verify "envgen-$ENVGEN_KEY.lock" --json')
    assert steps[-1]["with"]["name"] == "envgen-gpu-${{ matrix.key }}"
    assert gpu["strategy"]["max-parallel"] == 1


def test_the_pinned_image_is_read_from_the_stack_lock_and_checked(tmp_path):
    gpu = workflow(["pytorch-cu121"])["jobs"]["certify-gpu"]
    line = next(r for r in runs(gpu) if "python -c" in r)
    code = shlex.split(line.split("$(", 1)[1])[2]       # python -c CODE LOCK
    pinned = "ghcr.io/team/envgen@sha256:" + "cd" * 32
    good, bad = tmp_path / "good.lock", tmp_path / "bad.lock"
    good.write_text(json.dumps({"stacks": {"pytorch-cu121": {"image": {"pinned": pinned}}}}))
    bad.write_text(json.dumps({"stacks": {"x": {"image": {"pinned": "a\nEVIL=1"}}}}))
    ok = subprocess.run(["python3", "-c", code, str(good)], capture_output=True, text=True)
    assert (ok.returncode, ok.stdout) == (0, pinned + "\n")
    refused = subprocess.run(["python3", "-c", code, str(bad)], capture_output=True, text=True)
    assert refused.returncode == 1 and refused.stdout == ""


def test_lock_merges_the_gpu_locks_and_never_runs_on_pull_requests():
    jobs = workflow(["pytorch-cu121"])["jobs"]
    lock = jobs["lock"]
    assert lock["if"] == jobs["certify-gpu"]["if"] == "github.event_name != 'pull_request'"
    download = next(s for s in lock["steps"] if s.get("uses") == ci.DOWNLOAD_ARTIFACT)
    assert download["with"] == {"pattern": "envgen-gpu-*", "path": "locks",
                                "merge-multiple": True}
    assert "envgen lock --merge locks/envgen-*.lock -o envgen.lock --json" in runs(lock)
    assert lock["steps"][-1]["with"]["name"] == "envgen.lock"


def test_a_pull_request_builds_on_the_cpu_but_pushes_nothing():
    build = workflow(["pytorch-cu121"])["jobs"]["build"]
    assert "if" not in build
    guarded = {s.get("name") or s.get("uses"): s.get("if") for s in build["steps"]}
    assert guarded["Build and certify on the CPU"] is None
    for name in ("Log in to the registry", "Push by digest and lock",
                 ci.UPLOAD_ARTIFACT):
        assert guarded[name] == "github.event_name != 'pull_request'"


def test_pull_requests_verify_the_committed_lock_on_a_hosted_runner():
    verify = workflow(["pytorch-cu121"])["jobs"]["verify"]
    assert verify["runs-on"] == "ubuntu-latest"
    assert "if" not in verify                            # pull requests included
    step = next(s for s in verify["steps"] if s.get("run") == "envgen verify envgen.lock --json")
    assert step["if"] == "hashFiles('envgen.lock') != ''"
    assert verify["steps"][0]["uses"] == ci.CHECKOUT


def test_specs_reach_run_lines_through_the_environment_with_a_safe_key():
    spec = "torch>=2.4,python=3.11"
    w = workflow([spec])
    build = w["jobs"]["build"]
    assert build["strategy"]["matrix"]["stack"] == [spec]
    assert build["strategy"]["matrix"]["include"] == [{"stack": spec,
                                                       "key": "torch-2.4-python-3.11"}]
    assert all("${{" not in r for j in w["jobs"].values() for r in runs(j))


def test_keys_stay_unique():
    assert ci._keys(["a>1", "a<1", "a=1"]) == ["a-1", "a-1-2", "a-1-3"]


# ---- installing envgen --------------------------------------------------------------------

def test_every_job_installs_envgen_from_the_pinned_commit_quoted():
    w = workflow(["pytorch-cu121"])
    for job, run in install_runs(w).items():
        assert shlex.split(run) == ["python", "-m", "pip", "install", GIT], job


def test_a_hashed_requirement_is_installed_in_hash_checking_mode():
    run = install_runs(workflow(["pytorch-cu121"], source=HASHED))["build"]
    words = shlex.split(run)
    assert HASHED in words                         # one word: the quotes hold
    assert "--require-hashes" in words and "--no-deps" in words


def test_envgen_is_never_installed_by_name_from_pypi():
    for source in (GIT, HASHED):
        text = ci.github_workflow(["pytorch-cu121"], envgen_source=source)
        assert "envgen==" not in text


@pytest.mark.parametrize("source", [
    "x; rm -rf /",
    "envgen==0.2.0",
    "envgen-gpu>=0.2.0",
    "envgen-gpu>=0.2 --hash=sha256:" + "ab" * 32,
    "envgen-gpu==0.2.0 --hash=sha256:" + "ab" * 31,
    "envgen-gpu==not.a.version! --hash=sha256:" + "ab" * 32,
    "git+https://github.com/envgen/envgen",
    "git+https://github.com/envgen/envgen@main",
    f"git+https://github.com/envgen/envgen@{COMMIT[:12]}",
    f"git+http://github.com/envgen/envgen@{COMMIT}",
    f"git+https://user:token@github.com/envgen/envgen@{COMMIT}",
    f"git+https://github.com/envgen/envgen$(id)@{COMMIT}",
    f"git+https://github.com/envgen/envgen@{COMMIT}\n",
    f"git+https://github.com/envgen/envgen@{COMMIT}#egg=x",
    "",
])
def test_an_unpinned_or_hostile_envgen_source_is_refused(source):
    with pytest.raises(InputError) as e:
        ci.github_workflow(["pytorch-cu121"], envgen_source=source)
    assert e.value.exit_code == 2
    assert "envgen source" in e.value.message


def test_the_default_source_comes_from_pep_610_vcs_info(tmp_path, monkeypatch):
    pkg, info = tmp_path / "envgen", tmp_path / "envgen_gpu-0.2.0.dist-info"
    pkg.mkdir()
    info.mkdir()
    (pkg / "__init__.py").write_text("")
    (info / "direct_url.json").write_text(json.dumps({
        "url": "https://github.com/envgen/envgen.git",
        "vcs_info": {"vcs": "git", "commit_id": COMMIT, "requested_revision": "main"}}))
    monkeypatch.setattr(ci.importlib.metadata, "distribution",
                        lambda name: PathDistribution(info))
    monkeypatch.setattr(ci, "__file__", str(pkg / "render" / "ci.py"))
    assert ci.default_envgen_source() == f"git+https://github.com/envgen/envgen.git@{COMMIT}"


def test_an_editable_install_has_no_vcs_pin(tmp_path, monkeypatch):
    info = tmp_path / "envgen_gpu-0.2.0.dist-info"
    info.mkdir()
    (info / "direct_url.json").write_text(json.dumps(
        {"url": "file:///work/main", "dir_info": {"editable": True}}))
    monkeypatch.setattr(ci.importlib.metadata, "distribution",
                        lambda name: PathDistribution(info))
    assert ci._from_direct_url() is None


def git(repo, *args):
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)


@pytest.fixture
def checkout(tmp_path, monkeypatch):
    """A checkout envgen 'runs from', committed, with an ssh origin that holds HEAD."""
    repo = tmp_path / "repo"
    (repo / "envgen" / "render").mkdir(parents=True)
    (repo / "envgen" / "render" / "ci.py").write_text("")
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", ".")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qm", "c")
    git(repo, "remote", "add", "origin", "git@github.com:envgen/envgen.git")
    git(repo, "update-ref", "refs/remotes/origin/main", "HEAD")
    monkeypatch.setattr(ci, "_from_direct_url", lambda: None)
    monkeypatch.setattr(ci, "__file__", str(repo / "envgen" / "render" / "ci.py"))
    return repo


def test_the_default_source_is_the_pushed_head_of_a_clean_checkout(checkout):
    head = subprocess.run(["git", "-C", str(checkout), "rev-parse", "HEAD"],
                          capture_output=True, text=True).stdout.strip()
    assert ci.default_envgen_source() == f"git+https://github.com/envgen/envgen.git@{head}"


def test_a_dirty_checkout_has_no_default_source(checkout):
    (checkout / "envgen" / "render" / "ci.py").write_text("# changed\n")
    assert ci.default_envgen_source() is None


def test_an_unpushed_head_has_no_default_source(checkout):
    git(checkout, "update-ref", "-d", "refs/remotes/origin/main")
    assert ci.default_envgen_source() is None


def test_credentials_in_the_origin_never_reach_the_workflow():
    assert ci._public_https("https://bot:ghp_secret@github.com/envgen/envgen/") == \
        "https://github.com/envgen/envgen"
    assert ci._public_https("ssh://git@github.com:22/envgen/envgen") == \
        "https://github.com/envgen/envgen"
    assert ci._public_https("/srv/git/envgen") is None


def test_without_a_pin_the_workflow_installs_this_release_by_version(monkeypatch):
    from envgen import __version__
    monkeypatch.setattr(ci, "default_envgen_source", lambda: None)
    source = ci.pick_envgen_source(None)
    assert source == f"envgen-gpu=={__version__}"
    assert "pinned by version only" in ci.by_version_only(source)
    w = yaml.safe_load(ci.github_workflow(["pytorch-cu121"]))
    for job, run in install_runs(w).items():
        assert shlex.split(run) == ["python", "-m", "pip", "install", source], job
    assert ci.by_version_only(GIT) is None and ci.by_version_only(HASHED) is None


# ---- the registry -------------------------------------------------------------------------

def test_the_default_registry_is_ghcr_with_the_owner_lowercased_and_the_job_token():
    w = workflow(["pytorch-cu121"])
    build = w["jobs"]["build"]
    assert build["permissions"] == {"contents": "read", "packages": "write"}
    assert w["permissions"] == {"contents": "read"}
    for name in ("certify-gpu", "verify"):
        assert w["jobs"][name]["permissions"]["packages"] == "read"
    assert 'ENVGEN_REPOSITORY=ghcr.io/${GITHUB_REPOSITORY_OWNER,,}/envgen' in \
        "\n".join(runs(build))
    login = next(s for s in build["steps"] if s.get("uses") == ci.DOCKER_LOGIN)
    assert login["with"] == {"registry": "ghcr.io", "username": "${{ github.actor }}",
                             "password": "${{ secrets.GITHUB_TOKEN }}"}
    assert w["defaults"]["run"]["shell"] == "bash"          # ${VAR,,} is bash


def test_another_registry_logs_in_with_the_team_secrets():
    w = workflow(["pytorch-cu121"], registry="registry.example.com:5000/team/envgen")
    assert w["env"]["ENVGEN_REPOSITORY"] == "registry.example.com:5000/team/envgen"
    build = w["jobs"]["build"]
    assert "permissions" not in build
    login = next(s for s in build["steps"] if s.get("uses") == ci.DOCKER_LOGIN)
    assert login["with"] == {"registry": "registry.example.com:5000",
                             "username": "${{ secrets.ENVGEN_REGISTRY_USER }}",
                             "password": "${{ secrets.ENVGEN_REGISTRY_PASSWORD }}"}
    assert not any("GITHUB_REPOSITORY_OWNER" in r for r in runs(build))


def test_a_literal_ghcr_repository_uses_the_job_token():
    w = workflow(["pytorch-cu121"], registry="ghcr.io/my-org/envgen")
    assert w["jobs"]["build"]["permissions"]["packages"] == "write"
    assert w["env"]["ENVGEN_REPOSITORY"] == "ghcr.io/my-org/envgen"


def test_docker_hub_logs_in_without_a_registry_host():
    w = workflow(["pytorch-cu121"], registry="myorg/envgen")
    login = next(s for s in w["jobs"]["build"]["steps"]
                 if s.get("uses") == ci.DOCKER_LOGIN)
    assert "registry" not in login["with"]


@pytest.mark.parametrize("registry", [
    "ghcr.io/${{ github.actor }}/envgen",
    "ghcr.io/${{ github.repository_owner }}",
    "Registry.example.com/Team",
    "registry.example.com/team; rm -rf /",
    "registry.example.com/team/envgen:latest",
])
def test_a_bad_registry_is_refused(registry):
    with pytest.raises(InputError):
        ci.github_workflow(["pytorch-cu121"], envgen_source=GIT, registry=registry)


def test_github_workflow_trigger_key_survives_yaml_1_1_readers():
    text = ci.github_workflow(["pytorch-cu121"], envgen_source=GIT)
    assert "'on':" in text                       # unquoted `on` reads as True in YAML 1.1
    assert "on" in yaml.safe_load(text)
    assert "&id" not in text and "*id" not in text     # no anchors for GitHub to trip on


def test_a_forks_pull_request_verifies_without_the_team_secrets_it_does_not_get():
    """GitHub gives a fork's pull request no secrets, and the login action fails on empty
    ones: verify skips that login there and pulls anonymously; pushes still log in."""
    w = workflow(["pytorch-cu121"], registry="registry.example.com/team/envgen")
    verify = {s.get("name") or s.get("uses"): s for s in w["jobs"]["verify"]["steps"]}
    login = verify["Log in to the registry"]
    assert login["with"]["username"] == "${{ secrets.ENVGEN_REGISTRY_USER }}"
    assert login["if"] == ("hashFiles('envgen.lock') != '' && "
                           "(github.event_name != 'pull_request' || "
                           "github.event.pull_request.head.repo.fork == false)")
    assert verify["Verify the committed lock"]["if"] == "hashFiles('envgen.lock') != ''"
    build_login = next(s for s in w["jobs"]["build"]["steps"] if s.get("uses") == ci.DOCKER_LOGIN)
    assert build_login["if"] == "github.event_name != 'pull_request'"
    gpu_login = next(s for s in w["jobs"]["certify-gpu"]["steps"]
                     if s.get("uses") == ci.DOCKER_LOGIN)
    assert "if" not in gpu_login                        # the job runs on pushes only
    # the job token is there for a fork's pull request too: that login stays
    ghcr = workflow(["pytorch-cu121"])["jobs"]["verify"]["steps"]
    assert next(s for s in ghcr if s.get("uses") == ci.DOCKER_LOGIN)["if"] == \
        "hashFiles('envgen.lock') != ''"


# ---- a matrix of the repository's own -----------------------------------------------------

def test_a_matrix_folder_reaches_every_envgen_step_from_each_jobs_checkout():
    w = workflow(["pytorch-cu121"], matrix="team/matrix")
    assert w["env"] == {"ENVGEN_MATRIX": "team/matrix"}
    for name, job in w["jobs"].items():
        steps = job["steps"]
        first_run = next(i for i, s in enumerate(steps) if "envgen" in s.get("run", ""))
        assert any(s.get("uses") == ci.CHECKOUT for s in steps[:first_run]), name
        assert "env" not in job or "ENVGEN_MATRIX" not in job["env"], name
    assert "env" not in workflow(["pytorch-cu121"])          # the bundled matrix: as before
    both = workflow(["pytorch-cu121"], matrix="matrices",
                    registry="registry.example.com/team/envgen")["env"]
    assert both == {"ENVGEN_REPOSITORY": "registry.example.com/team/envgen",
                    "ENVGEN_MATRIX": "matrices"}


@pytest.mark.parametrize("given", ["--matrix", "ENVGEN_MATRIX"])
def test_cli_ci_github_builds_locks_and_verifies_with_the_matrix_it_was_given(capsys, monkeypatch,
                                                                            given):
    from pathlib import Path
    monkeypatch.chdir(Path(__file__).resolve().parents[1])
    monkeypatch.delenv("ENVGEN_MATRIX", raising=False)
    argv = ["ci", "github", "pytorch-cu121", "--envgen-source", GIT]
    if given == "--matrix":
        argv = ["--matrix", "matrices", *argv]
    else:
        monkeypatch.setenv("ENVGEN_MATRIX", "matrices")
    assert main(argv) == 0
    w = yaml.safe_load(capsys.readouterr().out)
    assert w["env"]["ENVGEN_MATRIX"] == "matrices"
    refresh = ["ci", "github", "--refresh", "--envgen-source", GIT]
    assert main(["--matrix", "matrices", *refresh] if given == "--matrix" else refresh) == 0
    (job,) = yaml.safe_load(capsys.readouterr().out)["jobs"].values()
    assert any(s.get("run", "").startswith("envgen --matrix matrices ") for s in job["steps"])


def test_cli_ci_github_refuses_a_matrix_its_jobs_cannot_find(capsys, monkeypatch):
    from pathlib import Path
    folder = str(Path(__file__).resolve().parents[1] / "matrices")
    monkeypatch.setenv("ENVGEN_MATRIX", folder)
    assert main(["ci", "github", "pytorch-cu121", "--envgen-source", GIT]) == 2
    out = capsys.readouterr()
    assert out.out == "" and "relative path inside the repository" in out.err
    assert main(["ci", "bake", "pytorch-cu121"]) == 0    # a bake file runs no envgen


@pytest.mark.parametrize("kind", ["github", "bake"])
def test_two_specs_of_one_stack_are_refused_naming_both(capsys, kind):
    """One lock entry and one bake target per stack: a second spec of the same stack would
    make two legs that lock one key (lock --merge fails) or lose a bake target."""
    extra = ["--envgen-source", GIT] if kind == "github" else []
    assert main(["ci", kind, "pytorch-cu121", "torch==2.3.1", *extra]) == 2
    out = capsys.readouterr()
    assert out.out == ""
    assert "'pytorch-cu121' and 'torch==2.3.1' both resolve to stack pytorch-cu121" in out.err
    assert main(["ci", kind, "pytorch-cu121", "pytorch-cu128", *extra]) == 0


# ---- bake and the CLI ---------------------------------------------------------------------

def test_default_specs_are_a_sensible_subset_of_the_matrix(m):
    assert ci.default_specs(m.stack_names()) == ["pytorch-cu121", "pytorch-cu126",
                                                 "pytorch-cu128"]
    assert ci.default_specs(["pytorch-cpu"]) == ["pytorch-cpu"]


def test_bake_has_one_target_per_stack_and_a_default_group(m):
    stacks = [resolve(m, parse_spec(s, m)) for s in ("pytorch-cu121", "pytorch-cu128")]
    doc = json.loads(ci.bake(stacks))
    assert doc["group"]["default"]["targets"] == ["pytorch-cu121", "pytorch-cu128"]
    t = doc["target"]["pytorch-cu121"]
    assert t["context"] == "${ENVGEN_CONTEXTS}/pytorch-cu121"
    assert t["dockerfile"] == "Dockerfile"
    assert t["secret"] == ["id=ca,src=/etc/ssl/certs/ca-certificates.crt"]
    assert t["tags"][0].startswith("envgen/pytorch-cu121:2.4.1-py3.11")
    assert json.loads(t["labels"]["io.envgen.stack"]) == stacks[0].to_json()
    assert doc["variable"]["ENVGEN_CONTEXTS"]["default"] == "envgen-contexts"


def test_cli_ci_github_prints_parseable_yaml(capsys, monkeypatch):
    monkeypatch.setattr(ci, "default_envgen_source", lambda: GIT)
    assert main(["ci", "github"]) == 0
    w = yaml.safe_load(capsys.readouterr().out)
    assert w["jobs"]["build"]["strategy"]["matrix"]["stack"] == ["pytorch-cu121",
                                                                 "pytorch-cu126",
                                                                 "pytorch-cu128"]
    assert shlex.split(install_runs(w)["build"])[-1] == GIT


def test_cli_ci_github_from_a_non_git_install_pins_the_release_and_warns(capsys, monkeypatch):
    from envgen import __version__
    monkeypatch.setattr(ci, "default_envgen_source", lambda: None)
    assert main(["ci", "github"]) == 0
    out = capsys.readouterr()
    w = yaml.safe_load(out.out)
    assert shlex.split(install_runs(w)["build"])[-1] == f"envgen-gpu=={__version__}"
    assert out.err.startswith("warning: CI installs envgen-gpu==") and "--envgen-source" in out.err
    assert main(["ci", "github", "--refresh"]) == 0
    assert "pinned by version only" in capsys.readouterr().err
    assert main(["ci", "github", "--envgen-source", GIT]) == 0
    assert capsys.readouterr().err == ""


def _ci_options() -> set[str]:
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return {o for a in sub.choices["ci"]._actions for o in a.option_strings}


@pytest.mark.skipif("--envgen-source" not in _ci_options(),
                    reason="`envgen ci` has no --envgen-source flag yet")
def test_cli_refuses_an_injected_envgen_source(capsys):
    assert main(["ci", "github", "--envgen-source", "x; rm -rf /"]) == 2
    out = capsys.readouterr()
    assert out.out == "" and "envgen source 'x; rm -rf /'" in out.err


@pytest.mark.skipif("--registry" not in _ci_options(),
                    reason="`envgen ci` has no --registry flag yet")
def test_cli_passes_the_registry_through(capsys):
    assert main(["ci", "github", "--envgen-source", GIT,
                 "--registry", "registry.example.com/team/envgen"]) == 0
    w = yaml.safe_load(capsys.readouterr().out)
    assert w["env"]["ENVGEN_REPOSITORY"] == "registry.example.com/team/envgen"


def test_cli_ci_bake_prints_json_for_the_named_specs(capsys):
    assert main(["ci", "bake", "pytorch-cu126", "pytorch-cpu"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert list(doc["target"]) == ["pytorch-cu126", "pytorch-cpu"]


def test_cli_ci_with_an_unknown_spec_is_exit_2_and_prints_nothing(capsys):
    assert main(["ci", "github", "mxnet-cu121"]) == 2
    out = capsys.readouterr()
    assert out.out == "" and "unknown framework" in out.err


# ---- the scheduled matrix refresh ---------------------------------------------------------

def refresh_workflow(**kw):
    return yaml.safe_load(ci.refresh_workflow(envgen_source=GIT, **kw))


def test_the_refresh_workflow_runs_weekly_and_opens_a_pull_request():
    w = refresh_workflow()
    assert w[True if True in w else "on"]["schedule"][0]["cron"] == "23 5 * * 1"
    assert w["permissions"] == {"contents": "read"} and w["concurrency"]
    (job,) = w["jobs"].values()
    assert job["timeout-minutes"] == 30
    assert job["permissions"] == {"contents": "write", "pull-requests": "write"}
    steps = {s.get("name"): s for s in job["steps"]}
    run = steps["Refresh the matrix and the closures"]["run"]
    # the refresh's own exit status decides the step: a refusal fails the run
    assert run.startswith("envgen --matrix matrices matrix refresh > ")
    pr = steps["Open or update the pull request"]
    assert pr["uses"].startswith("peter-evans/create-pull-request@")
    assert pr["with"]["add-paths"] == "matrices/**"
    assert pr["with"]["body-path"] == "${{ runner.temp }}/envgen-refresh.md"
    assert shlex.split(steps["Install envgen (pinned)"]["run"])[-1] == GIT


def test_every_envgen_line_of_the_refresh_workflow_parses_with_envgen_itself():
    parser = build_parser()
    (job,) = refresh_workflow(folder="team/matrix")["jobs"].values()
    lines = [s["run"] for s in job["steps"] if s.get("run", "").startswith("envgen ")]
    assert len(lines) == 2
    for line in lines:
        argv = shlex.split(line.split(" > ")[0])[1:]
        args = parser.parse_args(argv)
        assert args.matrix == "team/matrix"


@pytest.mark.parametrize("folder", ["../up", "/abs", "a b", "m;rm -rf ~", "$(id)", "", "a/./b",
                                    "x\n"])
def test_a_hostile_matrix_folder_is_refused(folder):
    with pytest.raises(InputError):
        ci.refresh_workflow(envgen_source=GIT, folder=folder)


def test_cli_ci_github_refresh(capsys, monkeypatch):
    monkeypatch.setattr(ci, "default_envgen_source", lambda: GIT)
    assert main(["--matrix", "matrices", "ci", "github", "--refresh"]) == 0
    w = yaml.safe_load(capsys.readouterr().out)
    assert list(w["jobs"]) == ["refresh"]
    assert main(["ci", "github", "pytorch-cu121", "--refresh"]) == 2
    assert "--refresh" in capsys.readouterr().err


# ---- conventions: timeouts, concurrency, the GPU runner, action versions, build logs ------

def both_workflows(**kw):
    return {"main": workflow(["pytorch-cu121", "torch>=2.4,python=3.11"], **kw),
            "refresh": refresh_workflow()}


def uses(w):
    return {s["uses"] for j in w["jobs"].values() for s in j["steps"] if "uses" in s}


def test_every_job_of_both_workflows_has_a_timeout_build_and_certify_longest():
    for name, w in both_workflows().items():
        for job, j in w["jobs"].items():
            assert isinstance(j["timeout-minutes"], int) and j["timeout-minutes"] > 0, (name, job)
    jobs = workflow(["pytorch-cu121"])["jobs"]
    assert jobs["lock"]["timeout-minutes"] < jobs["certify-gpu"]["timeout-minutes"] <= \
        jobs["build"]["timeout-minutes"]


def test_a_newer_run_cancels_only_a_pull_requests_older_run():
    w = workflow(["pytorch-cu121"])
    assert w["concurrency"] == {"group": "${{ github.workflow }}-${{ github.ref }}",
                                "cancel-in-progress": "${{ github.event_name == 'pull_request' }}"}
    # the refresh runs all push one branch: one group whatever the ref, never cancelled
    assert refresh_workflow()["concurrency"] == {"group": "envgen-matrix-refresh",
                                                 "cancel-in-progress": False}


def test_every_action_runs_by_the_commit_of_its_current_release_with_the_tag_beside_it():
    import re
    majors = {"actions/checkout": "v7", "actions/setup-python": "v7",
              "actions/upload-artifact": "v7", "actions/download-artifact": "v8",
              "docker/login-action": "v4", "peter-evans/create-pull-request": "v8"}
    assert {a: tag.split(".")[0] for a, (_, tag) in ci.ACTIONS.items()} == majors
    pinned = {f"{a}@{commit}" for a, (commit, _) in ci.ACTIONS.items()}
    texts = {"build": ci.github_workflow(["pytorch-cu121"], envgen_source=GIT),
             "refresh": ci.refresh_workflow(envgen_source=GIT)}
    for name, text in texts.items():
        assert uses(yaml.safe_load(text)) <= pinned, name
        lines = [line.strip() for line in text.splitlines() if "uses:" in line]
        assert lines, name
        for line in lines:   # zizmor's unpinned-uses: a commit, never a tag or a branch
            m = re.fullmatch(r"(?:- )?uses: ([\w.-]+/[\w.-]+)@([0-9a-f]{40}) # (v[0-9.]+)", line)
            assert m, line
            assert ci.ACTIONS[m[1]] == (m[2], m[3]), line


def test_no_checkout_leaves_the_token_in_the_git_config():
    """zizmor's artipacked: checkout persists the job's token in .git/config unless told."""
    for w in both_workflows().values():
        for j in w["jobs"].values():
            for s in j["steps"]:
                if s.get("uses", "").startswith("actions/checkout@"):
                    assert s["with"]["persist-credentials"] is False


def test_a_failed_build_uploads_its_log_from_the_folder_envgen_writes_it_to(monkeypatch):
    from envgen.core import home as state
    steps = workflow(["pytorch-cu121"])["jobs"]["build"]["steps"]
    names = [s.get("name") for s in steps]
    home = steps[names.index("envgen's files in the job's temporary folder")]["run"]
    assert home == 'echo "ENVGEN_HOME=$RUNNER_TEMP/envgen" >> "$GITHUB_ENV"'
    build = names.index("Build and certify on the CPU")
    assert names.index("envgen's files in the job's temporary folder") < build
    log = steps[build + 1]
    assert (log["name"], log["if"], log["uses"]) == ("Upload the build log", "failure()",
                                                     ci.UPLOAD_ARTIFACT)
    assert log["with"]["name"] == "envgen-build-log-${{ matrix.key }}"
    # the path it uploads is the one envgen's build writes its logs under
    monkeypatch.setenv("ENVGEN_HOME", "/runner/temp/envgen")
    assert log["with"]["path"] == "${{ runner.temp }}/envgen/logs/"
    assert log["with"]["path"].replace("${{ runner.temp }}", "/runner/temp") == \
        f"{state.logs_dir()}/"
    # a later step that fails (the push) is not the build's: it uploads nothing
    assert all(s.get("if") != "failure()" for s in steps[build + 2:])


def test_the_gpu_runner_labels_default_repeat_and_split_on_commas():
    assert workflow(["pytorch-cu121"])["jobs"]["certify-gpu"]["runs-on"] == ["self-hosted",
                                                                             "gpu"]
    w = workflow(["pytorch-cu121"], gpu_runner=["self-hosted,linux", "h200", "linux"])
    assert w["jobs"]["certify-gpu"]["runs-on"] == ["self-hosted", "linux", "h200"]
    assert w["jobs"]["build"]["runs-on"] == "ubuntu-latest"
    assert ci.gpu_runner_labels("gpu-a100.x_1") == ["gpu-a100.x_1"]


@pytest.mark.parametrize("label", ["", "a,,b", "gpu,", "self-hosted, gpu", "gpu\nx", "gpu:",
                                   "${{ github.actor }}", "[gpu]", "a b", "é", "{x: 1}",
                                   "x" * 257, "'gpu'", "gpu#1"])
def test_a_gpu_runner_label_that_is_not_plain_is_refused(label):
    with pytest.raises(InputError) as e:
        ci.github_workflow(["pytorch-cu121"], envgen_source=GIT, gpu_runner=[label])
    assert e.value.exit_code == 2 and e.value.message.startswith("--gpu-runner ")


def test_cli_passes_the_gpu_runner_labels_and_refuses_a_bad_one(capsys):
    assert main(["ci", "github", "--envgen-source", GIT, "--gpu-runner", "self-hosted,h200",
                 "--gpu-runner", "linux"]) == 0
    w = yaml.safe_load(capsys.readouterr().out)
    assert w["jobs"]["certify-gpu"]["runs-on"] == ["self-hosted", "h200", "linux"]
    assert main(["ci", "github", "--envgen-source", GIT, "--gpu-runner", "gpu\n- evil"]) == 2
    out = capsys.readouterr()
    assert out.out == "" and "--gpu-runner 'gpu\\n- evil' is not a plain runner label" in out.err
    assert "Traceback" not in out.err


@pytest.mark.parametrize("argv", [["ci", "bake", "--gpu-runner", "gpu"],
                                  ["ci", "github", "--refresh", "--gpu-runner", "gpu"],
                                  ["ci", "devcontainer", "pytorch-cu121", "--gpu-runner", "gpu"],
                                  ["ci", "github", "--lock", "envgen.lock"]])
def test_cli_refuses_a_flag_that_does_not_go_with_the_kind(capsys, argv):
    assert main(argv) == 2
    out = capsys.readouterr()
    assert out.out == "" and ("--gpu-runner" in out.err or "--lock" in out.err)


# ---- the real linters: actionlint and the workflow JSON schema ----------------------------

def linter(name: str, extra: str) -> str:
    """The linter's command, from this venv or PATH; the test is skipped without it."""
    import shutil
    import sys
    from pathlib import Path
    here = Path(sys.executable).with_name(name)
    found = str(here) if here.exists() else shutil.which(name)
    if found is None:
        pytest.skip(f"{name} is not installed: .venv/bin/pip install -e '.[{extra}]'")
    return found


TOOLS = ("actionlint", "vendor.github-workflows", "custom.github-workflows-require-timeout")


def lint(tool, path, labels=("gpu",)):
    """Run `tool` on the workflow at `path`: actionlint (told the self-hosted runner's custom
    labels, as a team's .github/actionlint.yaml would tell it), or check-jsonschema with one
    of its bundled schemas (no network)."""
    if tool == "actionlint":
        config = path.parent / "actionlint.yaml"
        config.write_text(yaml.safe_dump({"self-hosted-runner": {"labels": list(labels)}}))
        argv = [linter("actionlint", "actionlint"), "-no-color", "-config-file", str(config),
                str(path)]
    else:
        argv = [linter("check-jsonschema", "test"), "--builtin-schema", tool, str(path)]
    return subprocess.run(argv, capture_output=True, text=True, timeout=120)


def write_workflow(tmp_path, text, name="envgen.yml"):
    folder = tmp_path / ".github" / "workflows"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(text)
    return folder / name


LINTED = {
    "the default stacks": dict(specs=["pytorch-cu121", "pytorch-cu126", "pytorch-cu128"]),
    "one stack, hashed source": dict(specs=["pytorch-cpu"], envgen_source=HASHED),
    "a spec with odd characters": dict(specs=["torch>=2.4,python=3.11", "jax-cuda12"]),
    "another registry": dict(specs=["pytorch-cu121"],
                             registry="registry.example.com:5000/team/envgen"),
    "Docker Hub": dict(specs=["pytorch-cu128", "lightning-cu128"], registry="myorg/envgen"),
    "a literal ghcr repository": dict(specs=["pytorch-cu121"], registry="ghcr.io/my-org/envgen"),
    "GPU runner labels": dict(specs=["pytorch-cu121"], gpu_runner=["self-hosted,linux,h200"]),
    "a hosted GPU label": dict(specs=["pytorch-cu121"], gpu_runner=["gpu-h100.8x"],
                               registry="registry.example.com/team"),
    "a matrix folder": dict(specs=["pytorch-cu121"], matrix="team/matrix",
                            registry="registry.example.com/team"),
}


@pytest.mark.parametrize("tool", TOOLS)
@pytest.mark.parametrize("case", LINTED, ids=list(LINTED))
def test_the_workflow_passes_actionlint_and_the_workflow_schemas(tmp_path, case, tool):
    kw = dict(LINTED[case])
    specs = kw.pop("specs")
    source = kw.pop("envgen_source", GIT)
    labels = [label for item in kw.get("gpu_runner") or ["gpu"] for label in item.split(",")]
    path = write_workflow(tmp_path, ci.github_workflow(specs, envgen_source=source, **kw))
    r = lint(tool, path, labels)
    assert r.returncode == 0, f"{tool}: {r.stdout}{r.stderr}"


@pytest.mark.parametrize("tool", TOOLS)
@pytest.mark.parametrize("folder", ["matrices", "team/matrix"])
def test_the_refresh_workflow_passes_actionlint_and_the_workflow_schemas(tmp_path, folder,
                                                                         tool):
    path = write_workflow(tmp_path, ci.refresh_workflow(envgen_source=GIT, folder=folder),
                          "envgen-refresh.yml")
    r = lint(tool, path)
    assert r.returncode == 0, f"{tool}: {r.stdout}{r.stderr}"


@pytest.mark.parametrize("tool", TOOLS)
def test_the_cli_output_passes_the_linters(tmp_path, capsys, tool):
    assert main(["ci", "github", "--envgen-source", GIT, "--gpu-runner", "h200"]) == 0
    path = write_workflow(tmp_path, capsys.readouterr().out)
    r = lint(tool, path, labels=["h200"])
    assert r.returncode == 0, f"{tool}: {r.stdout}{r.stderr}"


def broken_workflow() -> dict:
    """The generated workflow broken three ways each linter here catches."""
    w = workflow(["pytorch-cu121"])
    w["jobs"]["build"]["timeout-minutes"] = "two hours"          # not a number
    w["jobs"]["lock"]["needs"] = "no-such-job"                  # a job that does not exist
    w["jobs"]["verify"]["steps"].append({"run": "true", "uses": ci.CHECKOUT})  # run and uses
    return w


def dump(w) -> str:
    return yaml.dump(w, Dumper=ci._NoAliases, sort_keys=False, width=1000)


@pytest.mark.parametrize("tool", TOOLS[:2])
def test_the_linters_fail_a_broken_workflow(tmp_path, tool):
    """The checks above can fail: the workflow, broken, is refused."""
    r = lint(tool, write_workflow(tmp_path, dump(broken_workflow())))
    assert r.returncode != 0, r.stdout
    if tool == "actionlint":
        assert "no-such-job" in r.stdout


def test_a_job_without_a_timeout_fails_the_timeout_schema_alone(tmp_path):
    w = workflow(["pytorch-cu121"])
    del w["jobs"]["lock"]["timeout-minutes"]
    path = write_workflow(tmp_path, dump(w))
    assert lint("vendor.github-workflows", path).returncode == 0
    r = lint("custom.github-workflows-require-timeout", path)
    assert r.returncode != 0 and "timeout-minutes" in r.stdout


def test_the_team_workflow_doc_shows_what_envgen_prints(capsys):
    from pathlib import Path
    doc = (Path(__file__).resolve().parents[1] / "docs" / "team-workflow.md").read_text()
    shown_yaml = doc.split("```yaml\n", 1)[1].split("```", 1)[0]
    assert shown_yaml == ci.github_workflow(["pytorch-cu121", "pytorch-cu128"],
                                            envgen_source=GIT)
    shown_json = doc.split("```json\n", 1)[1].split("```", 1)[0]
    assert main(["ci", "devcontainer", "pytorch-cu121"]) == 0
    assert shown_json == capsys.readouterr().out


# ---- envgen's own workflow ----------------------------------------------------------------

def own_workflow():
    from pathlib import Path
    return Path(__file__).resolve().parents[1] / ".github" / "workflows" / "ci.yml"


def test_envgens_own_workflow_runs_what_ci_runs_with_actions_pinned_by_commit():
    import re
    text = own_workflow().read_text()
    w = yaml.safe_load(text)
    steps = [s for j in w["jobs"].values() for s in j["steps"]]
    assert [s["run"] for s in steps if "run" in s] == [".ci/run"]
    assert w["permissions"] == {"contents": "read"}
    for line in (x.strip() for x in text.splitlines() if "uses:" in x):
        m = re.fullmatch(r"(?:- )?uses: ([\w.-]+/[\w.-]+)@([0-9a-f]{40}) # (v[0-9.]+)", line)
        assert m and ci.ACTIONS[m[1]] == (m[2], m[3]), line
    for s in steps:
        if s.get("uses", "").startswith("actions/checkout@"):
            assert s["with"]["persist-credentials"] is False


@pytest.mark.parametrize("tool", TOOLS)
def test_envgens_own_workflow_passes_the_linters(tmp_path, tool):
    r = lint(tool, write_workflow(tmp_path, own_workflow().read_text(), "ci.yml"))
    assert r.returncode == 0, f"{tool}: {r.stdout}{r.stderr}"


HCL_LIKE = ["python", "-c", "print(1)  # ${upper(ENVGEN_CONTEXTS)} ${timestamp()} $${x} "
            "%{ if true }x%{ endif } print('${') $$ %"]


def _project_stack(m):
    from envgen.core.model import ProjectLayer
    from envgen.resolve import project
    st = resolve(m, parse_spec("pytorch-cu121", m))
    return project.apply(st, ProjectLayer(name="trainer", smoke=tuple(HCL_LIKE)))


def test_bake_escapes_what_hcl_would_fill_in(m):
    doc = json.loads(ci.bake([_project_stack(m)]))
    label = doc["target"]["pytorch-cu121"]["labels"]["io.envgen.stack"]
    assert "$${upper(ENVGEN_CONTEXTS)}" in label and "%%{ if true }" in label
    assert "$$${x}" in label and " $$ %" in label


@pytest.mark.skipif(subprocess.run(["docker", "buildx", "version"], capture_output=True)
                    .returncode != 0 if shutil.which("docker") else True,
                    reason="needs the docker CLI with buildx")
def test_a_real_bake_reads_the_labels_back_as_envgen_wrote_them(m, tmp_path):
    """buildx's own reading of the file (`bake --print`, no build): the image's stack label
    is the stack envgen resolved, smoke command and all, whatever the CI's environment."""
    st = _project_stack(m)
    f = tmp_path / "docker-bake.json"
    f.write_text(ci.bake([st]))
    r = subprocess.run(["docker", "buildx", "bake", "-f", str(f), "--print"],
                       capture_output=True, text=True, timeout=60, cwd=tmp_path,
                       env={**os.environ, "ENVGEN_CONTEXTS": "from-ci-env"})
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)["target"]["pytorch-cu121"]
    assert json.loads(got["labels"]["io.envgen.stack"]) == st.to_json()
    assert json.loads(got["labels"]["io.envgen.stack"])["project"]["smoke"] == HCL_LIKE
    assert got["context"] == "from-ci-env/pytorch-cu121"
