"""Review of `envgen build` (fakes only, no real build): two builds of one stack take turns
over its context and never share an image-ID file; the classic builder keeps the idle
timeout, the build network and the daemon's diagnoses the BuildKit path has, and refuses a
netrc it cannot mount; a full home leaves no temporary file; a builder that is not here is
refused before any base is touched."""
import errno
import os
import threading
import time

import pytest
from fakes import FakeDocker, FakeEngine, FakeImage

from envgen.core.errors import EnvironmentMissing, InputError

BUILT = "sha256:" + "cd" * 32


@pytest.fixture
def arm(tmp_path, monkeypatch):
    """An arm64 stack whose local base the fake daemon has, ENVGEN_HOME a fresh folder."""
    from envgen.matrix import load_matrix
    from envgen.resolve.spec import parse_spec
    from envgen.resolve.stack import resolve
    monkeypatch.setenv("ENVGEN_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("ENVGEN_NETRC", raising=False)
    monkeypatch.delenv("ENVGEN_BUILD_NETWORK", raising=False)
    m = load_matrix()
    return resolve(m, parse_spec("pytorch-cpu-arm64", m))


def _build(st, engine, c, said=None, **kw):
    from envgen.build.buildkit import build
    from envgen.resolve.closure import closure_for
    said = [] if said is None else said
    return build(st, tag="envgen-test/arm:1", progress=said.append, client=c, engine=engine,
                 closure=closure_for(st, resolve=False)[0], **kw)


def _daemon(st, build=()):
    return FakeDocker(FakeImage(st.base.local_tag, [st.base.local_tag]), FakeImage(BUILT),
                      build=build)


# ---- 1: one build at a time per context; no shared image-ID file -------------------------

def test_a_second_build_of_the_same_stack_waits_for_the_first_and_says_so(arm):
    from envgen.core import home
    from envgen.core.files import locked
    c = _daemon(arm)
    engine = FakeEngine(built=BUILT, client=c)
    ctx = home.contexts_dir() / arm.stack
    said, done = [], threading.Event()
    with locked(ctx.with_name(f".{arm.stack}")):   # the first build holds its context
        t = threading.Thread(target=lambda: (_build(arm, engine, c, said), done.set()))
        t.start()
        deadline = time.monotonic() + 20
        while not any("waiting" in s for s in said) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert [s for s in said if "waiting" in s] == [
            f"another envgen is building {arm.stack} from {ctx}; waiting for it to finish"]
        assert engine.builds == [] and not done.is_set()
    t.join(20)
    assert done.is_set() and len(engine.builds) == 1


def test_each_buildkit_build_writes_its_image_id_to_a_private_file_of_its_own(tmp_path):
    from envgen.runtime import buildkit
    from envgen.runtime.docker import BuildCli
    ctx = tmp_path / "contexts" / "s"
    ctx.mkdir(parents=True)
    seen = tmp_path / "seen"
    cli = tmp_path / "fake-buildx"
    # a fake BuildKit CLI: note its --iidfile and that file's folder's mode, write an ID
    cli.write_text('#!/bin/sh\nwhile [ "$1" != --iidfile ]; do shift; done\n'
                   f'echo "$2 $(stat -c %a "$(dirname "$2")")" >> {seen}\n'
                   f'printf {BUILT} > "$2"\n')
    cli.chmod(0o755)
    for _ in range(2):
        got = buildkit.build_buildkit(
            BuildCli((str(cli),), (), "fake"), ctx, None, dockerfile=ctx / "Dockerfile",
            on_line=lambda _line: None, failed=lambda: "failed", log="log")
        assert got == BUILT
    (a, mode_a), (b, mode_b) = (ln.split() for ln in seen.read_text().splitlines())
    assert a != b and mode_a == mode_b == "700"
    assert not os.path.exists(a) and not os.path.exists(b)   # removed after each build
    assert sorted(p.name for p in ctx.parent.iterdir()) == ["s"]


def test_the_build_wing_leaves_the_image_id_file_to_the_engine(arm):
    c = _daemon(arm)
    engine = FakeEngine(built=BUILT, client=c)
    _build(arm, engine, c)
    assert engine.builds[0].get("iidfile") is None


# ---- 2: the classic builder's idle timeout ------------------------------------------------

def test_a_silent_classic_build_is_given_up_after_the_idle_timeout_with_exit_3(arm,
                                                                               monkeypatch):
    import requests
    import urllib3

    from envgen.runtime.engine import DockerEngine
    monkeypatch.setenv("ENVGEN_BUILD_IDLE_TIMEOUT", "7")
    c = _daemon(arm)

    def silent(**kw):
        c.api.build_kwargs = kw
        yield {"stream": "Step 1/8 : FROM x\n"}
        raise requests.exceptions.ConnectionError(
            urllib3.exceptions.ReadTimeoutError(None, "/build", "Read timed out."))
    c.api.build = silent
    with pytest.raises(EnvironmentMissing, match=r"for 7 s \(ENVGEN_BUILD_IDLE_TIMEOUT\)") \
            as e:
        _build(arm, DockerEngine(c), c, builder="classic")
    assert c.api.build_kwargs["timeout"] == 7 and e.value.exit_code == 3


# ---- 3: a daemon's failure under the classic builder is the host's (exit 3) ---------------

def _api_error(status, text):
    import docker

    class Response:
        status_code, reason, url = status, "Server Error", "http://docker/build"
    return docker.errors.APIError(f"{status} Server Error", response=Response(),
                                  explanation=text)


def test_a_full_disk_under_the_classic_builder_is_exit_3_with_the_diagnosis(arm):
    from envgen.runtime.engine import DockerEngine
    c = _daemon(arm)

    def full(**kw):
        yield {"stream": "Step 1/8 : FROM x\n"}
        raise _api_error(500, "write /var/lib/docker/tmp/x: no space left on device")
    c.api.build = full
    with pytest.raises(EnvironmentMissing, match="the disk the Docker daemon builds on is "
                                                 "full") as e:
        _build(arm, DockerEngine(c), c, builder="classic")
    assert e.value.exit_code == 3
    c.api.build_chunks = [{"error": "OSError: [Errno 28] No space left on device"}]
    c.api.build = type(c.api).build.__get__(c.api)
    with pytest.raises(EnvironmentMissing, match="is full"):
        _build(arm, DockerEngine(c), c, builder="classic")


def test_a_daemon_500_under_the_classic_builder_is_exit_3(arm):
    from envgen.runtime.engine import DockerEngine
    c = _daemon(arm)

    def broken(**kw):
        raise _api_error(500, "something inside the daemon broke")
        yield
    c.api.build = broken
    with pytest.raises(EnvironmentMissing, match=r"HTTP 500: something inside") as e:
        _build(arm, DockerEngine(c), c, builder="classic")
    assert e.value.exit_code == 3 and "the log is" in str(e.value)


# ---- 4: the classic builder's network; a netrc it cannot mount ----------------------------

def test_the_classic_builder_builds_on_the_asked_network(arm, monkeypatch):
    from envgen.runtime.engine import DockerEngine
    monkeypatch.setenv("ENVGEN_BUILD_NETWORK", "host")
    c = _daemon(arm, build=[{"aux": {"ID": BUILT}}])
    res = _build(arm, DockerEngine(c), c, builder="classic", tag_it=False)
    assert res.image_id == BUILT and c.api.build_kwargs["network_mode"] == "host"


def test_a_netrc_with_the_classic_builder_is_refused_with_exit_2(arm, monkeypatch, tmp_path):
    from envgen.runtime.engine import DockerEngine
    netrc = tmp_path / "netrc"
    netrc.write_text("machine x login a password b\n")
    monkeypatch.setenv("ENVGEN_NETRC", str(netrc))
    c = _daemon(arm, build=[{"aux": {"ID": BUILT}}])
    with pytest.raises(InputError, match="--builder buildkit") as e:
        _build(arm, DockerEngine(c), c, builder="classic", tag_it=False)
    assert e.value.exit_code == 2 and c.api.build_kwargs is None


# ---- 5: a full ENVGEN_HOME leaves no temporary file ---------------------------------------

def _full(*_a, **_kw):
    raise OSError(errno.ENOSPC, "No space left on device")


def test_a_matrix_cache_write_on_a_full_disk_leaves_no_temporary_file(tmp_path, monkeypatch):
    from envgen.matrix import cache
    monkeypatch.setenv("ENVGEN_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("ENVGEN_NO_CACHE", raising=False)
    monkeypatch.setattr(cache.pickle, "dump", _full)
    cache.put("k" * 64, {"a": 1})
    assert list((tmp_path / "home" / "cache").iterdir()) == []


def test_the_writable_probe_on_a_full_disk_leaves_no_probe_file(tmp_path, monkeypatch):
    from pathlib import Path

    from envgen.core import files
    real = Path.write_bytes

    def half(self, data):   # the file is made, then the disk is full
        real(self, b"")
        _full()
    monkeypatch.setattr(Path, "write_bytes", half)
    with pytest.raises(EnvironmentMissing, match="No space left"):
        files.check_writable(tmp_path / "logs")
    assert list((tmp_path / "logs").iterdir()) == []


# ---- 6: a builder that is not here is refused before any base is touched -----------------

def test_buildkit_asked_without_buildx_is_refused_before_the_base_is_looked_up(arm,
                                                                               monkeypatch):
    from envgen.build import buildkit as wing
    from envgen.runtime import docker as rt
    from envgen.runtime.engine import DockerEngine
    touched = []
    monkeypatch.setattr(rt, "buildkit_cli", lambda: None)
    monkeypatch.setattr(wing, "ensure_base", lambda *a: touched.append(a) or "x")
    c = _daemon(arm)
    with pytest.raises(EnvironmentMissing, match="BuildKit") as e:
        _build(arm, DockerEngine(c), c, builder="buildkit")
    assert e.value.exit_code == 3 and touched == []
