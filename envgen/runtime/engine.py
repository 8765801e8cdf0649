"""The engine seam: what envgen asks of a container engine, whatever engine it is. Inspect
an image (the Stack its label carries, what its bits are), run a command in it under a
time limit with a run profile, tag it, remove it, and say what the engine is for a
certificate's `host`, and build a context folder into an untagged image. Docker (a
daemon, through runtime/docker.py; its builds through runtime/buildkit.py: the BuildKit CLI,
else the SDK's classic builder) and Apptainer (no daemon: a SIF file, through
runtime/apptainer.py and sif.py; it builds nothing, `envgen sif` makes a SIF of a Docker
image) stand behind it; a Podman or enroot engine is one more class here
(docs/architecture.md). What a build's output means (its steps, its diagnoses, the log) is
the build wing's (build/buildkit.py): it reaches the engine as a callback per line.

Certification (certify/run.py) is one function for every engine: what differs, how a
certification's containers start (GPU flags, the run profile or exec options, where the
payload comes from) and what the certificate records of it, is the engine's `Sandbox`."""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Protocol

from ..core.errors import CheckFailed, EnvironmentMissing, InputError
from ..core.model import DEFAULT_PLATFORM
from ..matrix.wire import stack_from_labels
from .buildkit import IDLE_S
from .docker import Target, inspect_target, remove_image, run_to_end


@dataclass(frozen=True)
class Builder:
    """What builds an engine's images: its name in a build's record, and whether it is
    BuildKit (a context for it mounts caches and secrets and stamps file times)."""
    describe: str
    buildkit: bool


class Engine(Protocol):
    name: str

    def inspect(self, ref: str) -> Target:
        """The image `ref` names, with its Stack (checked), tags, env, user and content."""

    def run(self, image: str, argv: list[str], timeout: float, *, profile=None,
            on_stderr_line: Callable[[str], None] | None = None, **engine_options
            ) -> tuple[int, str, str]:
        """(exit code, stdout, stderr) of `argv` in `image`; TimeoutError past `timeout` s,
        with nothing left running."""

    def tag(self, image_id: str, tag: str) -> None:
        """Name the image `tag`."""

    def remove(self, ref: str) -> None:
        """Remove what `ref` names (nothing when it is gone already)."""

    def host(self) -> dict:
        """What a certificate's `host` records of this engine."""

    def builder(self, choice: str = "auto") -> Builder:
        """What `build(..., builder=choice)` builds with ("auto": the best it has);
        EnvironmentMissing when the one asked for is not here."""

    def build(self, context: Path, *, builder: str = "auto", dockerfile: Path | None = None,
              iidfile: Path | None = None, no_cache: bool = False,
              platform: str = DEFAULT_PLATFORM, build_args: dict | None = None,
              secrets: tuple[tuple[str, str], ...] = (), network: str | None = None,
              idle: float = IDLE_S, on_line: Callable[[str | None], None] | None = None,
              failed: Callable[[], str] | None = None, log: str = "") -> str:
        """Build the context folder `context` (its `Dockerfile` unless given) into an
        untagged image and return its ID. `secrets`: (id, file) pairs the build mounts;
        `network`: the build's network (None: the engine's default); `on_line`: each line
        of output as it comes, and None after a second of silence; past `idle` s of silence
        it is stopped (EnvironmentMissing). A failed build raises BuildFailed with
        `failed()`, the caller's reading of the output; `log` names where the caller keeps
        it, for the engine's own sentences."""

    # What certification does on this engine beyond the payload's run: "preflight" (the
    # image's NVIDIA_REQUIRE_* and kernels against this host, from its env), "project smoke"
    # (the project's own command), "measure" (the telemetry level, in params).
    certifies: frozenset

    def sandbox(self, ref: str, target: Target, gpus: list[int] | None, access: str,
                payload: tuple[Path, ...]) -> Sandbox:
        """How this engine starts the containers of one certification of `target` (a
        context manager); `payload`: this envgen's payload files, for an engine that binds
        them rather than run the image's own copy."""


class Sandbox(Protocol):
    """What certify/run.py asks of an engine for one certification, entered as a context
    (a bound payload folder lives as long as it)."""
    gpu_access: str   # the certificate's host.gpu_access
    profile: str      # the word the certificate's profile starts with ("" for none)
    content: str | None   # the certificate's image_content (None: none recorded)
    ended: str        # how a run past its time limit was ended, in words

    def payload_path(self, smoke: str) -> str:
        """Where payload `smoke` is inside the container."""

    def run(self, argv: list[str], timeout: float, on_stderr_line=None,
            payload: str | None = None) -> tuple[int, str, str]:
        """(exit code, stdout, stderr) of `argv` in a certification container; with
        `payload`, the payload's run (its sha256 taken); TimeoutError past `timeout` s."""

    def payload_record(self, path: str) -> dict:
        """The certificate's `payload`: its path and sha256, and how it got there."""

    def no_report(self, code: int, stderr: str) -> str:
        """The sentence for a payload that exited `code` without a report."""

    def notes(self) -> list[str]:
        """What the run learned that a certificate's preflight notes (a refused ulimit)."""

    def record(self) -> dict:
        """What the certificate records of the run beside the common fields."""


CERTIFY_LABELS = {"io.envgen.certify": "1"}   # on every container of a certification


def _payload_sha256(container, path: str) -> str | None:
    """The sha256 of file `path` inside a created container (None: no such file)."""
    import hashlib
    import io
    import tarfile
    try:
        stream, _ = container.get_archive(path)
    except Exception:
        return None
    buf = io.BytesIO(b"".join(stream))
    try:
        with tarfile.open(fileobj=buf) as tar:
            member = tar.next()
            # a link where the payload goes is no payload (its target is not in the archive)
            f = tar.extractfile(member) if member is not None and member.isfile() else None
            return hashlib.sha256(f.read()).hexdigest() if f else None
    except (tarfile.TarError, KeyError, OSError):
        return None


class DockerSandbox:
    """A certification's containers on a Docker daemon: the GPU plan (toolkit, CDI or
    device nodes), the run profile (shared memory, ulimits, user, no network; a ulimit the
    daemon refuses is dropped and noted), each container labelled io.envgen.certify. The
    payload is the image's own, hashed from the container before it starts."""
    profile = ""
    ended = "container killed"

    def __init__(self, engine: DockerEngine, ref: str, target: Target, gpus, access: str):
        from . import gpu_access
        from . import profile as run_profile
        self.engine, self.ref, self.target = engine, ref, target
        self.plan = gpu_access.plan(gpus, access, engine.info())
        # how the payload's container starts (shared memory, ulimits, NCCL, user): the run
        # profile `envgen run`, the devcontainer and `envgen profile` use too
        self.run_profile = run_profile.for_container(self.plan, target.user, target.env)
        self.gpu_access, self.content, self.sha256 = self.plan.mode, target.content, None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def payload_path(self, smoke: str) -> str:
        from ..core.image import PAYLOAD_DIR
        return f"{PAYLOAD_DIR}/{smoke}_smoke.py"

    def run(self, argv, timeout, on_stderr_line=None, payload=None):
        from . import profile as run_profile

        def hash_payload(container):
            self.sha256 = _payload_sha256(container, payload)
            if self.sha256 is None:
                raise CheckFailed(f"image {self.ref} has no smoke payload (a regular file) "
                                  f"at {payload}; "
                                  f"rebuild it with `envgen build`")

        def start(p):
            return self.engine.run(self.target.image_id, argv, timeout, profile=p,
                                   before_start=hash_payload if payload else None,
                                   on_stderr_line=on_stderr_line, labels=CERTIFY_LABELS,
                                   refuse_root=True)
        self.run_profile, result = run_profile.settle(self.run_profile, start)
        return result

    def payload_record(self, path: str) -> dict:
        return {"path": path, "sha256": self.sha256}

    def no_report(self, code, stderr) -> str:
        tail = " | ".join(stderr.strip().splitlines()[-3:])[:300]
        return f"the smoke payload exited {code} without a report: {tail}"

    def notes(self) -> list[str]:
        from . import profile as run_profile
        fix = run_profile.refusal_fix(self.run_profile)
        return [fix] if fix else []

    def record(self) -> dict:
        return {"run_profile": self.run_profile.to_json()}


class ApptainerSandbox:
    """A certification's run of a SIF: `apptainer exec` contained, with a clean
    environment, no network, no privileges (as the image's user when envgen runs as root),
    `--nv` for GPUs; the payload is this envgen's, copied to a private folder bound
    read-only. The certificate records the SIF and what the options isolate (and not)."""
    profile = "apptainer"
    content = None   # a SIF's content is its image_id: its sha256
    ended = "its processes were ended"

    def __init__(self, engine: ApptainerEngine, target: Target, gpus, payload):
        from ..core import home
        from .apptainer import BOUND_PAYLOAD, bind_arg, exec_options
        # the payload is bound from a folder under ENVGEN_HOME: refused before it is made
        bind_arg(str(home.scratch_dir()), BOUND_PAYLOAD,
                 fix="set ENVGEN_HOME to a folder whose path has neither ',' nor ':'")
        self.engine, self.target, self.files = engine, target, tuple(payload)
        self.options, self.isolation = exec_options(bool(gpus), os.geteuid() == 0, gpus)
        self.gpu_access = "apptainer --nv" if gpus else "none"
        self.sha256 = self._scratch = self._folder = None

    def __enter__(self):
        import shutil

        from ..core import home
        from .sif import sha256_of
        self._scratch = home.scratch("sif-payload")
        self._folder = Path(self._scratch.__enter__())
        for src in self.files:   # the payload and its siblings, as this envgen has them
            shutil.copyfile(src, self._folder / src.name)
            (self._folder / src.name).chmod(0o644)
        self._folder.chmod(0o755)   # the image's user reads it (apptainer binds it as root)
        self.sha256 = sha256_of(self._folder / self.files[0].name) if self.files else None
        return self

    def __exit__(self, *exc):
        return self._scratch.__exit__(*exc)

    def payload_path(self, smoke: str) -> str:
        from .apptainer import BOUND_PAYLOAD
        return f"{BOUND_PAYLOAD}/{smoke}_smoke.py"

    def run(self, argv, timeout, on_stderr_line=None, payload=None):
        from .apptainer import BOUND_PAYLOAD
        return self.engine.run(self.target.tags[0], argv, timeout, options=self.options,
                               binds=((str(self._folder), BOUND_PAYLOAD, "ro"),),
                               on_stderr_line=on_stderr_line)

    def payload_record(self, path: str) -> dict:
        return {"path": path, "sha256": self.sha256, "bound": "read-only, from this envgen"}

    def no_report(self, code, stderr) -> str:
        from .apptainer import last_line
        return (f"the smoke payload exited {code} under apptainer without a report: "
                f"{last_line(stderr)}")

    def notes(self) -> list[str]:
        return []

    def record(self) -> dict:
        sif, labels = Path(self.target.tags[0]), self.target.labels
        return {"sif": {"path": str(sif), "sha256": self.target.image_id,
                        "size_bytes": sif.stat().st_size,
                        "from_image_id": labels.get("io.envgen.image.id"),
                        "closure_sha256": labels.get("io.envgen.closure.sha256")},
                "isolation": self.isolation}


class DockerEngine:
    """A Docker daemon through the SDK client `c` (runtime/docker.client())."""
    name = "docker"

    def __init__(self, client):
        self.client = client
        self._info = None

    def inspect(self, ref: str) -> Target:
        return inspect_target(self.client, ref)

    def run(self, image, argv, timeout, *, profile=None, on_stderr_line=None,
            before_start=None, labels=None, **create_kwargs):
        """run_to_end: the profile's docker flags, labels, `before_start(container)`."""
        kwargs = {**(profile.docker_kwargs() if profile is not None else {}), **create_kwargs}
        return run_to_end(self.client, image, list(argv), timeout, before_start=before_start,
                          labels=labels, on_stderr_line=on_stderr_line, **kwargs)

    def tag(self, image_id: str, tag: str) -> None:
        from ..core.errors import EnvironmentMissing
        from ..core.image import split_tag
        repo, name = split_tag(tag)
        if not self.client.images.get(image_id).tag(repo, name):
            raise EnvironmentMissing(f"the Docker daemon did not tag {image_id[:19]} as {tag}")

    def remove(self, ref: str) -> None:
        remove_image(self.client, ref)

    def info(self) -> dict:
        if self._info is None:
            self._info = self.client.info()
        return self._info

    def host(self) -> dict:
        info = self.info()
        return {"docker": info.get("ServerVersion"), "runtime": info.get("DefaultRuntime"),
                "kernel": info.get("KernelVersion")}

    def builder(self, choice: str = "auto") -> Builder:
        """BuildKit through the first docker CLI that has it ("auto", "buildkit"), else the
        SDK's classic builder ("auto", "classic")."""
        from .docker import buildkit_cli
        cli = buildkit_cli() if choice in ("auto", "buildkit") else None
        if choice == "buildkit" and cli is None:
            raise EnvironmentMissing("no docker CLI that can use BuildKit (docker buildx, or "
                                     "a client older than 23 with DOCKER_BUILDKIT=1)")
        if cli is None:
            return Builder("docker SDK classic builder", False)
        return Builder(cli.describe, True)

    def build(self, context, *, builder="auto", dockerfile=None, iidfile=None,
              no_cache=False, platform=DEFAULT_PLATFORM, build_args=None, secrets=(),
              network=None, idle=IDLE_S, on_line=None, failed=None, log="") -> str:
        """BuildKit's CLI, whose --iidfile is `iidfile` (default: a private file of this
        build's own); the classic builder mounts no secrets (the caller refuses what needs
        one) but takes the network and the idle timeout."""
        from . import buildkit
        from .docker import buildkit_cli
        context = Path(context)
        dockerfile = Path(dockerfile) if dockerfile else context / "Dockerfile"
        on_line = on_line or (lambda _line: None)
        if not self.builder(builder).buildkit:
            return buildkit.build_classic(
                self.client, context, dockerfile=dockerfile, log=log, failed=failed,
                idle=idle, no_cache=no_cache, platform=platform, build_args=build_args,
                network=network, on_line=on_line)
        iid = Path(iidfile) if iidfile else None
        return buildkit.build_buildkit(
            buildkit_cli(), context, iid, dockerfile=dockerfile, on_line=on_line,
            failed=failed or (lambda: "build failed" + (f"; the log is {log}" if log else "")),
            log=log, idle=idle, no_cache=no_cache, platform=platform, build_args=build_args,
            secrets=tuple(secrets), network=network)

    certifies = frozenset({"preflight", "project smoke", "measure"})

    def sandbox(self, ref, target, gpus, access, payload=()) -> DockerSandbox:
        return DockerSandbox(self, ref, target, gpus, access)


NO_SIF_BUILD = ("Apptainer builds no images here: build one with Docker (`envgen build`), then "
                "make its SIF with `envgen sif`")


class ApptainerEngine:
    """Apptainer over SIF files: an image is a file, its ID the file's sha256."""
    name = "apptainer"

    def inspect(self, ref: str) -> Target:
        from . import apptainer
        from .sif import sha256_of
        sif = apptainer.check_sif(Path(ref))
        labels = apptainer.labels(sif)
        digest = f"sha256:{sha256_of(sif)}"
        # a SIF's bits are the file: its content is its digest
        return Target(digest, (str(sif),), stack_from_labels(labels, str(ref)), {}, "",
                      dict(labels), (), digest)

    def run(self, image, argv, timeout, *, profile=None, on_stderr_line=None, options=(),
            binds=()):
        """`apptainer exec OPTIONS --bind HOST:INSIDE[:ro]... IMAGE ARGV`; `binds` are
        (host folder, folder inside, mode) triples, shown to a wrapper too."""
        from . import apptainer
        bind_args = [a for h, inside, mode in binds
                     for a in ("--bind", apptainer.bind_arg(h, inside, mode))]
        shown = (str(Path(image).parent), *(h for h, _, _ in binds))
        return apptainer.run(["exec", *options, *bind_args, str(image), *argv], timeout,
                             binds=shown, on_stderr_line=on_stderr_line)

    def tag(self, image_id: str, tag: str) -> None:
        raise InputError("a SIF has no tags: its file's path names it")

    def remove(self, ref: str) -> None:
        raise InputError(f"envgen does not delete SIF files ({ref}); remove it yourself")

    def host(self) -> dict:
        from . import apptainer
        return {"apptainer": apptainer.version(), "docker": None, "runtime": "apptainer",
                "kernel": os.uname().release}

    def builder(self, choice: str = "auto") -> Builder:
        raise InputError(NO_SIF_BUILD)

    def build(self, context, **options) -> str:
        raise InputError(NO_SIF_BUILD)

    # a SIF's env is not read (no NVIDIA_REQUIRE_* to check), its project smoke not run and
    # its telemetry level not asked for yet: its certificates record none of them
    certifies = frozenset()

    def sandbox(self, ref, target, gpus, access, payload=()) -> ApptainerSandbox:
        return ApptainerSandbox(self, target, gpus, payload)


def is_sif(ref: str) -> bool:
    """Whether `ref` names a SIF file rather than an image on a daemon."""
    return bool(ref) and (ref.lower().endswith(".sif") or os.path.isfile(ref))


def engine_for(ref: str, client=None) -> Engine:
    """The engine that runs `ref`: Apptainer for a SIF file, else Docker (`client`, or a
    new one that has answered a ping)."""
    if is_sif(ref):
        return ApptainerEngine()
    if client is None:
        from .docker import client as new_client
        client = new_client()
    return DockerEngine(client)
