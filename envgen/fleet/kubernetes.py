"""Kubernetes: one batch/v1 Job per stack x target. The pod runs the stack's image itself
(no Docker inside): the smoke payload as certification runs it, with the run profile's
shared memory, no privilege, every capability dropped, as a non-root user, and prints its
certificate in the log (`kubectl logs job/NAME | envgen certs import -`)."""
from __future__ import annotations

from pathlib import Path

import yaml

from ..certify.run import payload_command
from ..certs import certificate
from ..certs.certificate import profile_of
from ..runtime.profile import NCCL_ENV, SHM_SIZE
from .spec import Fleet, Task

UID = 65534   # nobody, as certification runs an image whose user is root
BACKOFF_LIMIT = 0   # a failed certification is a verdict, not a hiccup to retry
KEEP_FINISHED_S = 7 * 86400   # long enough to read each log back


def _shm_limit() -> str:   # Docker's "8g" as a Kubernetes quantity
    return SHM_SIZE[:-1] + "Gi" if SHM_SIZE.endswith("g") else SHM_SIZE


def image_of(task: Task, images: dict) -> tuple[str, str, list[str]]:
    """(the reference the pod pulls, the image ID, its tags) for a task. `images` maps each
    reference to (ID, repo digests, tags) as the local daemon knows it; a repo digest pins
    the pull when the image was pushed."""
    from ..core.image import default_tag
    ref = task.stack.image or default_tag(task.resolved)
    image_id, digests, tags = images[ref]
    return (digests[0] if digests else ref), image_id, list(tags)


K8S_MIN_SECONDS = 120   # the payload gets time - 30 s, at least 60 s, and the Job's deadline
# must leave it time to print its certificate line


def manifest(task: Task, images: dict) -> dict:
    t = task.target
    pull, image_id, tags = image_of(task, images)
    cuda = t.level == "cuda"
    timeout = max(60, t.seconds - 30)
    # a CUDA target of several GPUs certifies them together (the payload's --multi-gpu)
    payload, cmd = payload_command(task.resolved, cuda, timeout, t.steps, t.multi_gpu)
    # the pod completes it as certificate.finish does (pod.py: the standard library only)
    base = certificate.head(
        image_id=image_id, tags=tags,
        profile=profile_of(t.level, t.gpus > 0, t.steps, t.multi_gpu),
        params={"gpus": "all" if cuda else "none", "steps": t.steps,
                "multi_gpu": t.multi_gpu, "timeout": timeout},
        stack=task.resolved, payload={"path": payload, "sha256": None}) | {"command": cmd}
    import json
    from importlib.resources import files
    source = files("envgen.fleet").joinpath("pod.py").read_text()
    labels = {"app.kubernetes.io/name": "envgen", "app.kubernetes.io/component": "certify",
              "envgen.io/target": t.name, "envgen.io/task": str(task.index)}
    env = [{"name": k, "value": v} for k, v in sorted(NCCL_ENV.items())]
    if not cuda:   # the image says all: on a node whose default runtime is NVIDIA's, a
        # pod that asks for no GPU would see every GPU there (k8s-device-plugin#61)
        env.append({"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"})
    env += [{"name": "HOME", "value": "/tmp"},
            {"name": "CERTIFY_TEMPLATE", "value": json.dumps(base, sort_keys=True)},
            {"name": "CERTIFY_NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
            {"name": "CERTIFY_POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}]
    container = {
        "name": "certify", "image": pull, "imagePullPolicy": "IfNotPresent",
        "command": ["python", "-c", source], "env": env,
        "securityContext": {"runAsNonRoot": True, "runAsUser": UID, "runAsGroup": UID,
                            "allowPrivilegeEscalation": False, "privileged": False,
                            "readOnlyRootFilesystem": True,
                            "capabilities": {"drop": ["ALL"]},
                            "seccompProfile": {"type": "RuntimeDefault"}},
        "volumeMounts": [{"name": "shm", "mountPath": "/dev/shm"},
                         {"name": "tmp", "mountPath": "/tmp"}]}
    if t.gpus:
        container["resources"] = {"limits": {"nvidia.com/gpu": t.gpus}}
    pod = {"restartPolicy": "Never", "automountServiceAccountToken": False,
           "enableServiceLinks": False,
           "securityContext": {"runAsNonRoot": True, "runAsUser": UID, "runAsGroup": UID,
                               "seccompProfile": {"type": "RuntimeDefault"}},
           "containers": [container],
           "volumes": [{"name": "shm", "emptyDir": {"medium": "Memory",
                                                    "sizeLimit": _shm_limit()}},
                       {"name": "tmp", "emptyDir": {}}]}
    if t.gpu_product:
        pod["nodeSelector"] = {"nvidia.com/gpu.product": t.gpu_product}
    if t.gpus:
        pod["tolerations"] = [{"key": "nvidia.com/gpu", "operator": "Exists",
                               "effect": "NoSchedule"}]
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": task.name, "labels": labels,
                         "annotations": {"envgen.io/stack": task.resolved.stack,
                                         "envgen.io/spec": task.stack.spec}},
            "spec": {"backoffLimit": BACKOFF_LIMIT, "activeDeadlineSeconds": t.seconds,
                     "ttlSecondsAfterFinished": KEEP_FINISHED_S,
                     "template": {"metadata": {"labels": labels}, "spec": pod}}}


def local_images(fleet: Fleet) -> dict:
    """Each image the tasks name, as this Docker daemon knows it (its ID goes into the
    certificate); an image that is not there is refused by certify's own sentence."""
    from ..core.image import default_tag
    from ..runtime import docker as engine
    from ..runtime.docker import inspect_target
    c = engine.client()
    out = {}
    for t in fleet.tasks():
        ref = t.stack.image or default_tag(t.resolved)
        if ref not in out:
            target = inspect_target(c, ref)
            out[ref] = (target.image_id, list(target.repo_digests), list(target.tags))
    return out


class _PlainDumper(yaml.SafeDumper):
    """YAML without anchors and aliases: each manifest reads whole on its own (kubectl and
    reviewers do not expand `*id001`)."""

    def ignore_aliases(self, data) -> bool:
        return True


def write(fleet: Fleet, out: Path, images: dict | None = None) -> dict:
    """DIR/TASK.yaml, one Job per task; `unpushed` names each image that only this daemon
    has (no registry digest): a node elsewhere cannot pull it, so it is said, not hidden."""
    from ..core.files import write_atomic
    short = next((t for t in fleet.targets if t.seconds < K8S_MIN_SECONDS), None)
    if short is not None:
        from ..core.errors import InputError
        raise InputError(f"target {short.name!r}: time {short.seconds} s is too short for a "
                         f"Kubernetes Job, whose deadline would end the pod before it printed "
                         f"its certificate (at least 2m)", file=str(fleet.path),
                         line=short.line or None)
    images = local_images(fleet) if images is None else images
    out.mkdir(parents=True, exist_ok=True)
    written, unpushed = [], []
    for task in fleet.tasks():
        path = out / f"{task.name}.yaml"
        doc = manifest(task, images)
        write_atomic(path, f"# envgen fleet: task {task.index}, target {task.target.name}\n"
                     + yaml.dump(doc, Dumper=_PlainDumper, sort_keys=False, width=100))
        pull, _, _ = image_of(task, images)
        if "@sha256:" not in pull and pull not in unpushed:
            unpushed.append(pull)
        written.append({"name": task.name, "path": str(path), "stack": task.resolved.stack,
                        "target": task.target.name, "image": pull})
    # an earlier fleet's Job left here would be applied too by `kubectl apply -f DIR`
    mine = {Path(w["path"]).name for w in written}
    for old in out.glob("envgen-*.yaml"):
        if old.name not in mine and old.read_text(errors="replace").startswith(
                "# envgen fleet: task "):
            old.unlink()
    return {"folder": str(out), "manifests": written, "unpushed": unpushed}
