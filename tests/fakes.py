"""The one fake Docker engine of the unit tests: the part of docker-py's surface that
envgen's Docker engine (envgen/runtime/docker.py, runtime/engine.py:DockerEngine) and the
registry edge call: images (get by ID, tag or digest; tag; remove), containers (create,
list), the low-level API (tag, push, pull as streams) and `info`. Each test builds the
daemon it needs; nothing here talks to a real one."""
from __future__ import annotations

import io
import json
import tarfile

import docker


class FakeImage:
    """An image: its ID, names and `docker inspect` attributes (labels, env, user,
    layers, repo digests)."""

    def __init__(self, image_id, tags=(), labels=None, digests=(), env=None, user="envgen",
                 layers=(), client=None):
        self.id, self.client = image_id, client
        self.attrs = {"Id": image_id, "RepoTags": list(tags), "RepoDigests": list(digests),
                      "Config": {"Labels": labels or {},
                                 "Env": [f"{k}={v}" for k, v in (env or {}).items()],
                                 "User": user},
                      "RootFS": {"Type": "layers", "Layers": list(layers)}}

    @property
    def tags(self):
        return self.attrs["RepoTags"]

    def tag(self, repository, tag=None, force=False):
        self.client.api.tag(self.id, repository, tag)
        return True

    def reload(self):
        pass


class FakeImages:
    def __init__(self, client, any_ref=None):
        self.client, self.by_id, self.removed = client, {}, []
        self.any_ref = any_ref   # an image every reference names (a daemon of one image)

    def add(self, image, *tags):
        """Keep `image` (a FakeImage, or an ID named by `tags`); it is returned."""
        if not isinstance(image, FakeImage):
            image = FakeImage(image, tags)
        image.client = self.client
        self.by_id[image.id] = image
        return image

    def list(self, all=False):
        return list(self.by_id.values())

    def get(self, ref):
        if self.any_ref is not None:
            return self.any_ref
        for img in self.by_id.values():
            if ref == img.id or ref in img.tags or ref in img.attrs["RepoDigests"]:
                return img
        raise docker.errors.ImageNotFound(f"No such image: {ref}")

    def remove(self, ref, force=False, noprune=False):
        self.removed.append(ref)
        try:
            img = self.get(ref)
        except docker.errors.ImageNotFound:
            return
        if ref in img.tags:
            img.attrs["RepoTags"].remove(ref)
            if not img.tags and not img.attrs["RepoDigests"]:
                self.by_id.pop(img.id, None)   # its last name: the daemon deletes it
        else:
            self.by_id.pop(img.id, None)


def payload_tar(data: bytes, name: str = "torch_smoke.py") -> list[bytes]:
    """What `container.get_archive(path)` streams: a tar of the one file."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as t:
        info = tarfile.TarInfo(name)
        info.size = len(data)
        t.addfile(info, io.BytesIO(data))
    return [buf.getvalue()]


class FakeContainer:
    """A payload's container: it prints `report` as its last stdout line and exits
    `exit_code`, or hangs past any wait."""

    def __init__(self, report, exit_code=0, hang=False, payload=b"print()"):
        self.report, self.exit_code, self.hang, self.payload = report, exit_code, hang, payload
        self.removed = self.killed = self.started = False

    def get_archive(self, path):
        if self.payload is None:
            raise RuntimeError("no such file")
        return payload_tar(self.payload), {}

    def start(self):
        self.started = True

    def wait(self, timeout=None):
        if self.hang:
            raise TimeoutError("Read timed out")
        return {"StatusCode": self.exit_code}

    def kill(self):
        self.killed = True

    def logs(self, stdout=True, stderr=False, **_):
        if stdout:
            return (json.dumps(self.report) + "\n").encode() if self.report else b""
        return b"Traceback: boom\n"

    def remove(self, force=False):
        self.removed = True


class FakeContainers:
    def __init__(self, client, container=None):
        self.client, self.container = client, container

    def create(self, image, **kw):
        self.client.create_kwargs = kw
        return self.container

    def list(self, all=False, filters=None):
        return []


class FakeApi:
    """The low-level API: `tag`, and `push`/`pull` answering with the lines given (an
    exception among them is raised there); `record` makes the daemon note the pushed
    digest, as a real one does at the end."""

    def __init__(self, client, push=(), pull=(), record=True, pulled_id=None, build=()):
        self.client, self.timeout, self.record = client, 600, record
        self.push_lines, self.pull_lines, self.timeouts = push, pull, []
        self.pulled_id, self.build_chunks, self.build_kwargs = pulled_id, build, None

    def tag(self, image_id, repository, tag, force=False):
        ref = f"{repository}:{tag}"
        for img in self.client.images.by_id.values():
            if ref in img.tags:
                img.attrs["RepoTags"].remove(ref)
        self.client.images.by_id[image_id].attrs["RepoTags"].append(ref)

    def _stream(self, lines):
        self.timeouts.append(self.timeout)
        if isinstance(lines, BaseException):
            raise lines
        for line in lines:
            if isinstance(line, BaseException):
                raise line
            if "aux" in line and self.record:
                img = self.client.images.get(self.pushing)
                img.attrs["RepoDigests"].append(
                    f"{self.pushing.rpartition(':')[0]}@{line['aux']['Digest']}")
            yield line

    def push(self, repository, tag, stream, decode):
        assert stream and decode
        self.pushing = f"{repository}:{tag}"
        return self._stream(self.push_lines)

    def build(self, **kw):
        """The classic builder: the decoded chunks given (an "aux" ID among them)."""
        self.build_kwargs = kw
        return iter(self.build_chunks)

    def pull(self, repository, tag, stream, decode):
        assert stream and decode
        self.pulled = f"{repository}@{tag}"
        if not isinstance(self.pull_lines, BaseException):
            self.client.images.add(self.pulled_id).attrs["RepoDigests"].append(self.pulled)
        return self._stream(self.pull_lines)


class FakeDocker:
    """A daemon holding `images`; `container` is what every create returns; `info` what
    `docker info` answers (by default runc only, server 20.10.24); `build` the chunks its
    classic builder streams."""

    def __init__(self, *images, container=None, info=None, runtimes=("runc",), push=(),
                 pull=(), record=True, pulled_id=None, any_ref=None, build=()):
        self.images = FakeImages(self, any_ref)
        for img in images:
            self.images.add(img)
        self.containers = FakeContainers(self, container)
        self.api = FakeApi(self, push, pull, record, pulled_id, build)
        self._info = info if info is not None else {
            "Runtimes": {r: {} for r in runtimes}, "ServerVersion": "20.10.24"}
        self.create_kwargs = None

    def info(self):
        return self._info


class FakeSandbox:
    """A certification's runs on FakeEngine: each answers `report` (exit `exit_code`) and is
    recorded with its argv; what a certificate records of it is `record`."""
    gpu_access, profile, content, ended = "fake", "fake", None, "fake run ended"

    def __init__(self, engine):
        self.engine, self.entered, self.left = engine, False, False

    def __enter__(self):
        self.entered = True
        return self

    def __exit__(self, *exc):
        self.left = True
        return False

    def payload_path(self, smoke):
        return f"/fake/{smoke}_smoke.py"

    def run(self, argv, timeout, on_stderr_line=None, payload=None):
        self.engine.runs.append(list(argv))
        if self.engine.hang:
            raise TimeoutError("past its limit")
        out = json.dumps(self.engine.report) + "\n" if self.engine.report else ""
        return self.engine.exit_code, out, "fake: no report\n"

    def payload_record(self, path):
        return {"path": path, "sha256": "0" * 64}

    def no_report(self, code, stderr):
        return f"the fake payload exited {code} without a report"

    def notes(self):
        return ["a fake note"]

    def record(self):
        return {"fake": {"runs": len(self.engine.runs)}}


class FakeEngine:
    """An engine that is neither Docker nor Apptainer, behind the Engine protocol
    (runtime/engine.py): `target` is what every reference names, `report` what every run
    prints. `certifies` as Docker's unless given. A build is recorded (its context and
    options) and hands `build_lines` to its callback; it gives `built` (an image ID), or
    with `built=None` fails as an engine does, with the caller's sentence."""
    name = "fake"

    def __init__(self, target=None, report=None, exit_code=0, hang=False,
                 certifies=("preflight", "project smoke", "measure"), client=None,
                 built="sha256:" + "f" * 64, build_lines=()):
        self.target, self.report, self.exit_code, self.hang = target, report, exit_code, hang
        self.certifies, self.runs, self.sandboxes = frozenset(certifies), [], []
        self.client, self.built, self.build_lines, self.builds = client, built, build_lines, []

    def builder(self, choice="auto"):
        from envgen.runtime.engine import Builder
        return Builder("fake builder", True)

    def build(self, context, **options):
        from envgen.core.errors import BuildFailed
        self.builds.append({"context": context, **options})
        for line in self.build_lines:
            options["on_line"](line)
        if self.built is None:
            raise BuildFailed(options["failed"]())
        return self.built

    def inspect(self, ref):
        return self.target

    def run(self, image, argv, timeout, *, profile=None, on_stderr_line=None, **options):
        return FakeSandbox(self).run(argv, timeout)

    def tag(self, image_id, tag):
        raise NotImplementedError

    def remove(self, ref):
        raise NotImplementedError

    def host(self):
        return {"fake": "1.0", "docker": None, "runtime": "fake", "kernel": "6.1"}

    def sandbox(self, ref, target, gpus, access, payload=()):
        self.sandboxes.append(FakeSandbox(self))
        return self.sandboxes[-1]
