"""envgen ci: the GitHub workflow and docker-bake.json, parsed back as a reader would."""
import argparse
import json
import shlex
import subprocess
from importlib.metadata import PathDistribution

import pytest
import yaml

from envgen import ci
from envgen.cli import build_parser, main
from envgen.errors import InputError
from envgen.matrix import load_matrix
from envgen.resolve import resolve
from envgen.spec import parse_spec

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
    assert upload["uses"] == "actions/upload-artifact@v4"
    assert upload["with"]["name"] == "envgen-cpu-${{ matrix.key }}"
    assert upload["with"]["path"] == "envgen-${{ matrix.key }}.lock"


def test_the_gpu_job_verifies_the_pushed_image_then_certifies_it_by_digest():
    gpu = workflow(["pytorch-cu121"])["jobs"]["certify-gpu"]
    steps = gpu["steps"]
    download = next(s for s in steps if s.get("uses") == "actions/download-artifact@v4")
    assert download["with"]["name"] == "envgen-cpu-${{ matrix.key }}"
    r = runs(gpu)
    assert r.index('envgen verify "envgen-$ENVGEN_KEY.lock" --json') < \
        r.index('envgen certify "$ENVGEN_IMAGE" --gpus all --json') < \
        r.index('envgen lock "$ENVGEN_IMAGE" -o "envgen-$ENVGEN_KEY.lock" --json')
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
    download = next(s for s in lock["steps"] if s.get("uses") == "actions/download-artifact@v4")
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
                 "actions/upload-artifact@v4"):
        assert guarded[name] == "github.event_name != 'pull_request'"


def test_pull_requests_verify_the_committed_lock_on_a_hosted_runner():
    verify = workflow(["pytorch-cu121"])["jobs"]["verify"]
    assert verify["runs-on"] == "ubuntu-latest"
    assert "if" not in verify                            # pull requests included
    step = next(s for s in verify["steps"] if s.get("run") == "envgen verify envgen.lock --json")
    assert step["if"] == "hashFiles('envgen.lock') != ''"
    assert verify["steps"][0]["uses"] == "actions/checkout@v4"


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
    "envgen-gpu==0.2.0",
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
    monkeypatch.setattr(ci, "__file__", str(pkg / "ci.py"))
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
    (repo / "envgen").mkdir(parents=True)
    (repo / "envgen" / "ci.py").write_text("")
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", ".")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qm", "c")
    git(repo, "remote", "add", "origin", "git@github.com:envgen/envgen.git")
    git(repo, "update-ref", "refs/remotes/origin/main", "HEAD")
    monkeypatch.setattr(ci, "_from_direct_url", lambda: None)
    monkeypatch.setattr(ci, "__file__", str(repo / "envgen" / "ci.py"))
    return repo


def test_the_default_source_is_the_pushed_head_of_a_clean_checkout(checkout):
    head = subprocess.run(["git", "-C", str(checkout), "rev-parse", "HEAD"],
                          capture_output=True, text=True).stdout.strip()
    assert ci.default_envgen_source() == f"git+https://github.com/envgen/envgen.git@{head}"


def test_a_dirty_checkout_has_no_default_source(checkout):
    (checkout / "envgen" / "ci.py").write_text("# changed\n")
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


def test_without_a_pin_the_workflow_asks_for_envgen_source(monkeypatch):
    monkeypatch.setattr(ci, "default_envgen_source", lambda: None)
    with pytest.raises(InputError, match="--envgen-source"):
        ci.github_workflow(["pytorch-cu121"])


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
    login = next(s for s in build["steps"] if s.get("uses") == "docker/login-action@v3")
    assert login["with"] == {"registry": "ghcr.io", "username": "${{ github.actor }}",
                             "password": "${{ secrets.GITHUB_TOKEN }}"}
    assert w["defaults"]["run"]["shell"] == "bash"          # ${VAR,,} is bash


def test_another_registry_logs_in_with_the_team_secrets():
    w = workflow(["pytorch-cu121"], registry="registry.example.com:5000/team/envgen")
    assert w["env"]["ENVGEN_REPOSITORY"] == "registry.example.com:5000/team/envgen"
    build = w["jobs"]["build"]
    assert "permissions" not in build
    login = next(s for s in build["steps"] if s.get("uses") == "docker/login-action@v3")
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
                 if s.get("uses") == "docker/login-action@v3")
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


def test_cli_ci_github_without_a_pin_is_exit_2_and_prints_nothing(capsys, monkeypatch):
    monkeypatch.setattr(ci, "default_envgen_source", lambda: None)
    assert main(["ci", "github"]) == 2
    out = capsys.readouterr()
    assert out.out == "" and "--envgen-source" in out.err


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
    assert main(["ci", "github", "tensorflow-cu121"]) == 2
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
