"""The Docker edge: the SDK for images and containers, a BuildKit-capable CLI for builds.
docker-py cannot drive BuildKit (docker/docker-py#2230), so builds shell out."""
from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from functools import lru_cache

from .errors import EnvironmentMissing

START_HINT = ("start it with `setsid dockerd >/tmp/dockerd.log 2>&1 &` as root (after "
              "`apt-get install -y docker.io`), or `sudo systemctl start docker`")


def client():
    """A docker SDK client that has answered a ping, or EnvironmentMissing (exit 3)."""
    import docker
    try:
        c = docker.from_env(timeout=600)
        c.ping()
        return c
    except Exception as e:  # the SDK raises DockerException, requests or OSError variants
        raise EnvironmentMissing(f"no Docker daemon answers ({type(e).__name__}); "
                                 f"{START_HINT}") from e


@dataclass(frozen=True)
class BuildCli:
    """How to run a BuildKit build from the command line."""

    argv: tuple[str, ...]       # e.g. ("docker", "buildx", "build", "--load")
    env: tuple[tuple[str, str], ...]
    describe: str


def _run(argv, env=None, timeout=20) -> subprocess.CompletedProcess | None:
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=timeout,
                              env={**os.environ, **(env or {})})
    except (OSError, subprocess.TimeoutExpired):
        return None


@lru_cache(maxsize=1)
def buildkit_cli() -> BuildCli | None:
    """The first docker CLI that can build with BuildKit: buildx, or a pre-23 client whose
    `docker build` still takes DOCKER_BUILDKIT=1. None when there is no such client."""
    seen, candidates = set(), []
    for c in (os.environ.get("ENVGEN_DOCKER"), shutil.which("docker"), "/usr/bin/docker",
              "/usr/local/bin/docker"):
        if c and os.path.exists(c) and os.path.realpath(c) not in seen:
            seen.add(os.path.realpath(c))
            candidates.append(c)
    for docker in candidates:
        r = _run([docker, "buildx", "version"])
        if r and r.returncode == 0:
            return BuildCli((docker, "buildx", "build", "--load"), (), f"{docker} buildx")
    for docker in candidates:
        r = _run([docker, "version", "--format", "{{.Client.Version}}"])
        if r and r.stdout.strip():
            major = r.stdout.strip().split(".")[0]
            if major.isdigit() and int(major) < 23:
                return BuildCli((docker, "build"), (("DOCKER_BUILDKIT", "1"),),
                                f"{docker} build (DOCKER_BUILDKIT=1)")
    return None


def image_or_none(c, ref: str):
    import docker
    try:
        return c.images.get(ref)
    except docker.errors.ImageNotFound:
        return None
    except docker.errors.APIError as e:
        if "invalid reference" in str(e).lower():
            return None
        raise


def remove_image(c, ref: str) -> None:
    import docker
    try:
        c.images.remove(ref, force=True)
    except docker.errors.ImageNotFound:
        pass


def run_to_end(c, image: str, command: list[str], timeout: float, before_start=None,
               **create_kwargs) -> tuple[int, str, str]:
    """Run `command` in a new container of `image` and return (exit code, stdout, stderr).
    The container is removed on every path, Ctrl-C included. `before_start(container)` may
    inspect it first (and raise to stop). Past `timeout` s the container is killed and
    TimeoutError raised."""
    container = c.containers.create(image, command=command, detach=True, **create_kwargs)
    try:
        if before_start is not None:
            before_start(container)
        container.start()
        try:
            code = int(container.wait(timeout=timeout).get("StatusCode", -1))
        except Exception as e:  # requests' ReadTimeout and friends
            if "timed out" not in str(e).lower() and "timeout" not in type(e).__name__.lower():
                raise
            container.kill()
            raise TimeoutError(f"no exit within {timeout} s") from None
        stdout = container.logs(stdout=True, stderr=False).decode("utf-8", "replace")
        stderr = container.logs(stdout=False, stderr=True).decode("utf-8", "replace")
        return code, stdout, stderr
    finally:
        try:
            container.remove(force=True)
        except Exception:  # already gone; nothing to clean
            pass
