"""Push and pull by digest for real: a distribution registry on loopback, this host's Docker
daemon and a second one playing a teammate's machine (fixtures in conftest.py)."""
from __future__ import annotations

import io
import socket
import tarfile
import threading
import time
import uuid

import pytest
from services import first_daemon_answers, free_port

from envgen.core.errors import CheckFailed, EnvironmentMissing
from envgen.runtime import registry as reg
from envgen.runtime.docker import image_or_none

pytestmark = [pytest.mark.docker,
              pytest.mark.skipif(not first_daemon_answers(), reason="no Docker daemon answers")]


@pytest.fixture(scope="module")
def c():
    import docker
    client = docker.from_env(timeout=60)
    yield client
    client.close()


@pytest.fixture(scope="module")
def tiny(c):
    """A one-file image made with `docker import` (nothing can be pulled from Docker Hub
    here); unique per run, so its ID says which daemon really got it. Removed with every tag
    the tests gave it."""
    body = f"envgen registry test {uuid.uuid4()}\n".encode()
    data = io.BytesIO()
    with tarfile.open(fileobj=data, mode="w") as tar:
        info = tarfile.TarInfo("hello.txt")
        info.size, info.mtime = len(body), 0
        tar.addfile(info, io.BytesIO(body))
    tag = uuid.uuid4().hex[:12]
    c.api.import_image_from_data(data.getvalue(), repository="envgen-test/registry-tiny",
                                 tag=tag)
    image = c.images.get(f"envgen-test/registry-tiny:{tag}")
    yield image
    c.images.remove(image.id, force=True)


def _untag(c, ref):
    if image_or_none(c, ref) is not None:
        c.images.remove(ref, noprune=True)


def test_pushed_digest_pulls_the_same_image_on_a_teammates_daemon(c, tiny, registry,
                                                                  second_daemon):
    repository = f"{registry.host}/team/envgen"
    pinned = reg.push(c, tiny.id, repository, "t1")
    other = second_daemon.client()
    try:
        assert reg.parse_pinned(pinned)[0] == repository
        tiny.reload()
        assert pinned in tiny.attrs["RepoDigests"]
        pulled = reg.pull(other, pinned)
        assert pulled.id == tiny.id
        assert pinned in pulled.attrs["RepoDigests"]
        assert reg.push(c, tiny.id, repository, "t1") == pinned   # a re-push is the same
    finally:
        for img in other.images.list():
            other.images.remove(img.id, force=True)
        other.close()
        _untag(c, f"{repository}:t1")


def test_push_to_a_stopped_registry_is_exit_3_within_seconds_and_leaves_no_tag(c, tiny):
    host = f"127.0.0.1:{free_port()}"
    started = time.monotonic()
    with pytest.raises(EnvironmentMissing) as e:
        reg.push(c, tiny.id, f"{host}/team/envgen", "t1")
    assert time.monotonic() - started < 10
    assert e.value.exit_code == 3
    assert host in str(e.value) and "connection refused" in str(e.value)
    assert image_or_none(c, f"{host}/team/envgen:t1") is None


def test_push_to_a_read_only_registry_is_exit_3_and_leaves_no_tag(c, tiny, readonly_registry):
    target = f"{readonly_registry.host}/team/envgen"
    with pytest.raises(EnvironmentMissing) as e:
        reg.push(c, tiny.id, target, "t1")
    assert readonly_registry.host in str(e.value) and "refuses uploads" in str(e.value)
    assert image_or_none(c, f"{target}:t1") is None
    tiny.reload()
    assert not any(t.startswith(readonly_registry.host) for t in tiny.tags)


def test_push_to_a_registry_that_never_answers_gives_up_after_the_bound(c, tiny):
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(16)
    held = []   # accepted and never answered

    def accept():
        try:
            while True:
                held.append(silent.accept()[0])
        except OSError:   # closed at the end of the test
            pass
    threading.Thread(target=accept, daemon=True).start()
    host = f"127.0.0.1:{silent.getsockname()[1]}"
    started = time.monotonic()
    try:
        with pytest.raises(EnvironmentMissing) as e:
            reg.push(c, tiny.id, f"{host}/team/envgen", "t1", timeout=2)
        assert time.monotonic() - started < 10
        assert "said anything for 2 s" in str(e.value)
        assert image_or_none(c, f"{host}/team/envgen:t1") is None
    finally:
        for conn in held:
            conn.close()
        silent.close()


def test_pull_of_a_digest_the_registry_lacks_is_exit_1(registry, second_daemon):
    other = second_daemon.client()
    try:
        with pytest.raises(CheckFailed) as e:
            reg.pull(other, f"{registry.host}/team/envgen@sha256:{'0' * 64}")
        assert e.value.exit_code == 1 and "has no image with digest sha256:000" in str(e.value)
    finally:
        other.close()


def test_pull_from_a_stopped_registry_is_exit_3(second_daemon):
    other = second_daemon.client()
    try:
        with pytest.raises(EnvironmentMissing) as e:
            reg.pull(other, f"127.0.0.1:{free_port()}/team/envgen@sha256:{'0' * 64}")
        assert "connection refused" in str(e.value)
    finally:
        other.close()
