"""The certified bytes are what every teammate gets, for real: the rendered folder builds on
its own with no envgen in the loop and gives the very layers envgen built; `lock --push`
pins a pullable digest in a real registry; a second, independent Docker daemon pulls it by
digest and verifies image ID, certificate, closure and hashes; a rebuild there from the
lock (its base made from the same snapshot) gives the same layer digests; a tampered hash
or an unreachable registry gets one sentence and the contract's exit code.

The lock/push/teammate chain runs on jax-cpu (conftest `built_small`): the code paths are
the stack-independent ones a CUDA stack takes, at a sixth of the bytes pushed, pulled
and built cold again. `make bench` runs the same chain on pytorch-cu121
(bench/reproducible.py: two cold builds and a second daemon, docs/benchmarks.md)."""
from __future__ import annotations

import json
import os
import stat
import subprocess
from pathlib import Path

import pytest
from services import SMALL_TAG, docker, envgen, free_build_cache

pytestmark = pytest.mark.docker
CA = "/etc/ssl/certs/ca-certificates.crt"


def layers(ref: str, host: str | None = None) -> list[str]:
    r = docker("image", "inspect", "--format", "{{json .RootFS.Layers}}", ref, host=host)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def _empty(host: str) -> None:
    """Every image and all build cache off a daemon."""
    for ref in docker("images", "-q", host=host).stdout.split():
        docker("rmi", "-f", ref, host=host)
    free_build_cache(host)


def test_the_rendered_folder_builds_on_its_own_to_identical_layers(built, tmp_path):
    from envgen.runtime import docker as engine
    cli = engine.buildkit_cli()
    if cli is None:
        pytest.skip("no docker CLI that can build with BuildKit")
    out = tmp_path / "ctx"
    r = envgen("render", "pytorch-cu121", "-o", str(out))
    assert r.returncode == 0, r.stderr
    assert (out / "base" / "build-base.sh").is_file() and (out / ".dockerignore").is_file()
    tag = "envgen-test/standalone:ci"
    secret = ["--secret", f"id=ca,src={CA}"] if os.path.exists(CA) else []
    try:
        # Plain docker from nothing but the folder. The daemon's cache answers every step only
        # when each instruction and every file of the context is what envgen built from; the
        # cold rebuild, bit for bit, is the teammate daemon's test below.
        b = subprocess.run([*cli.argv, *secret, "-t", tag, str(out)],
                           capture_output=True, text=True, timeout=1800,
                           env={**os.environ, **dict(cli.env)})
        assert b.returncode == 0, b.stdout[-2000:] + b.stderr[-2000:]
        assert layers(tag) == built["layers"], "same closure, same layers, bit for bit"
        assert len(built["layers"]) >= 7
    finally:
        docker("rmi", tag)


def test_ci_bake_output_builds_with_a_real_buildx_bake(built, tmp_path):
    if docker("buildx", "version").returncode != 0:
        pytest.skip("docker buildx is not installed (tools/bootstrap.sh installs it)")
    contexts = tmp_path / "contexts"
    assert envgen("render", "pytorch-cu121", "-o", str(contexts / "pytorch-cu121")
                  ).returncode == 0
    r = envgen("ci", "bake", "pytorch-cu121")
    assert r.returncode == 0, r.stderr
    (tmp_path / "docker-bake.json").write_text(r.stdout)
    tag = "envgen-test/bake:ci"
    try:
        b = subprocess.run(["docker", "buildx", "bake", "-f", str(tmp_path / "docker-bake.json"),
                            "--set", f"pytorch-cu121.tags={tag}", "--load"],
                           capture_output=True, text=True, timeout=1800, cwd=tmp_path,
                           env={**os.environ, "ENVGEN_CONTEXTS": str(contexts)})
        assert b.returncode == 0, b.stderr[-2000:]
        assert layers(tag) == built["layers"]
    finally:
        docker("rmi", tag)


@pytest.fixture(scope="module")
def pushed(built_small, home, registry, tmp_path_factory):
    lock = tmp_path_factory.mktemp("lock") / "envgen.lock"
    r = envgen("lock", SMALL_TAG, "--push", f"{registry.host}/team", "-o", str(lock), "--json",
               env={"ENVGEN_HOME": home})
    assert r.returncode == 0, r.stdout[-1500:] + r.stderr[-1500:]
    return lock


def test_lock_push_pins_a_pullable_digest_with_the_closure_and_certificate(pushed, built_small,
                                                                           registry):
    data = json.loads(pushed.read_text())
    e = data["stacks"]["jax-cpu"]
    assert e["image"]["pinned"].startswith(f"{registry.host}/team/jax-cpu@sha256:")
    small = built_small
    assert e["image"]["id"] == small["image_id"] and e["image"]["layers"] == small["layers"]
    assert e["certificate"]["image_id"] == small["image_id"] and e["certificate"]["passed"]
    assert e["certificate"]["report"]["checks"], "the whole certificate travels"
    reqs = e["requirements"]
    assert len(reqs) == built_small["closure"]["packages"] and all(r["hashes"] for r in reqs)
    assert e["unlocked"] == [], "every distribution in the image is in the closure"
    assert stat.S_IMODE(pushed.stat().st_mode) == 0o644


def teammate(second_daemon, tmp_path, **extra) -> dict:
    return {"ENVGEN_HOME": str(tmp_path / "teammate-home"), "DOCKER_HOST": second_daemon.host,
            **extra}


def test_a_teammate_daemon_pulls_by_digest_and_verifies(pushed, built_small, second_daemon,
                                                        tmp_path):
    r = envgen("verify", str(pushed), "--json", env=teammate(second_daemon, tmp_path))
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-1000:]
    out = json.loads(r.stdout)
    assert out["ok"] and out["stacks"]["jax-cpu"]["pulled"]
    assert layers(built_small["image_id"], host=second_daemon.host) == built_small["layers"]


def tampered(lock: Path, tmp_path: Path, change) -> Path:
    data = json.loads(lock.read_text())
    change(data["stacks"]["jax-cpu"])
    out = tmp_path / "tampered.lock"
    out.write_text(json.dumps(data, indent=2))
    return out


def test_a_lock_with_a_zeroed_hash_is_drift_naming_the_package(pushed, second_daemon,
                                                               tmp_path):
    def zero(e):
        torch = next(r for r in e["requirements"] if r["name"] == "jaxlib")
        torch["hashes"] = ["sha256:" + "0" * 64]
    bad = tampered(pushed, tmp_path, zero)
    r = envgen("verify", str(bad), "--json", env=teammate(second_daemon, tmp_path))
    assert r.returncode == 1, r.stderr
    drift = json.loads(r.stdout)["stacks"]["jax-cpu"]["drift"]
    assert [d["kind"] for d in drift] == ["hash"] and drift[0]["package"] == "jaxlib"


def test_a_digest_the_registry_lacks_is_drift_and_a_dead_registry_is_exit_3(
        pushed, second_daemon, tmp_path):
    from services import free_port
    missing = tampered(pushed, tmp_path, lambda e: e["image"].update(
        tag=None, id="sha256:" + "1" * 64, pinned=e["image"]["pinned"].split("@")[0] + "@sha256:"
        + "2" * 64))
    r = envgen("verify", str(missing), "--json", env=teammate(second_daemon, tmp_path))
    assert r.returncode == 1, r.stderr
    kinds = [d["kind"] for d in json.loads(r.stdout)["stacks"]["jax-cpu"]["drift"]]
    assert "pull-failed" in kinds
    dead = tampered(pushed, tmp_path, lambda e: e["image"].update(
        tag=None, id="sha256:" + "1" * 64,
        pinned=f"127.0.0.1:{free_port()}/team/x@sha256:" + "2" * 64))
    r = envgen("verify", str(dead), env=teammate(second_daemon, tmp_path))
    assert r.returncode == 3, r.stdout + r.stderr
    assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) <= 3


def test_a_changed_byte_on_the_index_fails_the_rebuild_naming_the_package(pushed, home,
                                                                          tmp_path):
    def bad_hash(e):
        f = next(r for r in e["requirements"] if r["name"] == "opt-einsum")
        f["hashes"] = ["sha256:" + "f" * 64]
    bad = tampered(pushed, tmp_path, bad_hash)
    r = envgen("verify", str(bad), "--rebuild", "--json", env={"ENVGEN_HOME": home})
    assert r.returncode == 1
    drift = json.loads(r.stdout)["stacks"]["jax-cpu"]["drift"]
    failed = [d["message"] for d in drift if d["kind"] == "rebuild-failed"]
    assert failed and "opt-einsum==" in failed[0] and "does not match the sha256" in failed[0]
    assert docker("image", "inspect", "envgen-verify/jax-cpu:rebuild").returncode != 0


def test_a_refused_push_is_exit_3_and_writes_no_lock(built_small, home, readonly_registry,
                                                     tmp_path):
    lock = tmp_path / "envgen.lock"
    r = envgen("lock", SMALL_TAG, "--push", f"{readonly_registry.host}/team", "-o", str(lock),
               env={"ENVGEN_HOME": home})
    assert r.returncode == 3, r.stdout + r.stderr
    assert readonly_registry.host in r.stderr and "Traceback" not in r.stderr
    assert not lock.exists(), "nothing written that claims success"
    tags = docker("image", "inspect", "--format", "{{json .RepoTags}}", SMALL_TAG).stdout
    assert readonly_registry.host not in tags, "no tag left behind for the failed push"


def test_a_rebuild_on_the_teammate_daemon_gives_the_same_layers_base_included(
        pushed, built_small, second_daemon, tmp_path):
    # The teammate's daemon has its own build cache and no base: the base is made there
    # from the pinned snapshot, every layer is built again, and all must match. The pulled
    # image (proven above) is removed first and not pulled again.
    d2 = second_daemon.host
    _empty(d2)
    env = teammate(second_daemon, tmp_path, ENVGEN_BUILD_NETWORK="host")
    try:
        r = envgen("verify", str(pushed), "--rebuild", "--no-pull", "--json", env=env,
                   timeout=2400)
        assert r.returncode == 1, r.stdout[-3000:] + r.stderr[-1000:]
        st = json.loads(r.stdout)["stacks"]["jax-cpu"]
        assert [d["kind"] for d in st["drift"]] == ["missing-image"], \
            [d["message"] for d in st["drift"]]
        assert st["rebuilt"]["layers"] == built_small["layers"], "the same layers, bit for bit"
    finally:   # no later test needs the teammate's images or cache
        _empty(d2)
