"""NVIDIA_REQUIRE_CUDA: make the string for a stack; parse and judge one against a host with
the NVIDIA Container Toolkit's rules (space-separated constraints OR, comma-separated AND,
every NVIDIA_REQUIRE_* variable AND, NVIDIA_DISABLE_REQUIRE skips them all)."""
from __future__ import annotations

import re

from ..core.errors import InputError
from ..core.record import dataclass
from ..matrix import Matrix
from .compat import gpu_knows

# The toolkit's brand names for each GPU class (libnvidia-container's brand strings).
BRANDS = {"datacenter": ("tesla", "unknown", "nvidia"),
          "workstation": ("nvidiartx", "quadro", "quadrortx")}
# libnvidia-container's grammar (src/cli/dsl.c): a rule name (any case), the longest run of
# <>=! characters, which must be one of these six ("==" is not one: the toolkit refuses
# it), and a value; versions hold only digits and dots and compare as numbers component by
# component, trailing zeros ignored; brands compare without case, with = and != only.
_OPS = ("=", "!=", "<", "<=", ">", ">=")
_RULES = ("cuda", "driver", "arch", "brand")
_SPLIT = re.compile(r"^([^<>=!]+)([<>=!]+)(.*)$", re.S)
_VERSION = re.compile(r"[0-9]+(?:\.+[0-9]+)*\.*")


def make(cuda_major: int, forward_branches: tuple[str, ...] = (),
         gpu_classes: tuple[str, ...] = ()) -> str:
    """The requirement for a build of CUDA `cuda_major`.x run with minor-version compatibility,
    plus one alternative per forward-compatible driver branch and brand."""
    parts = [f"cuda>={cuda_major}.0"]
    for branch in forward_branches:
        for cls in gpu_classes:
            for brand in BRANDS.get(cls, ()):
                parts.append(f"brand={brand},driver>={branch},driver<{int(branch) + 1}")
    return " ".join(parts)


@dataclass(frozen=True)
class Host:
    driver: str
    cuda: str
    brand: str | None = None
    arch: str | None = None


@dataclass(frozen=True)
class Decision:
    ok: bool
    clause: str        # the constraint (or variable) that decided
    why: str


def _condition(cond: str, where: str) -> tuple[str, str, str]:
    m = _SPLIT.match(cond)
    name, op, value = (m.group(1).lower(), m.group(2), m.group(3)) if m else ("", "", "")
    why = None
    if not m or name not in _RULES:
        why = "a rule is cuda, driver, arch or brand (in any case)"
    elif op not in _OPS:
        why = f"{op!r} is not one of the toolkit's operators (= != < <= > >=)"
    elif not value:
        why = "it has no value"
    elif name == "brand" and op not in ("=", "!="):
        why = "a brand compares with = or != only"
    elif name != "brand" and not _VERSION.fullmatch(value):
        why = f"{value[:20]!r} is not a version of digits and dots"
    if why:
        raise InputError(f"{where}: the NVIDIA Container Toolkit cannot read {cond[:60]!r} "
                         f"({why}); e.g. cuda>=12.1 or brand=tesla,driver>=535,driver<536")
    return name, op, value


def _parse(value: str, where: str) -> list[list[tuple[str, str, str]]]:
    """Alternatives (space-separated, OR) of conditions (comma-separated, AND); empty
    pieces are skipped, as the toolkit skips them."""
    return [[_condition(c, where) for c in alt.split(",") if c]
            for alt in value.split(" ") if alt and any(alt.split(","))]


def _numbers(text: str) -> tuple[int, ...]:
    parts = [int(p) for p in text.split(".") if p]
    while parts and parts[-1] == 0:   # 12.0 == 12, as the toolkit compares
        parts.pop()
    return tuple(parts)


def _compare(have: str, op: str, want: str) -> bool:
    a, b = _numbers(have), _numbers(want)
    return {"=": a == b, "!=": a != b, ">=": a >= b, "<=": a <= b, ">": a > b,
            "<": a < b}[op]


def _holds(cond: tuple[str, str, str], host: Host) -> bool:
    key, op, want = cond
    if key == "brand":
        if host.brand is None:
            return False
        same = host.brand.lower() == want.lower()
        return same if op in ("=", "==") else (not same if op == "!=" else False)
    have = {"cuda": host.cuda, "driver": host.driver, "arch": host.arch}[key]
    return have is not None and _compare(have, op, want)


def evaluate(env: dict[str, str], host: Host) -> Decision:
    """Would the toolkit start a container with these environment variables on `host`?"""
    if env.get("NVIDIA_DISABLE_REQUIRE", "").lower() in ("1", "true", "yes", "on"):
        return Decision(True, "NVIDIA_DISABLE_REQUIRE", "requirements are disabled")
    names = sorted(k for k in env if k.startswith("NVIDIA_REQUIRE_"))
    if not names:
        return Decision(True, "", "no NVIDIA_REQUIRE_* variable: nothing to check")
    ok_clause = ""
    for name in names:
        alternatives = _parse(env[name], name)
        if not alternatives:
            continue
        passing = next((alt for alt in alternatives if all(_holds(c, host) for c in alt)),
                       None)
        if passing is None:
            failing = alternatives[0]
            bad = next(c for c in failing if not _holds(c, host))
            clause = "".join(bad)
            return Decision(False, f"{name}: {clause}",
                            f"{name}={env[name]!r}: no alternative holds for driver "
                            f"{host.driver} (CUDA {host.cuda}"
                            + (f", brand {host.brand}" if host.brand else "")
                            + (f", arch {host.arch}" if host.arch else "")
                            + f"); the first fails on {clause}")
        ok_clause = ",".join("".join(c) for c in passing)
    if not ok_clause:
        return Decision(True, "", "the requirement is empty: nothing to check")
    return Decision(True, ok_clause, f"satisfied by {ok_clause}")


def gpu_host(matrix: Matrix, gpu_name: str, driver: str, cuda: str,
             brand: str | None = None, arch: str | None = None) -> tuple[Host, Decision | None]:
    """The host with a named GPU's facts: its brand and compute capability where --brand and
    --arch do not say, and, when the driver cannot run the GPU at all (older than its first
    driver, past its last branch), that refusal, whatever the requirement says."""
    gpu = matrix.gpu(gpu_name)
    if gpu is None:
        raise InputError(f"--gpu {gpu_name!r} is not a GPU in the matrix (see `envgen matrix "
                         f"show gpus`)")
    host = Host(driver=driver, cuda=cuda, brand=brand or gpu.brand, arch=arch or gpu.cc)
    known = gpu_knows(matrix, gpu, driver)
    return host, None if known.ok else Decision(False, f"--gpu {gpu.name}", known.why)
