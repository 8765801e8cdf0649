"""The certificate: one shape, built in one place, judged the same at every door.

A certificate is a JSON object (schema SCHEMA) that says this image (`image_id`) of this
stack ran the smoke payload on these GPUs under this driver, with the payload's own report
and exit code. `head` and `finish` build it (Docker and Apptainer certification call them,
and the Kubernetes pod's template is `head`); `form_problem` and `pass_problem` are the
judgement every door of the store applies (certify, certs import and merge, fleet
--collect); `readable` is the lenient reading of what a store already holds; `where`,
`gpus_of` and `where_text` are the projections every view uses."""
from __future__ import annotations

import calendar
import re
import time

from .. import __version__
from ..core.model import Stack
from ..matrix.wire import IMAGE_ID, stack_problems

SCHEMA = 1
LEVELS = ("cpu", "cuda", "multi-gpu")   # lowest first: verify --level compares by index
SKEW_S = 300   # how far after this host's clock a `created` may be (clocks of a cluster drift)
_CREATED = re.compile(r"(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)(\.\d{1,9})?Z", re.ASCII)


def _shown(value, limit: int = 40) -> str:
    return repr(value)[:limit]


def created_problem(created, now: float | None = None) -> str | None:
    """`created` is a real UTC time (2026-12-01T12:00:00Z) no more than SKEW_S after `now`
    (this host's clock): a certificate from the future would outrank every real run of its
    key for as long as its date lies ahead."""
    m = _CREATED.fullmatch(created) if isinstance(created, str) else None
    if m is None:
        return f"created {_shown(created)} is not a UTC time like 2026-12-01T12:00:00Z"
    y, mo, d, h, mi, sec = (int(g) for g in m.groups()[:6])
    try:
        when = calendar.timegm(time.strptime(created[:19], "%Y-%m-%dT%H:%M:%S"))
    except ValueError:
        when = None
    if when is None or not (1 <= mo <= 12 and 1 <= d <= 31 and h < 24 and mi < 60
                            and sec < 60) or y < 2000:
        return f"created {_shown(created)} is not a real date and time"
    now = time.time() if now is None else now
    if when > now + SKEW_S:
        return (f"created {created} lies {(when - now) / 3600:.1f} h after this host's clock "
                f"(a certificate from the future would outrank every real run of its key)")
    return None


# The certificate's form as JSON Schema, of the matrix schema's fragments: what every door
# checks before anything reads a field (matrix/forms.py checks it; each node's `message` is
# its one sentence). What a schema cannot say stays in form_problem: the schema version's
# own sentence, a real `created`, a tag that is one printable line, the stack as a lock's.
_SHA = {"type": "string", "pattern": r"^sha256:[0-9a-f]{64}$"}
_HOST = "host is not {{driver, gpus: [{{name, ...}}]}}"
_CHECKS = "report.checks is not a list of {{name, passed}} checks"
CERTIFICATE = {
    "type": "object", "required": ["schema", "image_id", "passed", "report"],
    "yaml": False,   # a JSON form: no hint about YAML's numbers
    "properties": {
        "image_id": {**_SHA, "message": "image_id {value} is not sha256:<64 hex digits>"},
        "image_content": {**_SHA,
                          "message": "image_content {value} is not sha256:<64 hex digits>"},
        "passed": {"type": "boolean", "message": "`passed` is not true or false"},
        "level": {"enum": [*LEVELS, None],
                  "message": f"level {{value}} is not one of {', '.join(LEVELS)}"},
        "profile": {"type": "string", "pattern": r"^[a-z0-9-]{0,40}$",
                    "message": "profile {value} is not a run profile"},
        "image_tags": {"type": "array", "message": "image_tags is not a list of tags",
                       "items": {"type": "string", "minLength": 1, "maxLength": 1000,
                                 "message": "image_tags holds {value}, which is not one "
                                            "printable line"}},
        "image_digests": {"type": "array", "maxItems": 1000,
                          "message": "image_digests is not a list of repository digests",
                          "items": {"type": "string",
                                    "pattern": r"^[\x21-\x3f\x41-\x7e]{1,255}@sha256:[0-9a-f]{64}$",
                                    "message": "image_digests holds {value}, which is not "
                                               "REPOSITORY@sha256:<64 hex digits>"}},
        "host": {"type": "object", "message": _HOST, "properties": {
            "gpus": {"type": "array", "items": {"type": "object", "properties": {
                "name": {"type": "string", "pattern": r"^[\x20-\x7e]{1,128}$",
                         "message": "host.gpus names a GPU {value}: not one line of "
                                    "printable ASCII as nvidia-smi names GPUs"}}}},
            "driver": {"anyOf": [{"enum": [None, ""]},
                                 {"type": "string", "pattern": r"^[0-9]{1,4}(\.[0-9]{1,4}){0,3}$"}],
                       "message": "host.driver {value} is not a driver version like "
                                  "580.95.05"}}},
        "report": {"type": "object", "required": ["checks"], "message": _CHECKS,
                   "properties": {"checks": {"type": "array", "items": {
                       "type": "object", "required": ["name", "passed"],
                       "properties": {
                           "name": {"type": "string", "pattern": r"^[\x20-\x7e]{1,200}$",
                                    "message": "report.checks names a check {value}: not one "
                                               "line of printable ASCII"},
                           "passed": {"type": "boolean"}}}}}},
    },
}
_FIRST = ("image_id", "image_content", "passed")   # judged before `created`, as always


def form_problem(cert, now: float | None = None) -> str | None:
    """Not a certificate this envgen reads: wrong type, schema or field (`now`: this host's
    clock, for `created`)."""
    from ..matrix.forms import errors, field_path, sentence
    if not isinstance(cert, dict):
        return f"not a certificate: a JSON {type(cert).__name__}, not an object"
    if "schema" not in cert:
        return "not an envgen certificate: it has no `schema`"
    if cert["schema"] != SCHEMA or isinstance(cert["schema"], bool):
        return (f"certificate schema {_shown(cert['schema'])} is not one this envgen reads "
                f"({SCHEMA})")
    order = [*CERTIFICATE["properties"]]
    found = sorted(errors(cert, CERTIFICATE), key=lambda e: (
        order.index(field_path(e)[0]) if field_path(e)[:1] and field_path(e)[0] in order
        else len(order)))
    early = [e for e in found if field_path(e)[:1] and field_path(e)[0] in _FIRST]
    why = (sentence(early[0], CERTIFICATE) if early else None) \
        or created_problem(cert.get("created"), now) \
        or (sentence(found[0], CERTIFICATE) if found else None)
    if why:
        return why
    bad = next((t for t in cert.get("image_tags", []) if not t.isprintable()), None)
    if bad is not None:
        return f"image_tags holds {_shown(bad)}, which is not one printable line"
    problems = stack_problems(cert.get("stack"))
    if problems:
        return f"its stack is not one envgen wrote ({problems[0]})"
    return None


def pass_problem(cert: dict) -> str | None:
    """A pass the certificate's own record contradicts (after form_problem found none)."""
    if not cert["passed"]:
        return None   # a failure on record is honest whatever its checks say
    report = cert["report"]
    failed = [c["name"] for c in report["checks"] if not c["passed"]]
    if failed:
        return (f"it claims a pass but its check {failed[0]!r} failed"
                + (f" (and {len(failed) - 1} more)" if len(failed) > 1 else ""))
    code = cert.get("exit_code")
    if type(code) is not int or code != 0:   # 0.0 and False are no exit status
        return f"it claims a pass but the payload exited {_shown(code)}, not 0"
    if report.get("passed") is not True:
        return "it claims a pass but its payload's report did not pass"
    if not report["checks"]:
        return "it claims a pass with no checks run"
    if all(c.get("skipped") for c in report["checks"]):
        return "it claims a pass but every check of its payload was skipped (none ran)"
    names = [c["name"] for c in report["checks"]]
    twice = next((n for n in names if names.count(n) > 1), None)
    if twice is not None:
        return (f"it claims a pass but its payload's report names the check {twice!r} "
                f"{names.count(twice)} times (a payload reports each check once)")
    return level_problem(cert) or payload_problem(cert)


def level_problem(cert: dict) -> str | None:
    """The level of a pass: the payload's own (finish and the fleet's pod copy it from the
    report), the one its --require allowed, on the GPUs it ran on, with the device the
    payload trained on named."""
    report, level = cert["report"], cert.get("level")
    if level not in LEVELS:
        return f"it claims a pass with no level ({', '.join(LEVELS)})"
    if level != report.get("level"):
        return (f"it claims level {_shown(level)} but its payload's report says "
                f"{_shown(report.get('level'))}")
    if report.get("require") == "cpu" and level != "cpu":
        return f"it claims level {level} but its payload was run with --require cpu"
    n = len(gpus_of(cert))
    need = {"cuda": 1, "multi-gpu": 2}.get(level, 0)
    if n < need:
        return (f"it claims a pass at level {level} on {n} GPU(s); that level runs on at "
                f"least {need}")
    device = report.get("device", {"name": "-"})   # reports before the harness said none
    if need and not (isinstance(device, dict) and device.get("name")):
        return f"it claims a pass at level {level} but its payload's report names no GPU device"
    return gpu_run_problem(level, report["checks"]) if need else None


# The checks of a payload (envgen/smoke) that prove it used the GPU: nvidia-smi saw it, the
# framework found it (cuda_available: torch payloads; gpu_available: JAX and TensorFlow), the
# device it names, kernels for its architecture (cuda_arch: torch), the trained model's
# weights on it (model_on_cuda: torch payloads; model_on_gpu: JAX and TensorFlow) and a cuDNN
# convolution on it. At a GPU level each runs (gpu_check runs them there), so a pass at that
# level with one of them skipped is a CPU run relabelled. TRAIN is the training every payload
# reports under that name (keras_jax_smoke adds keras_train beside JAX's own train).
GPU_CHECKS = ("nvidia_smi", "cuda_available", "gpu_available", "device", "cuda_arch",
              "model_on_cuda", "model_on_gpu", "cudnn_conv")
TRAIN = "train"


def gpu_run_problem(level: str, checks: list) -> str | None:
    """A pass at level cuda or multi-gpu (its checks all passed, its names unique) whose
    checks do not show the GPU run that level is: the training ran, no check that proves the
    GPU was skipped, and at multi-gpu a multi_gpu check ran."""
    ran = {c["name"] for c in checks if not c.get("skipped")}
    if TRAIN not in ran:
        return (f"it claims a pass at level {level} but its payload's report has no "
                f"{TRAIN!r} check that ran (the training is what a certificate proves)")
    skipped = next((c["name"] for c in checks if c.get("skipped") and c["name"] in GPU_CHECKS),
                   None)
    if skipped is not None:
        return (f"it claims a pass at level {level} but its check {skipped!r}, which proves "
                f"the GPU, was skipped")
    if level == "multi-gpu" and not any(n.startswith("multi_gpu") for n in ran):
        return ("it claims a pass at level multi-gpu but no multi_gpu check of its payload "
                "ran")
    return None


def payload_problem(cert: dict) -> str | None:
    """The report, where it names its payload (the harness's always do), is of the payload
    the stack names (`smoke`: torch → torch_smoke)."""
    smoke = cert["stack"].get("smoke") if isinstance(cert.get("stack"), dict) else None
    ran = cert["report"].get("payload", f"{smoke}_smoke")
    if isinstance(smoke, str) and ran != f"{smoke}_smoke":
        return (f"its payload's report is of {_shown(ran)}, not {smoke}_smoke, the payload of "
                f"its {cert['stack'].get('stack')} stack")
    return None


def intrinsic_problem(cert, now: float | None = None) -> str | None:
    """What the certificate's own content gives away, with nothing else to compare: its
    form, and a pass its record contradicts. Every door into the store asks this."""
    return form_problem(cert, now) or pass_problem(cert)


def profile_of(require: str, host_has_gpu: bool, steps: int | None, multi_gpu: bool) -> str:
    """'' for the default run on this host, else a short name of what differs."""
    parts = []
    if require == "cpu" and host_has_gpu:
        parts.append("cpu")
    if steps:
        parts.append(f"steps{steps}")
    if multi_gpu:
        parts.append("multi-gpu")
    return "-".join(parts)


def gpus_of(cert: dict) -> list[str]:
    """The names of the GPUs a certificate ran on, as nvidia-smi gave them. None for a run
    its payload was told to make on no GPU (--require cpu: `--gpus none`, a host without
    GPUs) or that passed at level cpu (which only such a run does: a payload told to use
    the GPU fails without it), whatever `host.gpus` lists: envgens before 2026-12-07
    listed every GPU of the host for `--gpus none`. A run told to use the GPU that failed
    at level cpu stays on its GPUs: that is where it failed."""
    report = cert.get("report") if isinstance(cert.get("report"), dict) else {}
    if report.get("require") == "cpu" or (cert.get("level") == "cpu"
                                          and cert.get("passed") is True):
        return []
    host = cert.get("host") if isinstance(cert.get("host"), dict) else {}
    gpus = host.get("gpus") if isinstance(host.get("gpus"), list) else []
    return [str(g.get("name")) for g in gpus if isinstance(g, dict) and g.get("name")]


def where(cert: dict) -> dict:
    """Where a certificate ran, as its key has it: {"gpu": "NVIDIA H200" (several kinds
    joined by ' + '), "count", "driver"}; a run on no GPU is {"gpu": None, "count": 0,
    "driver": None} whatever the host's driver, since it used none."""
    names = gpus_of(cert)
    if not names:
        return {"gpu": None, "count": 0, "driver": None}
    host = cert["host"]
    driver = host.get("driver") if isinstance(host.get("driver"), str) else None
    return {"gpu": " + ".join(sorted(set(names))), "count": len(names), "driver": driver}


def where_text(w: dict) -> str:
    """'2× NVIDIA H200, driver 580.159.04', or 'no GPU'."""
    if not w["count"]:
        return "no GPU"
    return (f"{w['count']}× " if w["count"] > 1 else "") + f"{w['gpu']}, driver " \
        f"{w['driver'] or '?'}"


def readable(c: object) -> bool:
    """A stored certificate envgen can show (other files in the store's folder are skipped);
    what entered through a door passed form_problem, which asks more."""
    return (isinstance(c, dict) and isinstance(c.get("image_id"), str)
            and IMAGE_ID.fullmatch(c["image_id"]) is not None and isinstance(c.get("passed"), bool)
            and isinstance(c.get("stack"), dict) and isinstance(c["stack"].get("stack"), str)
            and isinstance(c.get("created", ""), str)
            and isinstance(c.get("image_tags", []), list)
            and all(isinstance(t, str) for t in c.get("image_tags", []))
            and isinstance(c.get("profile", ""), (str, type(None)))
            and isinstance(c.get("level"), (str, type(None)))
            and _dicts(c, "host", "gpus") and _dicts(c, "report", "checks"))


def _dicts(c: dict, part: str, key: str) -> bool:
    """c[part] is a mapping (or absent) whose `key` is a list of mappings (or absent): what
    every view reads of a stored certificate's GPUs and checks."""
    inner = c.get(part, {})
    if not isinstance(inner, dict):
        return False
    items = inner.get(key, [])
    return isinstance(items, list) and all(isinstance(x, dict) for x in items)


# ---- building ------------------------------------------------------------------------------

def names_image(cert: dict, ref: str) -> bool:
    """Whether the certificate is of the image `ref` names: an image ID (sha256:..., or the
    start of one), NAME@sha256:DIGEST (one of its repository digests), or NAME[:TAG] (one
    of its tags; no tag means latest). A SIF is named by its path, which is its tag."""
    from ..core.image import familiar, split_tag
    image_id = cert.get("image_id") or ""
    if re.fullmatch(r"sha256:[0-9a-f]{12,64}", ref, re.ASCII):
        return image_id.startswith(ref)
    name, at, digest = ref.partition("@")
    if at:
        repo = split_tag(name)[0]
        return any(d.partition("@")[2] == digest and
                   familiar(d.partition("@")[0]) == familiar(repo)
                   for d in cert.get("image_digests") or ())
    if ref.startswith("/"):   # a SIF's path
        return ref in (cert.get("image_tags") or ())
    repo, tag = split_tag(ref)
    return familiar(f"{repo}:{tag}") in {familiar(t) for t in cert.get("image_tags") or ()}


def now() -> str:
    """This moment as a certificate's `created`."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def head(*, image_id: str, tags, profile: str, params: dict, stack: Stack,
         payload: dict, image_content: str | None = None, digests=()) -> dict:
    """What is known of a certification before it runs: what every certificate starts with,
    whatever the engine (and the template a Kubernetes pod completes itself).
    `image_content`: what the image's bits are whatever its build's clock
    (runtime.docker.content_of), so a rebuild with the same layers is found certified.
    `digests`: the image's repository digests (REPOSITORY@sha256:...), so a run of an image
    named by digest can be told apart from a run of another image."""
    return {"schema": SCHEMA, "image_id": image_id, "image_tags": list(tags),
            **({"image_digests": sorted(digests)} if digests else {}),
            **({"image_content": image_content} if image_content else {}),
            "profile": profile, "params": params, "stack": stack.to_json(),
            "payload": payload, "envgen_version": __version__}


# platform.machine() of a host that runs each image platform natively
MACHINES = {"linux/amd64": ("x86_64", "amd64"), "linux/arm64": ("aarch64", "arm64")}


def emulation(stack, machine: str | None = None) -> dict:
    """For an image of another platform than linux/amd64, or a host that is not x86_64:
    the image's platform, this host's machine, and whether the run went through an
    emulator (QEMU's binfmt_misc handler); {} otherwise, so amd64 certificates keep
    their form."""
    import platform as host_platform
    machine = machine or host_platform.machine()
    image = (stack.get("platform") if isinstance(stack, dict) else None) or "linux/amd64"
    if image == "linux/amd64" and machine in MACHINES["linux/amd64"]:
        return {}
    return {"platform": image, "host_machine": machine,
            "emulated": machine not in MACHINES.get(image, ())}


def finish(start: dict, *, report: dict, code: int, host: dict, started: float,
           preflight=(), **more) -> dict:
    """The certificate of a run: `start` (head) with the payload's report and exit code, the
    host it ran on and how long it took. It passes only when the payload's own report
    passed and the payload exited 0; `more` adds what one engine records beside (the run
    profile, a SIF's digest, the isolation)."""
    return {**start, **more, **emulation(start.get("stack")), "level": report.get("level"),
            "passed": bool(report.get("passed")) and code == 0, "exit_code": code,
            "host": host, "preflight": list(preflight), "report": report, "created": now(),
            "seconds": round(time.monotonic() - started, 2)}
