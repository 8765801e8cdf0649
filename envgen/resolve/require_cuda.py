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
# libnvidia-container's grammar (src/cli/dsl.c evaluate_rule): a rule name (any case), the
# longest run of <>=! characters, which must be one of these six ("==" is not one: the
# toolkit refuses it), and a value; brands compare without case, with = and != only.
_OPS = ("=", "!=", "<", "<=", ">", ">=")
_RULES = ("cuda", "driver", "arch", "brand")
_SPLIT = re.compile(r"^([^<>=!]+)([<>=!]+)(.*)$", re.S)
_UINTMAX = 2**64 - 1          # dsl_compare_version reads each part with strtoumax
_EXPR_MAX = 128               # dsl.c: a false clause is formatted into char buf[EXPR_MAX]
# NVIDIA_DISABLE_REQUIRE is read with Go's strconv.ParseBool (nvidia-container-toolkit
# internal/config/image/cuda_image.go HasDisableRequire): these are true, anything else false
_GO_TRUE = ("1", "t", "T", "TRUE", "true", "True")
# GetRequirements passes every NVIDIA_REQUIRE_* but these to nvidia-container-cli
_NOT_A_REQUIREMENT = "NVIDIA_REQUIRE_JETPACK"


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
    assumed: tuple[str, ...] = ()   # rules (brand, arch) taken as met: the host's is unknown


class _Unreadable(Exception):
    """A clause the toolkit answers with "invalid expression"; the text says why."""


def _part(text: str, i: int) -> tuple[int, int]:
    """strtoumax at text[i]: (value, end); digits and dots only reach here."""
    j = i
    while j < len(text) and text[j] != ".":
        j += 1
    if j == i:
        raise _Unreadable("a part of the version is empty")
    digits = text[i:j].lstrip("0")
    # 2**64 - 1 has 20 digits: a longer run overflows without being converted (a 5,000-digit
    # one would pass Python's int() limit); UINTMAX_MAX itself is refused as overflow too
    if len(digits) > 20 or int(digits or "0") >= _UINTMAX:
        raise _Unreadable("a number in the version does not fit in 64 bits")
    return int(digits or "0"), j


def _compare(have: str, op: str, want: str) -> bool:
    """dsl_compare_version: part by part as numbers, stopping at the first that differs (the
    rest is not read), then whatever is left over counts only if it is not all zeros."""
    if want.strip("0123456789."):
        raise _Unreadable(f"{want[:20]!r} is not a version of digits and dots")
    i = k = 0
    while i < len(have) and k < len(want):
        a, i = _part(have, i)
        b, k = _part(want, k)
        if a != b:
            return {"=": False, "!=": True, "<": a < b, "<=": a < b, ">": a > b,
                    ">=": a > b}[op]
        while i < len(have) and have[i] == ".":
            i += 1
        while k < len(want) and want[k] == ".":
            k += 1
    more_a, more_b = bool(have[i:].lstrip(".0")), bool(want[k:].lstrip(".0"))
    if op == "!=":
        return more_a or more_b
    if op in ("=", "<=", ">=") and not more_a and not more_b:
        return True
    if op == "=":
        return False
    if op in ("<", "<="):
        return not more_a and more_b
    return more_a and not more_b


def _holds(cond: str, host: Host, assumed: list[str]) -> bool:
    """One clause, as evaluate_rule and configure.c's four rules judge it."""
    m = _SPLIT.match(cond)
    if not m:
        raise _Unreadable("a clause is a rule, an operator and a value")
    name, op, want = m.group(1), m.group(2), m.group(3)
    rule = name.lower()
    if op not in _OPS:
        raise _Unreadable(f"{op!r} is not one of the toolkit's operators (= != < <= > >=)")
    if not want:
        raise _Unreadable("it has no value")
    if rule not in _RULES:
        raise _Unreadable("a rule is cuda, driver, arch or brand (in any case)")
    # check_device_brand/arch take the clause as met when no GPU is visible (or its brand
    # is unknown). Where the user did not say, the shape is still checked (a visible GPU
    # would read it), and the clause counts as met: no "no" envgen cannot know.
    if rule == "brand":
        if op not in ("=", "!="):
            raise _Unreadable("a brand compares with = or != only")
        if not host.brand:
            assumed.append("brand")
            return True
        ok = (host.brand.lower() == want.lower()) == (op == "=")
    elif rule == "arch" and not host.arch:
        _compare("0", op, want)   # the value's shape only
        assumed.append("arch")
        return True
    else:
        ok = _compare({"cuda": host.cuda, "driver": host.driver, "arch": host.arch}[rule],
                      op, want)
    if not ok and len(name) + len(op) + len(want) + 2 >= _EXPR_MAX:
        raise _Unreadable(f"a false clause of {_EXPR_MAX} characters or more is reported as "
                          f"an invalid expression")
    return ok


def _judge(name: str, value: str, host: Host, assumed: list[str]) -> tuple[bool, str, str]:
    """dsl_evaluate: alternatives split on " ", clauses on ",", empty pieces skipped; in
    order, each alternative's clauses until one is false, stopping at the first alternative
    that holds. A clause is read only when it is reached, so a bad one after a passing
    alternative is never seen. `ret` carries over as in dsl.c: an alternative of commas only
    holds when no alternative came before it. (ok, deciding clause, the first failure)."""
    ret, first_failure, decided = True, "", ""
    for alt in value.split(" "):
        if not alt:
            continue
        done = True
        for cond in alt.split(","):
            if not cond:
                continue
            try:
                ret = _holds(cond, host, assumed)
            except _Unreadable as e:
                raise InputError(f"{name}: the NVIDIA Container Toolkit cannot read "
                                 f"{cond[:60]!r} ({e}); e.g. cuda>=12.1 or "
                                 f"brand=tesla,driver>=535,driver<536") from None
            if not ret:
                first_failure = first_failure or cond
                done = False
                break
        if done:
            decided = alt
            break
    return ret, decided, first_failure


def evaluate(env: dict[str, str], host: Host) -> Decision:
    """Would the toolkit start a container with these environment variables on `host`?
    Every NVIDIA_REQUIRE_* (NVIDIA_REQUIRE_JETPACK* aside) must hold. The toolkit reads them
    in Go's map order, which is random; here in name order."""
    if env.get("NVIDIA_DISABLE_REQUIRE") in _GO_TRUE:
        return Decision(True, "NVIDIA_DISABLE_REQUIRE", "requirements are disabled")
    names = sorted(k for k in env if k.startswith("NVIDIA_REQUIRE_")
                   and not k.startswith(_NOT_A_REQUIREMENT))
    if not names:
        return Decision(True, "", "no NVIDIA_REQUIRE_* variable: nothing to check")
    ok_clause, assumed = "", []
    for name in names:
        ok, decided, failure = _judge(name, env[name], host, assumed)
        if not ok:   # a definite no: an unknown brand or arch was already taken as met
            return Decision(False, f"{name}: {failure}",
                            f"{name}={env[name]!r}: no alternative holds for driver "
                            f"{host.driver} (CUDA {host.cuda}"
                            + (f", brand {host.brand}" if host.brand else "")
                            + (f", arch {host.arch}" if host.arch else "")
                            + f"); the first fails on {failure}")
        if decided:
            ok_clause = ",".join(c for c in decided.split(",") if c) or decided
    unknown = tuple(dict.fromkeys(assumed))
    if not ok_clause:
        return Decision(True, "", "the requirement is empty: nothing to check", unknown)
    note = "".join(f"; the {rule} is unknown: its clause is taken as met, as the toolkit "
                   f"takes it when it sees no GPU" for rule in unknown)
    if not ok_clause.strip(","):
        return Decision(True, ok_clause, f"the alternative {ok_clause!r} has no clause, and "
                                         f"the toolkit takes it as met{note}", unknown)
    return Decision(True, ok_clause, f"satisfied by {ok_clause}{note}", unknown)


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
