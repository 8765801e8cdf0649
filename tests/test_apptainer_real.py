"""Apptainer for real: `envgen build jax-cpu`, `envgen sif` of that image (docker save, then
apptainer build), and `envgen certify FILE.sif` at level cpu through Debian sid's apptainer
run by tools/apptainer.sh (its root file system is made once and cached); then bad SIFs."""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from services import ROOT, SMALL_TAG, envgen

pytestmark = pytest.mark.docker
WRAPPER = str(ROOT / "tools" / "apptainer.sh")


@pytest.fixture(scope="module")
def wrapper():
    if os.geteuid() != 0 or shutil.which("mmdebstrap") is None or shutil.which("unshare") is None:
        pytest.skip("tools/apptainer.sh needs root, mmdebstrap and unshare")
    r = subprocess.run([WRAPPER, "--setup"], capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-2000:]
    return {"ENVGEN_APPTAINER": WRAPPER}


@pytest.fixture(scope="module")
def sif(home, wrapper, built_small, tmp_path_factory):
    """The session's jax-cpu image (conftest `built_small`) made into a SIF."""
    env = {"ENVGEN_HOME": home, **wrapper}
    out = tmp_path_factory.mktemp("sif") / "with space" / "-jax cpu.sif"
    out.parent.mkdir()
    r = envgen("sif", SMALL_TAG, "-o", str(out), "--compression", "lz4", "--json", env=env)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    yield {"path": out, "image_id": built_small["image_id"], "made": json.loads(r.stdout),
           "env": env}


def test_the_sif_records_its_digest_and_the_image_it_came_from(sif):
    made = sif["made"]
    digest = hashlib.sha256(sif["path"].read_bytes()).hexdigest()
    assert made["sha256"] == f"sha256:{digest}"
    assert made["image_id"] == sif["image_id"] and made["stack"] == "jax-cpu"
    assert made["size_bytes"] == sif["path"].stat().st_size > 50_000_000


def test_certify_sif_passes_at_level_cpu_keyed_by_its_digest(sif):
    r = envgen("certify", "--json", "--", str(sif["path"]), env=sif["env"], timeout=900)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    cert = json.loads(r.stdout)
    assert cert["passed"] and cert["level"] == "cpu"
    assert cert["image_id"] == sif["made"]["sha256"] and cert["profile"] == "apptainer"
    assert cert["sif"]["from_image_id"] == sif["image_id"]
    assert cert["host"]["runtime"] == "apptainer" and cert["host"]["apptainer"].startswith("1.")
    assert "--containall" in cert["isolation"]["options"]
    opts = cert["isolation"]["options"]
    assert "--no-home" in opts and "--nv" not in opts
    checks = {c["name"]: c for c in cert["report"]["checks"]}
    assert checks["train"]["passed"] and checks["versions"]["passed"]
    assert Path(cert["_path"]).is_file()
    shown = envgen("certs", "show", cert["image_id"][7:19], "--json", env=sif["env"])
    assert json.loads(shown.stdout)["sif"]["sha256"] == cert["image_id"]


def test_the_payload_runs_as_the_image_user_without_network_or_capabilities(sif):
    from envgen.certify.apptainer import exec_options
    opts, _ = exec_options(False, True, None)
    probe = "id -u; grep CapEff /proc/self/status; tail -n +3 /proc/net/dev | cut -d: -f1"
    r = subprocess.run([WRAPPER, "exec", *opts, str(sif["path"]), "sh", "-c", probe],
                       capture_output=True, text=True, timeout=300, cwd=sif["path"].parent,
                       env={**os.environ, "ENVGEN_APPTAINER_BINDS": str(sif["path"].parent)})
    assert r.returncode == 0, r.stderr[-1000:]
    lines = [ln.strip() for ln in r.stdout.splitlines()]
    assert lines[0] == "10001"
    assert lines[1].split() == ["CapEff:", "0000000000000000"]
    assert lines[2:] == ["lo"]


def _no_apptainer_left(marker: str) -> None:
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    assert [ln for ln in ps.splitlines() if marker in ln and "ps -eo" not in ln] == []


@pytest.mark.parametrize("damage", ["truncated", "missing", "not a sif"])
def test_a_bad_sif_is_one_sentence_and_exit_2(sif, tmp_path, damage):
    bad = tmp_path / f"-{damage}.sif"
    if damage == "truncated":
        with open(sif["path"], "rb") as f:
            bad.write_bytes(f.read(1 << 20))
    elif damage == "not a sif":
        bad.write_text("hello\n" * 20)
    r = envgen("certify", "--", str(bad), env=sif["env"], timeout=300)
    assert r.returncode == 2, r.stderr
    assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr, r.stderr
    assert str(bad) in r.stderr or bad.name in r.stderr
    _no_apptainer_left(bad.name)
