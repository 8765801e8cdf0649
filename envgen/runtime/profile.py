"""The run profile: how a training container starts. Certification starts the payload with it,
`envgen run` and the devcontainer start the user's command with it, and `envgen profile`
writes it out for `docker run`, a Compose service or a Kubernetes pod; every form is made
from the one `Profile` here, so none can drift from what was certified.

- Shared memory: a DataLoader's workers hand batches over /dev/shm, and Docker's default
  of 64 MB kills them with a bus error; NCCL uses it too. 8 GB.
- `--ulimit memlock=-1` (pinned host memory, RDMA) and `--ulimit stack=67108864`, the
  flags NVIDIA's NGC containers are run with (NVIDIA Containers For Deep Learning
  Frameworks User Guide, "Running A Container":
  https://docs.nvidia.com/deeplearning/frameworks/user-guide/index.html).
- NCCL's NVLink multicast off (it hangs in many containers), no capabilities, no new
  privileges, and a non-root user.
- The GPUs and how they reach the container (gpu_access)."""
from __future__ import annotations

import json
from dataclasses import dataclass, field

from . import gpu_access

SHM_SIZE = "8g"
SHM_BYTES = 8 * 2**30
ULIMITS = (("memlock", -1, -1), ("stack", 67108864, 67108864))   # (name, soft, hard)
NCCL_ENV = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
            "NVSHMEM_DISABLE_NVLS": "1"}
NOBODY = "65534:65534"
_NOBODY_IDS = tuple(int(part) for part in NOBODY.split(":"))   # (uid, gid) in a pod spec
FORMATS = ("docker", "compose", "kubernetes", "json")


def user_for(image_user: str) -> str:
    """The user a container runs as: the image's own, unless that is root in any spelling
    (root:root, 0:1000, 0000) or names root's group. A name that /etc/passwd maps to uid 0
    cannot be told here: the container's PID 1 refuses to start a payload as uid 0."""
    def root(part: str) -> bool:
        return part in ("", "root") or (part.isdigit() and int(part) == 0)
    user, _, group = image_user.strip().partition(":")
    return NOBODY if root(user) or (group and root(group)) else image_user


@dataclass(frozen=True)
class Profile:
    gpu_mode: str = "none"                 # toolkit | cdi | devices | none
    gpus: tuple[int, ...] = ()
    all_gpus: bool = False                 # every GPU of the host (`envgen profile`)
    user: str = NOBODY
    network: bool = False                  # False: no network (certification)
    env: tuple[tuple[str, str], ...] = ()  # beyond NCCL_ENV (the driver's folders, ...)
    shm_size: str = SHM_SIZE
    ulimits: tuple[tuple[str, int, int], ...] = ULIMITS
    refused: tuple[str, ...] = ()          # ulimits this host's daemon could not set
    plan: gpu_access.GpuPlan | None = field(default=None, compare=False, repr=False)

    def environment(self) -> dict:
        """NCCL's settings and the profile's own; with no GPUs, NVIDIA_VISIBLE_DEVICES=void
        over the image's `all`: a host or node whose default runtime is NVIDIA's hands every
        GPU to a container that asks for none otherwise (k8s-device-plugin#61)."""
        hidden = {} if self.gpus or self.all_gpus else {"NVIDIA_VISIBLE_DEVICES": "void"}
        return {**NCCL_ENV, **hidden, **dict(self.env)}

    def to_json(self) -> dict:
        """What a certificate records of how its container started."""
        return {"shm_size": self.shm_size, "ipc": None,
                "ulimits": {n: {"soft": s, "hard": h} for n, s, h in self.ulimits},
                "gpu_access": self.gpu_mode,
                "gpus": "all" if self.all_gpus else list(self.gpus), "user": self.user,
                "network": "default" if self.network else "none",
                "cap_drop": ["ALL"], "security_opt": ["no-new-privileges"],
                "environment": self.environment(), "ulimits_refused": list(self.refused)}

    def without(self, names) -> Profile:
        """This profile without the ulimits `names` (the daemon refused them), noted."""
        from dataclasses import replace
        return replace(self, ulimits=tuple(u for u in self.ulimits if u[0] not in names),
                       refused=(*self.refused, *sorted(names)))

    # ---- docker-py (certification) -------------------------------------------------------
    def docker_kwargs(self) -> dict:
        """containers.run keyword arguments, the GPU plan's included."""
        import docker
        kw = {k: v for k, v in (self.plan.run_kwargs if self.plan else {}).items()
              if k != "environment"}
        return dict(user=self.user, environment=self.environment(), cap_drop=["ALL"],
                    security_opt=["no-new-privileges"], shm_size=self.shm_size,
                    ulimits=[docker.types.Ulimit(name=n, soft=s, hard=h)
                             for n, s, h in self.ulimits],
                    **({} if self.network else {"network_mode": "none"}), **kw)

    # ---- docker CLI (envgen run, envgen profile --format docker, the devcontainer) ----------
    def habit_flags(self) -> list[str]:
        """The flags every training container needs, whatever starts it."""
        flags = ["--shm-size", self.shm_size]
        for name, soft, hard in self.ulimits:
            flags += ["--ulimit", f"{name}={soft}" if soft == hard else f"{name}={soft}:{hard}"]
        return flags

    def docker_flags(self) -> list[str]:
        flags = [*self.habit_flags(), "--cap-drop", "ALL", "--security-opt",
                 "no-new-privileges", "--user", self.user]
        if not self.network:
            flags += ["--network", "none"]
        flags += self.gpu_flags()
        for key, value in self.environment().items():
            flags += ["-e", f"{key}={value}"]
        return flags

    def gpu_flags(self) -> list[str]:
        if self.gpu_mode == "none" or not (self.gpus or self.all_gpus):
            return []
        if self.gpu_mode == "toolkit":
            if self.all_gpus:
                return ["--gpus", "all"]
            ids = ",".join(gpu_access.device_id(i) for i in self.gpus)
            return ["--gpus", f'"device={ids}","capabilities=compute,utility"']
        if self.gpu_mode == "cdi":
            ids = ["all"] if self.all_gpus else [gpu_access.device_id(i) for i in self.gpus]
            return [f for i in ids for f in ("--device", f"nvidia.com/gpu={i}")]
        kw = self.plan.run_kwargs if self.plan else {}
        flags = [f for d in kw.get("devices", []) for f in ("--device", d)]
        for src, spec in kw.get("volumes", {}).items():
            flags += ["-v", f"{src}:{spec['bind']}:{spec['mode']}"]
        return flags

    # ---- other forms ----------------------------------------------------------------------
    def compose(self, image: str, name: str) -> dict:
        """A Compose service (the Compose Specification's shm_size, ulimits, and a device
        reservation for the GPUs)."""
        svc = {"image": image, "shm_size": self.shm_size,
               "ulimits": {n: s if s == h else {"soft": s, "hard": h}
                           for n, s, h in self.ulimits},
               "cap_drop": ["ALL"], "security_opt": ["no-new-privileges"],
               "user": self.user, "environment": self.environment()}
        if not self.network:
            svc["network_mode"] = "none"
        if self.gpus or self.all_gpus:
            ids = [gpu_access.device_id(i) for i in self.gpus]
            which = {"count": "all"} if self.all_gpus else {"device_ids": ids}
            dev = {"driver": "nvidia", **which, "capabilities": ["gpu", "compute", "utility"]}
            if self.gpu_mode == "cdi":   # the Compose Specification requires capabilities
                dev = {"driver": "cdi", "device_ids": [
                    f"nvidia.com/gpu={i}" for i in (["all"] if self.all_gpus else ids)],
                       "capabilities": ["gpu"]}
            svc["deploy"] = {"resources": {"reservations": {"devices": [dev]}}}
        return {"services": {pod_name(name): svc}}

    def kubernetes(self, image: str, name: str) -> dict:
        """A pod spec fragment: /dev/shm as a memory-backed emptyDir of the same size, the
        GPUs through the NVIDIA device plugin's nvidia.com/gpu resource. A pod spec has no
        ulimits: they are the container runtime's (see `notes`)."""
        uid, gid = self._pod_user()
        sec = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]},
               "runAsNonRoot": True, "runAsUser": uid}
        if gid is not None:
            sec["runAsGroup"] = gid
        container = {"name": pod_name(name), "image": image,
                     "env": [{"name": k, "value": v} for k, v in self.environment().items()],
                     "securityContext": sec,
                     "volumeMounts": [{"name": "dshm", "mountPath": "/dev/shm"}]}
        if self.gpus or self.all_gpus:
            container["resources"] = {"limits": {"nvidia.com/gpu": max(1, len(self.gpus))}}
        size = self.shm_size.upper().rstrip("B")
        return {"spec": {"containers": [container],
                         "volumes": [{"name": "dshm", "emptyDir": {
                             "medium": "Memory", "sizeLimit": f"{size[:-1]}{size[-1]}i"}}]}}

    def _pod_user(self) -> tuple[int, int | None]:
        """(uid, gid) of the pod's securityContext: the kubelet refuses runAsNonRoot for an
        image whose user is a name it cannot check, so a name other than envgen's own runs
        as nobody (notes() says so)."""
        from ..core.image import UID
        user, _, group = self.user.partition(":")
        if user == "envgen" and group in ("", "envgen"):
            return UID, UID
        if user.isdigit():
            return int(user), int(group) if group.isdigit() else None
        return _NOBODY_IDS

    def notes(self, fmt: str) -> list[str]:
        if fmt != "kubernetes":
            return []
        limits = ", ".join(f"{n}={s}" for n, s, _ in self.ulimits)
        notes = [f"a pod spec cannot set ulimits ({limits}): set them in the container "
                 f"runtime (containerd's systemd unit: LimitMEMLOCK=infinity, "
                 f"LimitSTACK=67108864)"]
        if not self.user.partition(":")[0].isdigit() and self._pod_user() == _NOBODY_IDS:
            notes.append(f"the image's user {self.user[:40]} is a name, which a pod with "
                         f"runAsNonRoot cannot check: it runs as {_NOBODY_IDS[0]} (nobody) "
                         f"here; set runAsUser to that user's uid")
        if self.all_gpus:
            notes.append("nvidia.com/gpu is a count: 1 here; raise it to the GPUs the pod "
                         "should get")
        return notes


# runc's "error setting rlimit type N": Linux's RLIMIT_* numbers of the ulimits we set
_RLIMIT = {"3": "stack", "8": "memlock"}


def refused_by(message: str, profile: Profile) -> set[str]:
    """The ulimits a daemon's error says it could not set (a daemon without CAP_SYS_RESOURCE
    cannot raise a hard limit above its own): empty when the error is about something else."""
    import re
    if "error setting rlimit" not in message:
        return set()
    mine = {n for n, _, _ in profile.ulimits}
    named = {_RLIMIT.get(n) for n in re.findall(r"rlimit type (\d+)", message)} & mine
    return named or mine


def settle(profile: Profile, start):
    """(profile, start(profile)); where the daemon cannot set one of its ulimits, started
    again without it, and the profile says which it refused (docs/certification.md)."""
    while True:
        try:
            return profile, start(profile)
        except Exception as exc:
            names = refused_by(str(exc), profile)
            if not names:
                raise
            profile = profile.without(names)


REFUSED = "this host's Docker daemon could not set"   # how refusal_fix's sentence starts


def daemon_started_by(proc: str = "/proc") -> str | None:
    """How this host's dockerd was started: "systemd" (a unit's cgroup), "shell" (by hand or
    by tools/bootstrap.sh's setsid), or None when no dockerd runs here (a remote daemon)."""
    import os
    try:
        pids = [p for p in os.listdir(proc) if p.isdigit()]
    except OSError:
        return None
    for pid in pids:
        try:
            with open(f"{proc}/{pid}/comm") as f:
                if f.read().strip() != "dockerd":
                    continue
            with open(f"{proc}/{pid}/cgroup") as f:
                return "systemd" if ".service" in f.read() else "shell"
        except OSError:
            continue
    return None


def refusal_fix(profile: Profile, started: str | None = "detect") -> str | None:
    """What to change when the daemon refused some of the profile's ulimits, in the words
    that fit how it was started (`started`: "systemd", "shell", None for either; "detect"
    asks daemon_started_by)."""
    if not profile.refused:
        return None
    flags = " ".join(f"--ulimit {n}={s}" for n, s, _ in ULIMITS if n in profile.refused)
    how = daemon_started_by() if started == "detect" else started
    unit = ("add LimitMEMLOCK=infinity and LimitSTACK=infinity to its systemd unit "
            "(systemctl edit docker) and restart it")
    shell = ("restart dockerd from a shell that raised them first (ulimit -l unlimited -s "
             "unlimited; tools/bootstrap.sh does this), which needs CAP_SYS_RESOURCE: inside a "
             "container without it they cannot be raised, and containers run without them")
    fix = {"systemd": unit, "shell": shell}.get(how, f"{unit}; or, started by hand, {shell}")
    return (f"{REFUSED} {flags} (its own hard limit is lower and it may not raise it): {fix}")


def tell_once(daemon_id: object, what: str) -> bool:
    """True the first time `what` is to be said about the daemon `daemon_id` (`docker info`'s
    ID), remembered under ENVGEN_HOME; False after, so a warning no command can act on is not
    repeated at every build, certify and run. True when there is no ID or nowhere to write."""
    import hashlib
    import re

    from ..core import home
    from ..core.files import write_atomic
    if not isinstance(daemon_id, str) or not daemon_id:
        return True
    name = re.sub(r"[^A-Za-z0-9._-]", "_", daemon_id)[:120]
    path = home.home() / "notices" / f"{name}.json"
    key = hashlib.sha256(what.encode()).hexdigest()[:16]
    try:
        told = json.loads(path.read_text()) if path.exists() else []
    except (OSError, ValueError):
        told = []
    told = told if isinstance(told, list) else []
    if key in told:
        return False
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, json.dumps([*told, key]))
    except OSError:
        pass
    return True


def daemon_id(client) -> str | None:
    """The daemon's ID (`docker info`), None when it does not say."""
    try:
        info = client.info()
    except Exception:   # a daemon that does not answer `info` is told every time
        return None
    return info.get("ID") if isinstance(info, dict) else None


def once_per_daemon(progress, client):
    """`progress` that passes on refusal_fix's sentence only the first time for this daemon."""
    def say(msg) -> None:
        if isinstance(msg, str) and msg.startswith(REFUSED) and \
                not tell_once(daemon_id(client), msg):
            return
        progress(msg)
    return say


def for_container(plan: gpu_access.GpuPlan, image_user: str, image_env: dict,
                  network: bool = False) -> Profile:
    """The profile of a container on this host: the GPU plan's driver folders go in front of
    the image's own search paths."""
    env = []
    for key, value in plan.run_kwargs.get("environment", {}).items():
        mine = image_env.get(key)
        env.append((key, f"{value}:{mine}" if mine else value))
    return Profile(gpu_mode=plan.mode, gpus=tuple(plan.indices), user=user_for(image_user),
                   network=network, env=tuple(env), plan=plan)


def for_stack(cuda: bool, gpus: list[int] | None, mode: str, image_user: str) -> Profile:
    """The profile of an image on another host (`envgen profile`), with the network: toolkit
    or CDI GPUs for a CUDA stack (every GPU when `gpus` is None), none for a CPU one."""
    if not cuda or mode == "none":
        return Profile(user=user_for(image_user), network=True)
    return Profile(gpu_mode=mode, gpus=tuple(gpus or ()), all_gpus=gpus is None,
                   user=user_for(image_user), network=True)


def pod_name(name: str) -> str:
    """A stack's name as Kubernetes and Compose take a container or service name (an RFC
    1123 label: lower case letters, digits and '-', 63 at most, a letter or digit at each
    end): a stack's own name may hold upper case, '.', '_' and '+'."""
    import re
    label = re.sub(r"[^a-z0-9-]+", "-", name.lower())[:63].strip("-")
    return label or "envgen"


def render(profile: Profile, fmt: str, image: str, name: str, command=()) -> str:
    """One of FORMATS as text: a docker command line, Compose or Kubernetes YAML, JSON."""
    import shlex
    if fmt == "docker":
        return shlex.join(["docker", "run", "--rm", *profile.docker_flags(), image,
                           *command]) + "\n"
    if fmt == "json":
        return json.dumps(profile.to_json(), indent=2) + "\n"
    import yaml
    doc = profile.compose(image, name) if fmt == "compose" else profile.kubernetes(image, name)
    head = "".join(f"# {n}\n" for n in profile.notes(fmt))
    return head + yaml.safe_dump(doc, sort_keys=False, default_flow_style=False)
