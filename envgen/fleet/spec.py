"""The fleet file (fleet.yaml): the stacks to certify and the GPU targets to certify them
on, read with line marks; every bad value is refused with `fleet.yaml:LINE` (exit 2)."""
from __future__ import annotations

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
TIME = re.compile(r"(?:(\d{1,3})h)?(?:(\d{1,5})m)?(?:(\d{1,6})s)?")
LEVELS = ("cuda", "cpu")
MAX_SECONDS = 7 * 86400
TARGET_KEYS = {"name", "partition", "gpu_product", "gpus", "time", "level", "steps"}
STACK_KEYS = {"spec", "image", "sif"}
# a SIF on the cluster's shared file system, for the apptainer engine: a plain absolute path
SIF_PATH = re.compile(r"/(?!.*(?:^|/)\.\.(?:/|$))[A-Za-z0-9_./+-]{1,400}\.sif")


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


def parse_seconds(value) -> int | None:
    """'30m', '2h', '1h30m', '90s' or a number of minutes -> seconds; None when not one."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value * 60 if 0 < value * 60 <= MAX_SECONDS else None
    if not isinstance(value, str) or not value or len(value) > 20:
        return None
    m = TIME.fullmatch(value)
    if not m or not any(m.groups()):
        return None
    h, mi, s = (int(x) if x else 0 for x in m.groups())
    total = h * 3600 + mi * 60 + s
    return total if 0 < total <= MAX_SECONDS else None


def _target(t, at, problems, products, seen) -> Target | None:
    def bad(key, msg):
        problems.append((_line(t, key, at), msg))

    for extra in sorted(set(t) - TARGET_KEYS):
        bad(extra, f"unknown key {shown(extra)} (a target has {', '.join(sorted(TARGET_KEYS))})")
    name = t.get("name")
    ok = True
    if not isinstance(name, str) or not NAME.fullmatch(name):
        bad("name", f"target name {shown(name)} must be 1 to 32 of a-z, 0-9 and '-', not "
                    f"starting or ending with '-'")
        return None
    if name in seen:
        bad("name", f"target {name!r} is listed twice (first on line {seen[name]})")
        ok = False
    seen.setdefault(name, _line(t, "name", at))
    part = t.get("partition")
    if part is not None and (not isinstance(part, str) or not PARTITION.fullmatch(part)):
        bad("partition", f"target {name!r}: partition {shown(part)} is not a Slurm partition "
                         f"name (letters, digits, _ . -, not starting with '-')")
        ok = False
    product, gpu = t.get("gpu_product"), None
    if product is not None:
        base = product.removesuffix("-SHARED") if isinstance(product, str) else None
        gpu = products.get(base) if base else None
        if gpu is None:
            import difflib
            near = difflib.get_close_matches(str(product), sorted(products), n=5, cutoff=0.4)
            bad("gpu_product", f"target {name!r}: gpu_product {shown(product)} is not a GPU "
                               f"the matrix knows by its nvidia.com/gpu.product label "
                               f"(nearest: {', '.join(near) or 'none'}; {len(products)} known: "
                               f"each nvidia-smi name of `envgen matrix show gpus` with its "
                               f"spaces as '-', e.g. NVIDIA-H100-80GB-HBM3)")
            ok = False
    level = t.get("level", "cuda")
    if level not in LEVELS:
        bad("level", f"target {name!r}: level {shown(level)} must be cuda or cpu")
        ok = False
    gpus = t.get("gpus", 1 if level == "cuda" else 0)
    if isinstance(gpus, bool) or not isinstance(gpus, int) or not 0 <= gpus <= 64:
        bad("gpus", f"target {name!r}: gpus {shown(gpus)} must be a whole number from 0 to 64")
        ok = False
    elif level == "cuda" and gpus == 0:
        bad("gpus", f"target {name!r}: level cuda needs at least one GPU (gpus: 1)")
        ok = False
    seconds = parse_seconds(t.get("time", "30m"))
    if seconds is None:
        bad("time", f"target {name!r}: time {shown(t.get('time'))} is not a duration like "
                    f"30m, 2h, 1h30m or 90s (at most 7 days)")
        ok = False
    steps = t.get("steps")
    if steps is not None and (isinstance(steps, bool) or not isinstance(steps, int)
                              or not 1 <= steps <= 1_000_000):
        bad("steps", f"target {name!r}: steps {shown(steps)} must be a whole number from 1 "
                     f"to 1000000")
        ok = False
    if not ok:
        return None
    return Target(name, part, product, gpu.name if gpu else None, gpus, seconds, level, steps,
                  _line(t, "name", at) or 0, _line(t, "partition", at) or 0)


def _stack(s, at, problems) -> FleetStack | None:
    from ..core.image import parse_image_ref
    if isinstance(s, dict):
        for extra in sorted(set(s) - STACK_KEYS):
            problems.append((_line(s, extra, at), f"unknown key {shown(extra)} (a stack is a "
                                                  f"name or spec, or has spec and image)"))
        spec, image, sif = s.get("spec"), s.get("image"), s.get("sif")
        where = _line(s, "spec", at)
    else:
        spec, image, sif, where = s, None, None, at
    if sif is not None and not (isinstance(sif, str) and SIF_PATH.fullmatch(sif)):
        problems.append((_line(s, "sif", at), f"sif {shown(sif)} is not an absolute path to a "
                                              f".sif file (letters, digits and _ . / + -)"))
        return None
    if not isinstance(spec, str) or not SPEC_CHARS.fullmatch(spec):
        problems.append((where, f"stack {shown(spec)} is not a stack name or spec (letters, "
                                f"digits and , = < > ! ~ * + . _ -, not starting with '-'; "
                                f"no spaces, quotes or $)"))
        return None
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
    """Validate a fleet document (from matrix.yamlfile.load_text). `resolve_one(spec,
    gpu_name)` resolves a stack as envgen does everywhere (its errors name the spec)."""
    problems: list[tuple[int | None, str]] = []
    if not isinstance(doc, dict):
        raise InputError("a fleet file must be a mapping with `stacks:` and `targets:`",
                         file=file, line=_line(doc, None, 1))
    for extra in sorted(set(doc) - {"stacks", "targets"}):
        problems.append((_line(doc, extra), f"unknown key {shown(extra)} (a fleet file has "
                                            f"stacks and targets)"))
    for key in ("stacks", "targets"):
        if not isinstance(doc.get(key), list) or not doc[key]:
            problems.append((_line(doc, key, 1), f"`{key}:` must be a non-empty list"))
    stacks: list[FleetStack] = []
    targets: list[Target] = []
    products = known_products(matrix)
    if isinstance(doc.get("stacks"), list):
        lines = getattr(doc["stacks"], "lines", [])
        for i, s in enumerate(doc["stacks"]):
            got = _stack(s, lines[i] if i < len(lines) else None, problems)
            if got is not None:
                if any(o.spec == got.spec and o.image == got.image for o in stacks):
                    problems.append((got.line, f"stack {got.spec!r} is listed twice"))
                stacks.append(got)
    if isinstance(doc.get("targets"), list):
        lines = getattr(doc["targets"], "lines", [])
        seen: dict[str, int] = {}
        for i, t in enumerate(doc["targets"]):
            at = lines[i] if i < len(lines) else None
            if not isinstance(t, dict):
                problems.append((at, f"targets[{i}] must be a mapping with a name"))
                continue
            got = _target(t, at, problems, products, seen)
            if got is not None:
                targets.append(got)
    _raise(problems, file)
    resolved = {}
    for i, s in enumerate(stacks):
        for t in targets:
            on = f" on target {t.name!r} ({t.gpu})" if t.gpu and t.level == "cuda" else ""
            try:
                st = resolve_one(s.spec, t.gpu if t.level == "cuda" else None)
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


def _raise(problems, file) -> None:
    if problems:
        problems.sort(key=lambda p: p[0] or 0)
        raise MatrixError([MatrixError(message=msg, file=file, line=line)
                           for line, msg in problems])


def load(path: str, matrix=None, resolve_one=None) -> Fleet:
    """Read and validate a fleet file; stacks resolve through envgen's resolver."""
    from ..matrix.yamlfile import load_text, read_text
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
