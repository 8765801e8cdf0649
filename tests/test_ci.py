"""envgen ci: the GitHub workflow and docker-bake.json, parsed back as a reader would."""
import json

import pytest
import yaml

from envgen import ci
from envgen.cli import main
from envgen.matrix import load_matrix
from envgen.resolve import resolve
from envgen.spec import parse_spec


@pytest.fixture(scope="module")
def m():
    return load_matrix()


def workflow(specs):
    return yaml.safe_load(ci.github_workflow(specs, version="0.1.0"))


def test_github_workflow_builds_every_stack_then_certifies_on_a_gpu_runner():
    w = workflow(["pytorch-cu121", "pytorch-cu128"])
    jobs = w["jobs"]
    assert list(jobs) == ["build", "certify", "lock", "verify"]
    assert jobs["build"]["runs-on"] == "ubuntu-latest"
    assert jobs["build"]["strategy"]["matrix"]["stack"] == ["pytorch-cu121", "pytorch-cu128"]
    runs = [s.get("run", "") for s in jobs["build"]["steps"]]
    assert 'envgen build "${{ matrix.stack }}" --certify --gpus none --json' in runs
    assert "python -m pip install envgen==0.1.0" in runs
    assert jobs["certify"]["runs-on"] == ["self-hosted", "gpu"]
    assert jobs["certify"]["needs"] == "build"
    assert any("--gpus all" in s.get("run", "") for s in jobs["certify"]["steps"])


def test_github_workflow_locks_and_verifies_the_committed_lock():
    jobs = workflow(["pytorch-cu121"])["jobs"]
    lock_runs = [s.get("run", "") for s in jobs["lock"]["steps"]]
    assert "envgen lock pytorch-cu121 -o envgen.lock --json" in lock_runs
    verify = next(s for s in jobs["verify"]["steps"] if "run" in s and "verify" in s["run"])
    assert verify["run"] == "envgen verify envgen.lock --json"
    assert verify["if"] == "hashFiles('envgen.lock') != ''"


def test_github_workflow_trigger_key_survives_yaml_1_1_readers():
    text = ci.github_workflow(["pytorch-cu121"])
    assert "'on':" in text                       # unquoted `on` reads as True in YAML 1.1
    assert "on" in yaml.safe_load(text)
    assert "&id" not in text and "*id" not in text     # no anchors for GitHub to trip on


def test_github_workflow_quotes_specs_with_shell_and_yaml_metacharacters():
    spec = "torch>=2.4,python=3.11"
    w = workflow([spec])
    assert w["jobs"]["build"]["strategy"]["matrix"]["stack"] == [spec]
    lock = [s["run"] for s in w["jobs"]["lock"]["steps"] if "run" in s and "lock" in s["run"]]
    assert lock == ["envgen lock 'torch>=2.4,python=3.11' -o envgen.lock --json"]


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


def test_cli_ci_github_prints_parseable_yaml(capsys):
    assert main(["ci", "github"]) == 0
    w = yaml.safe_load(capsys.readouterr().out)
    assert w["jobs"]["build"]["strategy"]["matrix"]["stack"] == ["pytorch-cu121",
                                                                 "pytorch-cu126",
                                                                 "pytorch-cu128"]


def test_cli_ci_bake_prints_json_for_the_named_specs(capsys):
    assert main(["ci", "bake", "pytorch-cu126", "pytorch-cpu"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert list(doc["target"]) == ["pytorch-cu126", "pytorch-cpu"]


def test_cli_ci_with_an_unknown_spec_is_exit_2_and_prints_nothing(capsys):
    assert main(["ci", "github", "tensorflow-cu121"]) == 2
    out = capsys.readouterr()
    assert out.out == "" and "unknown framework" in out.err
