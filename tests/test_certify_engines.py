"""One certification function for every engine (certify/run.py): a fake engine, Docker over
the fake daemon and Apptainer over a fake `apptainer` program all go through `certify`,
and their certificates differ only in what each engine's Sandbox records."""
from __future__ import annotations

import hashlib
import json

import pytest
from fakes import FakeContainer, FakeEngine
from test_apptainer_unit import HEADER, _fake
from test_certify_unit import FakeClient, FakeImage, _report, _stack

from envgen.certify.run import certify
from envgen.core.errors import CheckFailed
from envgen.runtime.docker import Target
from envgen.runtime.engine import ApptainerEngine, DockerEngine
from envgen.runtime.host import HostGpus
from envgen.smoke import SMOKE_DIR

COMMON = {"schema", "image_id", "image_tags", "profile", "params", "stack", "payload",
          "envgen_version", "level", "passed", "exit_code", "host", "preflight", "report",
          "created", "seconds"}
NO_GPU = HostGpus(None, ())


@pytest.fixture(scope="module")
def matrix():
    from envgen.matrix import load_matrix
    return load_matrix()


@pytest.fixture(scope="module")
def st(matrix):
    return _stack(matrix, "pytorch-cu121")


def _target(st):
    return Target("sha256:" + "cd" * 32, ("fake/x:1",), st, {}, "envgen", {}, (), "")


def test_a_fake_engine_is_certified_by_the_same_function(st):
    e = FakeEngine(_target(st), _report())
    cert = certify(e, "fake/x:1", NO_GPU, gpus="none", tags=("fake/x:2",), measure="full")
    assert set(cert) == COMMON | {"fake"} and cert["passed"] and cert["level"] == "cpu"
    assert cert["image_tags"] == ["fake/x:1", "fake/x:2"]
    assert cert["profile"] == "fake-full" and cert["params"]["measure"] == "full"
    assert cert["payload"] == {"path": "/fake/torch_smoke.py", "sha256": "0" * 64}
    assert cert["host"] == {"driver": None, "gpus": [], "gpu_access": "fake", "fake": "1.0",
                            "docker": None, "runtime": "fake", "kernel": "6.1"}
    assert cert["preflight"] == ["a fake note"] and cert["fake"] == {"runs": 1}
    assert e.runs[0][:2] == ["python", "/fake/torch_smoke.py"]
    assert e.runs[0][e.runs[0].index("--measure") + 1] == "full"
    assert e.sandboxes[0].entered and e.sandboxes[0].left


def test_what_an_engine_does_not_certify_its_certificate_does_not_record(st):
    cert = certify(FakeEngine(_target(st), _report(), certifies=()), "fake/x:1", NO_GPU,
                   gpus="none")
    assert "measure" not in cert["params"] and cert["preflight"] == ["a fake note"]


def test_the_engine_words_a_failed_run(st):
    with pytest.raises(CheckFailed, match=r"within 5 s \(fake run ended\)"):
        certify(FakeEngine(_target(st), None, hang=True), "x", NO_GPU, gpus="none",
                timeout=5)
    with pytest.raises(CheckFailed, match="the fake payload exited 1 without a report"):
        certify(FakeEngine(_target(st), None, exit_code=1), "x", NO_GPU, gpus="none")


def _sif(tmp_path, monkeypatch, st, report):
    """A SIF whose label carries `st`, and a fake apptainer that prints `report` for exec,
    noting its argv and the sha256 of the payload it was shown."""
    sif = tmp_path / "x.sif"
    sif.write_bytes(HEADER)
    labels = {"io.envgen.stack": json.dumps(st.to_json()), "io.envgen.image.id": "sha256:"
              + "ab" * 32}
    (tmp_path / "inspect.json").write_text(json.dumps(
        {"data": {"attributes": {"labels": labels}}}))
    (tmp_path / "report.json").write_text(json.dumps(report))
    monkeypatch.setenv("ENVGEN_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("ENVGEN_APPTAINER", _fake(tmp_path, f"""
case "$1" in
  --version) echo "apptainer version 1.3.4" ;;
  inspect) cat {tmp_path}/inspect.json ;;
  exec) printf '%s\\n' "$@" > {tmp_path}/argv
        for a in "$@"; do case "$a" in *:/opt/envgen-payload:ro)
          sha256sum "${{a%%:*}}/torch_smoke.py" > {tmp_path}/seen ;; esac; done
        cat {tmp_path}/report.json ;;
esac"""))
    return sif


def test_a_sif_is_certified_by_the_same_function(tmp_path, monkeypatch, st):
    sif = _sif(tmp_path, monkeypatch, st, _report())
    cert = certify(ApptainerEngine(), str(sif), NO_GPU, gpus="none", timeout=60)
    assert set(cert) == COMMON | {"sif", "isolation"} and cert["passed"]
    own = hashlib.sha256((SMOKE_DIR / "torch_smoke.py").read_bytes()).hexdigest()
    assert cert["payload"] == {"path": "/opt/envgen-payload/torch_smoke.py", "sha256": own,
                               "bound": "read-only, from this envgen"}
    assert (tmp_path / "seen").read_text().split()[0] == own
    assert cert["image_id"] == cert["sif"]["sha256"] == "sha256:" + hashlib.sha256(
        HEADER).hexdigest()
    assert cert["image_tags"] == [str(sif)] and cert["profile"] == "apptainer"
    assert cert["params"] == {"gpus": "none", "steps": None, "multi_gpu": False,
                              "timeout": 60}
    assert cert["host"]["gpu_access"] == "none" and cert["host"]["apptainer"] == "1.3.4"
    assert cert["sif"]["from_image_id"] == "sha256:" + "ab" * 32
    argv = (tmp_path / "argv").read_text().split("\n")
    assert argv[argv.index("--network") + 1] == "none" and str(sif) in argv
    assert not list((tmp_path / "home" / "tmp").iterdir())   # the bound copy is gone


def test_docker_and_apptainer_certificates_differ_only_in_the_engine_record(
        tmp_path, monkeypatch, st):
    sif = _sif(tmp_path, monkeypatch, st, _report())
    a = certify(ApptainerEngine(), str(sif), NO_GPU, gpus="none")
    c = FakeClient(FakeImage(st), FakeContainer(_report()))
    d = certify(DockerEngine(c), "envgen/test:1", NO_GPU, gpus="none")
    assert set(a) - COMMON == {"sif", "isolation"}
    assert set(d) - COMMON == {"image_content", "run_profile"}
    assert set(d["params"]) - set(a["params"]) == {"measure"}
    for key in ("schema", "stack", "level", "passed", "exit_code", "report", "preflight"):
        assert a[key] == d[key], key


def test_a_sif_payload_without_a_report_is_worded_for_apptainer(tmp_path, monkeypatch, st):
    sif = _sif(tmp_path, monkeypatch, st, None)
    (tmp_path / "report.json").write_text("")
    with pytest.raises(CheckFailed, match="exited 0 under apptainer without a report"):
        certify(ApptainerEngine(), str(sif), NO_GPU, gpus="none")
