"""The fleet spec (`envgen fleet FILE`, examples/certify-fleet.yaml): the stacks to certify
and the GPU targets to certify them on, read with line marks; every bad value is refused
with `FILE:LINE` (exit 2). Not the hosts file of `envgen diff --hosts` and `report --hosts`
(examples/fleet.yaml: hosts with their driver and GPUs), which diff.py reads."""
from __future__ import annotations

import functools
import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

from ..core.errors import EnvgenError, InputError, MatrixError, shown

NAME = re.compile(r"[a-z0-9](?:[a-z0-9-]{0,30}[a-z0-9])?")
# Slurm partition names: letters, digits, _ . - (never a leading '-': no option injection)
PARTITION = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}")
# a spec is envgen's own grammar; this only keeps shells and option parsers out of it
SPEC_CHARS = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.,=<>!~*+-]{0,199}")
TIME = re.compile(r"(?:([0-9]{1,3})h)?(?:([0-9]{1,5})m)?(?:([0-9]{1,6})s)?")   # ASCII digits
# Slurm's own forms (sbatch --time): MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS
SLURM_TIME = re.compile(r"(?:([0-9]{1,3})-)?([0-9]{1,5})(?::([0-9]{1,2}))?(?::([0-9]{1,2}))?")
LEVELS = ("cuda", "cpu")
# stacks x targets: at most what tasks.json may hold for --submit and --collect to read it
# back (fleet/state.py: MAX_STATE bytes, a task's entry at most about 1.6 KB)
MAX_TASKS = 10_000
# a task's time: at least Slurm's minute (a Kubernetes Job needs two: kubernetes.py), and
# no longer than certify's own limit (a day), so the scheduler's limit and certify's agree
MIN_SECONDS, MAX_SECONDS = 60, 86400
# a SIF on the cluster's shared file system, for the apptainer engine: a plain absolute path
SIF_PATH = re.compile(r"/(?!.*(?:^|/)\.\.(?:/|$))[A-Za-z0-9_./+-]{1,400}\.sif")


def _pattern(rx: re.Pattern) -> str:
    return f"^(?:{rx.pattern})$"


# The fleet spec's form as JSON Schema, checked through the matrix's machinery
# (matrix/forms.py) with file:line; each node words its own sentence. What a schema cannot
# say stays in _target, _stack and parse: a name listed twice, a GPU product the matrix must
# know, level cuda with no GPU, a duration, an image reference, the resolution itself.
_COUNT = "gpus {value} must be a whole number from 0 to 64"
_TARGET = {
    "type": "object", "required": ["name"], "additionalProperties": False,
    "message": "a target must be a mapping with a name",
    "properties": {
        "name": {"type": "string", "pattern": _pattern(NAME),
                 "message": "target name {value} must be 1 to 32 of a-z, 0-9 and '-', not "
                            "starting or ending with '-'"},
        "partition": {"type": "string", "pattern": _pattern(PARTITION),
                      "message": "partition {value} is not a Slurm partition name (letters, "
                                 "digits, _ . -, not starting with '-')"},
        "gpu_product": {"type": "string", "maxLength": 200,
                        "message": "gpu_product {value} is not a GPU product label"},
        "gpus": {"type": "integer", "minimum": 0, "maximum": 64, "message": _COUNT},
        "time": {"type": ["string", "integer"],
                 "message": "time {value} is not a duration like 30m, 2h, 1h30m, 90s or "
                            "Slurm's 1:30:00 (at least 1m, at most 24h)"},
        "level": {"enum": list(LEVELS), "message": "level {value} must be cuda or cpu"},
        "steps": {"type": "integer", "minimum": 6, "maximum": 1_000_000,
                  "message": "steps {value} must be a whole number from 6 (the payload's "
                             "least) to 1000000"},
    },
}
_SPEC = {"type": "string", "pattern": _pattern(SPEC_CHARS),
         "message": "stack {value} is not a stack name or spec (letters, digits and , = < > "
                    "! ~ * + . _ -, not starting with '-'; no spaces, quotes or $)"}
FLEET_SPEC = {
    "type": "object", "required": ["stacks", "targets"], "additionalProperties": False,
    "message": "a fleet spec must be a mapping with `stacks:` and `targets:` (a hosts file, "
               "`hosts:`, is what `envgen diff --hosts` reads)",
    "properties": {
        "stacks": {"type": "array", "minItems": 1,
                   "message": "`stacks:` must be a non-empty list",
                   "items": {"anyOf": [_SPEC, {
                       "type": "object", "required": ["spec"], "additionalProperties": False,
                       "message": "a stack is a name or spec, or has spec, image or sif",
                       "properties": {
                           "spec": _SPEC,
                           "image": {"type": "string", "maxLength": 300,
                                     "message": "image {value} is not an image reference"},
                           "sif": {"type": "string", "pattern": _pattern(SIF_PATH),
                                   "message": "sif {value} is not an absolute path to a .sif "
                                              "file (letters, digits and _ . / + -)"}}}]}},
        "targets": {"type": "array", "minItems": 1, "items": _TARGET,
                    "message": "`targets:` must be a non-empty list"},
    },
}


def gfd_product(nvidia_smi_name: str) -> str:
    """The `nvidia.com/gpu.product` label NVIDIA's GPU feature discovery gives a GPU of this
    NVML name: characters other than A-Z a-z 0-9 - _ . and space dropped, then the words
    joined with '-' (sanitise() and getProductName() in NVIDIA/k8s-device-plugin
    internal/lm/resource.go, commit aaccdfd2dc80554d3b67474d027923ccde39cb50):
    "NVIDIA H100 80GB HBM3" -> "NVIDIA-H100-80GB-HBM3". GFD appends -SHARED to a GPU
    shared by time-slicing and -MIG-<profile> to a MIG device."""
    return "-".join(re.sub(r"[^A-Za-z0-9_. -]", "", nvidia_smi_name).split())


def known_products(matrix) -> dict[str, object]:
    """label value -> the matrix's GPU, for every NVML name the matrix lists (its aliases
    are nvidia-smi's names)."""
    out = {}
    for g in matrix.gpus:
        for name in g.aliases:
            out[gfd_product(name)] = g
    return out


@dataclass(frozen=True)
class Target:
    name: str
    partition: str | None
    gpu_product: str | None
    gpu: str | None           # the matrix's GPU name the product maps to
    gpus: int
    seconds: int
    level: str
    steps: int | None
    line: int
    partition_line: int = 0
    gpus_line: int = 0

    @property
    def multi_gpu(self) -> bool:
        """A CUDA target of several GPUs certifies them together (certify --multi-gpu)."""
        return self.level == "cuda" and self.gpus > 1

    @property
    def slurm_time(self) -> str:   # H:MM:SS (Slurm rounds up to whole minutes)
        h, rest = divmod(self.seconds, 3600)
        return f"{h}:{rest // 60:02d}:{rest % 60:02d}"


@dataclass(frozen=True)
class FleetStack:
    spec: str                 # as written: a stack name or a spec
    image: str | None         # an image reference to certify instead of the spec's tag
    line: int
    sif: str | None = None    # the SIF the apptainer engine certifies (envgen sif made it)


@dataclass(frozen=True)
class Task:
    index: int
    stack: FleetStack
    target: Target
    resolved: object          # the resolved Stack (stack name, default tag)

    @property
    def name(self) -> str:
        """A DNS-1123 label (a Kubernetes Job's name, a file name), unique by index."""
        slug = re.sub(r"[^a-z0-9-]+", "-", self.resolved.stack.lower()).strip("-")
        return f"envgen-{self.index}-{slug}-{self.target.name}"[:63].rstrip("-")


@dataclass(frozen=True)
class Fleet:
    path: str
    sha256: str
    stacks: tuple[FleetStack, ...]
    targets: tuple[Target, ...]
    resolved: dict            # (stack index, target name) -> Stack

    def tasks(self) -> list[Task]:
        """One task per stack x target, numbered target by target (a job array per
        target keeps its tasks' indices contiguous)."""
        out = []
        for t in self.targets:
            for i, s in enumerate(self.stacks):
                out.append(Task(len(out), s, t, self.resolved[(i, t.name)]))
        return out


def _line(obj, key=None, default=None):
    lines = getattr(obj, "lines", None)
    if key is not None and isinstance(lines, dict) and key in lines:
        return lines[key]
    return getattr(obj, "line", None) or default


def _slurm_seconds(m: re.Match) -> int | None:
    """Seconds of a SLURM_TIME match, read as sbatch reads it; None when a field after the
    first is out of range (minutes or seconds past 59, the hours of D-HH past 23)."""
    days, fields = m.group(1), [int(x) for x in m.groups()[1:] if x is not None]
    if any(f > 59 for f in fields[1:]) or (days is not None and fields[0] > 23):
        return None
    if days is not None:              # D-HH, D-HH:MM, D-HH:MM:SS
        h, mi, s = (fields + [0, 0])[:3]
        return int(days) * 86400 + h * 3600 + mi * 60 + s
    if len(fields) == 3:              # HH:MM:SS
        return fields[0] * 3600 + fields[1] * 60 + fields[2]
    mi, s = (fields + [0])[:2]        # MM, MM:SS
    return mi * 60 + s


def parse_seconds(value) -> int | None:
    """'30m', '2h', '1h30m', '90s', Slurm's forms (MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM,
    D-HH:MM:SS) or a number of minutes -> seconds; None when not one."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value * 60 if MIN_SECONDS <= value * 60 <= MAX_SECONDS else None
    if not isinstance(value, str) or not value or len(value) > 20:
        return None
    m, slurm = TIME.fullmatch(value), SLURM_TIME.fullmatch(value)
    if m and any(m.groups()):
        h, mi, s = (int(x) if x else 0 for x in m.groups())
        total = h * 3600 + mi * 60 + s
    elif slurm:
        total = _slurm_seconds(slurm)
    else:
        return None
    return total if total is not None and MIN_SECONDS <= total <= MAX_SECONDS else None


def _target(t, at, problems, products, seen) -> Target | None:
    """A target whose form FLEET_SPEC passed, checked for what the schema cannot say."""
    def bad(key, msg):
        problems.append((_line(t, key, at), msg))

    name, ok = t["name"], True
    for key in ("gpus", "steps"):   # a schema's integer takes 1.0, which sbatch and certify do not
        if key in t and (isinstance(t[key], bool) or not isinstance(t[key], int)):
            bad(key, f"target {name!r}: {key} {shown(t[key])} must be a whole number "
                     f"written without a point")
            ok = False
    if name in seen:
        bad("name", f"target {name!r} is listed twice (first on line {seen[name]})")
        ok = False
    seen.setdefault(name, _line(t, "name", at))
    product, gpu = t.get("gpu_product"), None
    if product is not None:
        gpu = products.get(product.removesuffix("-SHARED"))
        if gpu is None:
            import difflib
            near = difflib.get_close_matches(product, sorted(products), n=5, cutoff=0.4)
            bad("gpu_product", f"target {name!r}: gpu_product {shown(product)} is not a GPU "
                               f"the matrix knows by its nvidia.com/gpu.product label "
                               f"(nearest: {', '.join(near) or 'none'}; {len(products)} known: "
                               f"each nvidia-smi name of `envgen matrix show gpus` with its "
                               f"spaces as '-', e.g. NVIDIA-H100-80GB-HBM3)")
            ok = False
    level = t.get("level", "cuda")
    gpus = t.get("gpus", 1 if level == "cuda" else 0)
    if level == "cuda" and gpus == 0:
        bad("gpus", f"target {name!r}: level cuda needs at least one GPU (gpus: 1)")
        ok = False
    if level == "cpu" and gpus:   # certify runs with --gpus none: they would sit idle
        bad("gpus", f"target {name!r}: level cpu certifies with no GPU, so gpus: {gpus} would "
                    f"reserve GPUs it never uses (leave gpus out, or write level: cuda)")
        ok = False
    seconds = parse_seconds(t.get("time", "30m"))
    if seconds is None:
        bad("time", f"target {name!r}: time {shown(t.get('time'))} is not a duration like "
                    f"30m, 2h, 1h30m, 90s or Slurm's 1:30:00 (at least 1m, at most 24h)")
        ok = False
    if not ok:
        return None
    return Target(name, t.get("partition"), product, gpu.name if gpu else None, gpus, seconds,
                  level, t.get("steps"), _line(t, "name", at) or 0,
                  _line(t, "partition", at) or 0, _line(t, "gpus", at) or 0)


def _stack(s, at, problems) -> FleetStack | None:
    """A stack whose form FLEET_SPEC passed: its image must be a reference envgen reads."""
    from ..core.image import parse_image_ref
    if not isinstance(s, dict):
        return FleetStack(s, None, at or 0, None)
    spec, image, sif, where = s["spec"], s.get("image"), s.get("sif"), _line(s, "spec", at)
    if image is not None:
        try:
            parse_image_ref(image)
        except InputError as e:
            problems.append((_line(s, "image", at), f"image {shown(image)}: {e.message}"))
            return None
        if image.startswith("-"):
            problems.append((_line(s, "image", at), f"image {shown(image)} starts with '-'"))
            return None
    return FleetStack(spec, image, where or 0, sif)


def parse(doc, file: str, matrix, resolve_one) -> Fleet:
    """Validate a fleet spec (from matrix.yamlfile.load_text): its form against FLEET_SPEC,
    then what a schema cannot say. `resolve_one(spec, gpu_name)` resolves a stack as envgen
    does everywhere (its errors name the spec)."""
    from ..matrix.forms import problems as form_problems
    if not isinstance(doc, dict):
        raise InputError(FLEET_SPEC["message"], file=file, line=_line(doc, None, 1))
    if "hosts" in doc and "stacks" not in doc:
        raise InputError("this is a hosts file (`hosts:`), which `envgen diff --hosts` and "
                         "`envgen report --hosts` read; `envgen fleet` takes a fleet spec "
                         "with `stacks:` and `targets:` (examples/certify-fleet.yaml)",
                         file=file, line=_line(doc, "hosts", 1))
    _check_size(doc, file)
    _raise(form_problems(doc, FLEET_SPEC), file)
    problems: list[tuple[int | None, str]] = []
    stacks: list[FleetStack] = []
    targets: list[Target] = []
    products = known_products(matrix)
    lines = getattr(doc["stacks"], "lines", [])
    listed: set = set()   # one look each (a scan of every earlier stack was quadratic)
    for i, s in enumerate(doc["stacks"]):
        got = _stack(s, lines[i] if i < len(lines) else None, problems)
        if got is not None:
            if (got.spec, got.image) in listed:
                problems.append((got.line, f"stack {got.spec!r} is listed twice"))
            listed.add((got.spec, got.image))
            stacks.append(got)
    lines = getattr(doc["targets"], "lines", [])
    seen: dict[str, int] = {}
    for i, t in enumerate(doc["targets"]):
        got = _target(t, lines[i] if i < len(lines) else None, problems, products, seen)
        if got is not None:
            targets.append(got)
    _raise(problems, file)
    resolved = {}
    once = functools.lru_cache(maxsize=None)(resolve_one)   # a (spec, GPU) resolves once
    for i, s in enumerate(stacks):
        for t in targets:
            on = f" on target {t.name!r} ({t.gpu})" if t.gpu and t.level == "cuda" else ""
            try:
                st = once(s.spec, t.gpu if t.level == "cuda" else None)
            except EnvgenError as e:
                problems.append((s.line, f"stack {s.spec!r}{on}: {e.message}"))
                continue
            if t.level == "cuda" and not st.cuda:
                problems.append((s.line, f"stack {s.spec!r} is a CPU build: certify it on a "
                                         f"target with level: cpu, not on {t.name!r}"))
            resolved[(i, t.name)] = st
    _raise(problems, file)
    sha = hashlib.sha256(Path(file).read_bytes()).hexdigest() if Path(file).is_file() else ""
    return Fleet(file, sha, tuple(stacks), tuple(targets), resolved)


def _check_size(doc, file) -> None:
    """Refuse, before anything is built, a file whose stacks x targets make more tasks than
    MAX_TASKS (a few lines can ask for hundreds of thousands)."""
    stacks, targets = (len(doc.get(k)) if isinstance(doc.get(k), list) else 0
                       for k in ("stacks", "targets"))
    if stacks * targets > MAX_TASKS:
        raise InputError(f"{stacks} stacks on {targets} targets make {stacks * targets} tasks, "
                         f"more than the {MAX_TASKS} one fleet file may make; split it into "
                         f"several fleet files", file=file, line=_line(doc, "stacks", 1))


def _raise(problems, file) -> None:
    if problems:
        problems.sort(key=lambda p: p[0] or 0)
        raise MatrixError([MatrixError(message=msg, file=file, line=line)
                           for line, msg in problems])


@functools.lru_cache(maxsize=1)
def _loader():
    """The matrix's line-aware loader without YAML 1.1's base-60 numbers: unquoted
    `time: 1:30` is the text 1:30 (Slurm's 1 min 30 s), not the integer 90."""
    from ..matrix.yamlfile import _loader as matrix_loader

    class FleetLoader(matrix_loader()):
        pass
    numbers = ("tag:yaml.org,2002:int", "tag:yaml.org,2002:float")
    FleetLoader.yaml_implicit_resolvers = {
        first: [(tag, rx) for tag, rx in found if tag not in numbers]
        for first, found in matrix_loader().yaml_implicit_resolvers.items()}
    FleetLoader.add_implicit_resolver(numbers[0], re.compile(
        r"^(?:[-+]?0b[0-1_]+|[-+]?0[0-7_]+|[-+]?(?:0|[1-9][0-9_]*)|[-+]?0x[0-9a-fA-F_]+)$"),
        list("-+0123456789"))
    FleetLoader.add_implicit_resolver(numbers[1], re.compile(
        r"^(?:[-+]?[0-9][0-9_]*\.[0-9_]*(?:[eE][-+][0-9]+)?|\.[0-9][0-9_]*(?:[eE][-+][0-9]+)?"
        r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"), list("-+0123456789."))
    return FleetLoader


def load_text(text: str, path: str):
    """The fleet file's document, read by _loader(); a file it cannot read is worded, with
    its line, by the matrix's load_text (the same parser: it fails on it too)."""
    import yaml

    from ..matrix.yamlfile import load_text as matrix_load_text
    try:
        return yaml.load(text, Loader=_loader())  # noqa: S506 - a SafeLoader's subclass
    except Exception:
        matrix_load_text(text, path)   # raises MatrixError at the line
        raise


def load(path: str, matrix=None, resolve_one=None) -> Fleet:
    """Read and validate a fleet file; stacks resolve through envgen's resolver."""
    from ..matrix.yamlfile import read_text
    if matrix is None:
        from ..matrix import load_matrix
        matrix = load_matrix()
    if resolve_one is None:
        resolve_one = default_resolver(matrix)
    text = read_text(Path(path), path)
    return parse(load_text(text, path), path, matrix, resolve_one)


def default_resolver(matrix):
    """resolve(spec, gpu) as every SPEC-taking command resolves (the folder's envgen.yaml
    layer included), on the target's GPU when it names one."""
    from ..resolve.request import host, resolve

    def resolve_one(spec: str, gpu: str | None):
        return resolve(matrix, spec, host(matrix, gpu=gpu))
    return resolve_one
