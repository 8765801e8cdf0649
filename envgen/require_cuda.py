"""NVIDIA_REQUIRE_CUDA: make the string for a stack; parse and judge one against a host with
the NVIDIA Container Toolkit's rules (space-separated constraints OR, comma-separated AND,
every NVIDIA_REQUIRE_* variable AND, NVIDIA_DISABLE_REQUIRE skips them all)."""
from __future__ import annotations

import re
from dataclasses import dataclass

from packaging.version import InvalidVersion

from .errors import InputError
from .model import V

# The toolkit's brand names for each GPU class (libnvidia-container's brand strings).
BRANDS = {"datacenter": ("tesla", "unknown", "nvidia"),
          "workstation": ("nvidiartx", "quadro", "quadrortx")}
_OPS = ("==", ">=", "<=", "!=", "=", ">", "<")
_CONDITION = re.compile(r"^(cuda|driver|arch|brand)(==|>=|<=|!=|=|>|<)([A-Za-z0-9.]+)$")


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


def _parse(value: str, where: str) -> list[list[tuple[str, str, str]]]:
    alternatives = []
    for alt in value.split():
        conds = []
        for cond in alt.split(","):
            m = _CONDITION.match(cond)
            if not m:
                raise InputError(f"{where}: cannot read constraint {cond!r} (expected e.g. "
                                 f"cuda>=12.1 or brand=tesla,driver>=535,driver<536)")
            conds.append(m.groups())
        alternatives.append(conds)
    return alternatives


def _compare(have: str, op: str, want: str) -> bool:
    try:
        a, b = V(have), V(want)
    except InvalidVersion:
        a, b = have, want
    return {"=": a == b, "==": a == b, "!=": a != b, ">=": a >= b, "<=": a <= b,
            ">": a > b, "<": a < b}[op]


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
