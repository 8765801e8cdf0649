"""What changes between two matrices, two drivers, or for a fleet of hosts. Pure decisions:
the caller passes loaded matrices and fleet documents; nothing here reads or prints."""
from __future__ import annotations

from dataclasses import dataclass

from .core.errors import EnvgenError, InputError, MatrixError, shown
from .core.model import Gpu, Stack, V
from .matrix import Matrix
from .resolve.compat import (
    DRIVER_RE,
    FORWARD,
    MINOR,
    NATIVE,
    check_driver,
    driver_runs,
    kernels_for,
)
from .resolve.spec import parse_spec
from .resolve.stack import Host, resolve

CAVEATS = {
    MINOR: "minor-version compatibility: PTX JIT fails on this older driver, so the build "
           "must carry kernels (SASS) for the GPU",
    FORWARD: "forward compatibility: data-center (and some workstation) GPUs only, and the "
             "image must carry cuda-compat",
    "ptx": "PTX is JIT-compiled at first start (slow first run)",
}
SKIP_FIELDS = {"reasons", "matrix_sha256", "packages"}


def parse_driver_range(text: str) -> tuple[str, str]:
    old, sep, new = (text or "").partition("..")
    if not sep:
        raise InputError(f"--driver {shown(text)} must be OLD..NEW, e.g. 535.274.02..580.95.05")
    old, new = check_driver(old, "--driver OLD"), check_driver(new, "--driver NEW")
    bare = next((x for x in (old, new) if "." not in x), None)
    if bare is not None:   # R525's first release runs no CUDA 12, its latest does
        raise InputError(f"--driver {shown(text)}: {bare} is a branch, and what runs depends "
                         f"on the release; give releases, e.g. 525.147.05..535.274.02")
    return old, new


def branch(driver: str) -> str:
    return "R" + driver.split(".")[0]


# ---- one stack on one driver ---------------------------------------------------------------

def resolve_all(m: Matrix) -> dict[str, Stack | str]:
    """Every stack name resolved with the default host, or the reason it does not resolve."""
    out: dict[str, Stack | str] = {}
    for name in m.stack_names():
        try:
            out[name] = resolve(m, parse_spec(name, m), Host())
        except EnvgenError as e:
            out[name] = e.message
    return out


def verdict(m: Matrix, stack: Stack, driver: str, gpu: Gpu | None = None,
            cc: str | None = None) -> dict:
    """Whether `driver` (and the GPU, when known) runs `stack`, how, and the caveat."""
    if not stack.cuda:
        return {"runs": True, "how": "cpu", "why": "a CPU build needs no driver",
                "caveat": None}
    cuda = m.cuda_release(stack.cuda_release or "")
    if cuda is None:
        return {"runs": False, "how": None, "caveat": None,
                "why": f"CUDA {stack.cuda_release} is not in this matrix"}
    # forward compatibility needs cuda-compat in this image: in the stack's own base
    own = _has_compat(stack.base, cuda.short)
    v = _judge(m, stack, cuda, driver, gpu, cc, own)
    if not v["runs"] and not own and any(_has_compat(b, cuda.short) for b in m.bases) \
            and _judge(m, stack, cuda, driver, gpu, cc, True)["runs"]:
        # only forward compatibility differs, and it needs a GPU: `gpu` is set
        v["why"] += (f"; {stack.base.name}, this image's base, has none: rebuilt on a base "
                     f"that has (`envgen build {stack.stack} --driver {driver} --gpu "
                     f"{gpu.name}` picks one), it would run")
        v["rebuilt"] = FORWARD   # how it would run, rebuilt so
    return v


def _has_compat(base, cuda: str) -> bool:
    return bool(base.cuda_compat and base.cuda and V(base.cuda) >= V(cuda))


def _judge(m: Matrix, stack: Stack, cuda, driver: str, gpu: Gpu | None, cc: str | None,
           compat: bool) -> dict:
    d = driver_runs(m, cuda, driver, gpu, compat_available=compat)
    if not d.ok:
        return {"runs": False, "how": None, "why": d.why, "caveat": None}
    cc = cc or (gpu.cc if gpu else None)
    how, why = d.how, d.why
    if cc:
        k = kernels_for(stack.as_variant(), cc, d.how)
        if not k.ok:
            return {"runs": False, "how": None, "why": k.why, "caveat": None}
        why = f"{why}; {k.why}"
        if k.how == "ptx" and how == NATIVE:
            how = "ptx"
    return {"runs": True, "how": how, "why": why, "caveat": CAVEATS.get(how)}


# From the strongest way of running to the weakest: a host is as weak as its weakest GPU.
STRENGTH = ("cpu", NATIVE, "ptx", MINOR, FORWARD)


def host_verdict(judged: list[tuple[str | None, dict]]) -> dict:
    """A host runs a stack when every kind of GPU in it does: from (GPU name, verdict) per
    kind, the first that does not run it, else the weakest way one runs it (its caveat,
    PTX JIT on one kind, holds for the host), its GPU named when the host has more than one
    kind."""
    bad = next(((name, v) for name, v in judged if not v["runs"]), None)
    name, v = bad or max(judged, key=lambda j: STRENGTH.index(j[1]["how"]))
    return v | {"why": f"{name}: {v['why']}" if name and len(judged) > 1 else v["why"]}


def _host_verdict(m, stack, driver, gpus: tuple[Gpu, ...]) -> dict:
    """A host runs a stack when every kind of GPU in it does."""
    kinds = list(dict.fromkeys(gpus)) or [None]
    return host_verdict([(g.name if g else None, verdict(m, stack, driver, g))
                         for g in kinds])


def cert_runs(m, cert: dict, driver: str, gpus) -> bool:
    """Whether the certificate's own stack runs under `driver` on every kind of GPU in
    `gpus` (the matrix's GPUs, None for one it does not know): a pass on driver 525.147.05
    does not speak for 525.60.11, which runs no CUDA 12 at all."""
    from .core.model import Stack
    try:
        stack = Stack.from_json(cert["stack"])
    except (KeyError, TypeError, ValueError, AttributeError):
        return False
    return _host_verdict(m, stack, driver, tuple(gpus))["runs"]


def _compare(stacks: dict, old_of, new_of) -> dict:
    rows, start, stop, how = {}, [], [], []
    for name, st in stacks.items():
        if isinstance(st, str):
            rows[name] = {"error": st}
            continue
        o, n = old_of(st), new_of(st)
        rows[name] = {"old": o, "new": n}
        if n["runs"] and not o["runs"]:
            start.append(name)
        elif o["runs"] and not n["runs"]:
            stop.append(name)
        elif o["runs"] and o["how"] != n["how"]:
            how.append({"stack": name, "old": o["how"], "new": n["how"]})
    return {"stacks": rows, "start_working": start, "stop_working": stop, "changed_how": how}


def _summary(old: str, new: str, where: str, cmp: dict) -> str:
    start, stop = cmp["start_working"], cmp["stop_working"]
    text = (f"{branch(old)} → {branch(new)} on {where}: "
            f"{', '.join(start) or 'none'} start{'s' if len(start) == 1 else ''} working; "
            f"{', '.join(stop) or 'none'} stop{'s' if len(stop) == 1 else ''}")
    moves: dict[tuple, list] = {}
    for c in cmp["changed_how"]:
        moves.setdefault((c["old"], c["new"]), []).append(c["stack"])
    for (a, b), names in moves.items():
        text += f"; {', '.join(names)} go{'es' if len(names) == 1 else ''} from {a} to {b}"
    return text


def driver_diff(m: Matrix, old: str, new: str, gpu: Gpu | None = None,
                stacks: dict | None = None) -> dict:
    stacks = resolve_all(m) if stacks is None else stacks
    cmp = _compare(stacks, lambda s: verdict(m, s, old, gpu), lambda s: verdict(m, s, new, gpu))
    where = gpu.name if gpu else "an unnamed GPU (no forward compatibility, no kernel check)"
    return {"old_driver": old, "new_driver": new, "gpu": gpu.name if gpu else None, **cmp,
            "summary": _summary(old, new, where, cmp)}


# ---- fleets --------------------------------------------------------------------------------

@dataclass(frozen=True)
class FleetHost:
    name: str
    driver: str
    gpus: tuple[Gpu, ...]
    line: int = 0


# The hosts file's form (`envgen diff --hosts`, `report --hosts`, examples/fleet.yaml) as
# JSON Schema, checked through the matrix's machinery (matrix/forms.py) with file:line. Not
# the fleet spec of `envgen fleet` (stacks x targets: fleet/spec.py). What a schema cannot
# say stays in parse_hosts: a host listed twice, a GPU the matrix must know.
HOSTS_FILE = {
    "type": "object", "required": ["hosts"], "additionalProperties": False,
    "message": "a hosts file must be a mapping with a list `hosts:` (a fleet spec, `stacks:` "
               "and `targets:`, is what `envgen fleet` reads)",
    "properties": {"hosts": {
        "type": "array", "maxItems": 10_000,
        "message": "a hosts file must be a mapping with a list `hosts:` of at most 10,000",
        "items": {
            "type": "object", "required": ["name", "driver", "gpus"],
            "additionalProperties": False,
            "message": "a host must be a mapping with name, driver, gpus",
            "properties": {
                "name": {"type": "string", "minLength": 1, "maxLength": 200,
                         "message": "a host needs a `name:` string"},
                "driver": {"type": "string", "pattern": f"^(?:{DRIVER_RE.pattern})$",
                           "message": "driver {value} is not a version like 535.104.05"},
                "gpus": {"type": "array", "minItems": 1, "maxItems": 1024,
                         "message": "`gpus:` must be a list of 1 to 1,024 GPU names",
                         "items": {"type": "string", "maxLength": 200,
                                   "message": "{value} is not a GPU name"}}}}}},
}


def parse_hosts(doc, file: str, m: Matrix) -> list[FleetHost]:
    """Validate a hosts file (from matrix.yamlfile.load_file): its form against HOSTS_FILE,
    then the names and GPUs; every problem is named with its file:line, together."""
    from .matrix.forms import problems as form_problems
    from .matrix.schema import line_of
    if isinstance(doc, dict) and "hosts" not in doc and ("stacks" in doc or "targets" in doc):
        raise InputError("this is a fleet spec (`stacks:` and `targets:`), which `envgen "
                         "fleet` reads; --hosts takes a hosts file with a list `hosts:` "
                         "(examples/fleet.yaml)", file=file, line=1)
    problems = form_problems(doc, HOSTS_FILE)
    if not isinstance(doc, dict) or not isinstance(doc.get("hosts"), list):
        raise InputError(problems[0][1], file=file, line=problems[0][0] or 1)
    hosts: list[FleetHost] = []
    seen: dict[str, int] = {}
    for i, h in enumerate(doc["hosts"]):
        if not isinstance(h, dict):
            continue
        name, gpus = h.get("name"), h.get("gpus")
        if isinstance(name, str) and name in seen:
            problems.append((line_of(doc, ["hosts", i, "name"]), (
                f"host {name!r} is listed twice (first on line {seen[name]})")))
        elif isinstance(name, str):
            seen[name] = line_of(doc, ["hosts", i, "name"])
        found = [m.gpu(g) for g in gpus if isinstance(g, str)] \
            if isinstance(gpus, list) else []
        for j, g in enumerate(gpus if isinstance(gpus, list) else []):
            if isinstance(g, str) and m.gpu(g) is None:
                problems.append((line_of(doc, ["hosts", i, "gpus", j]), (
                    f"host {name!r}: {g!r} is not a GPU in the matrix (see `envgen matrix "
                    f"show gpus`)")))
        hosts.append(FleetHost(name, h.get("driver"), tuple(found),
                               line_of(doc, ["hosts", i]) or 0))
    if problems:   # the same error type as a bad matrix file: each problem at file:line
        problems.sort(key=lambda p: p[0] or 0)
        raise MatrixError([MatrixError(message=msg, file=file, line=line)
                           for line, msg in problems])
    return hosts


parse_fleet = parse_hosts   # the name it had while both files were called "fleet"


def fleet_report(m: Matrix, hosts: list[FleetHost], drivers: tuple[str, str] | None = None,
                 stacks: dict | None = None, certs: list[dict] | None = None,
                 runs: dict | None = None) -> dict:
    """Per host, which stacks run. With drivers=(OLD, NEW), hosts on OLD's branch move to
    NEW and the report says what starts and stops working on each. With the store's
    certificates (certs.load_all()), per host which stacks are certified on its GPUs and
    driver branch, and the store's whole matrix of stack x GPU/driver (`runs`:
    certs.runs_by_key)."""
    from .certs.view import certified_matrix, on_host
    stacks = resolve_all(m) if stacks is None else stacks
    out = []
    for h in hosts:
        names = list(dict.fromkeys(g.name for g in h.gpus))
        row = {"name": h.name, "driver": h.driver, "branch": branch(h.driver),
               "gpus": [g.name for g in h.gpus]}
        moves = drivers is not None and branch(h.driver) == branch(drivers[0])
        if moves:
            cmp = _compare(stacks, lambda s, h=h: _host_verdict(m, s, h.driver, h.gpus),
                           lambda s, h=h: _host_verdict(m, s, drivers[1], h.gpus))
            row |= {"moves_to": drivers[1], **cmp,
                    "summary": _summary(h.driver, drivers[1], "/".join(names), cmp)}
            row["runs"] = [n for n, r in cmp["stacks"].items() if r.get("new", {}).get("runs")]
        else:
            rows = {n: ({"error": s} if isinstance(s, str)
                        else {"now": _host_verdict(m, s, h.driver, h.gpus)})
                    for n, s in stacks.items()}
            row |= {"moves_to": None, "stacks": rows, "start_working": [],
                    "stop_working": [],
                    "runs": [n for n, r in rows.items() if r.get("now", {}).get("runs")]}
        if certs is not None:
            row["certified"] = on_host(certs, h.gpus, h.driver, m.gpu, runs=lambda c, h=h:
                                       cert_runs(m, c, h.driver, h.gpus))
        out.append(row)
    report = {"drivers": list(drivers) if drivers else None, "hosts": out}
    if certs is not None:
        report["certified"] = certified_matrix(certs, runs)
    return report


# ---- two matrices --------------------------------------------------------------------------

def _flatten(d: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out |= _flatten(v, key + ".")
        else:
            out[key] = v
    return out


def stack_changes(old: Stack, new: Stack) -> dict:
    a = _flatten({k: v for k, v in old.to_json().items() if k not in SKIP_FIELDS})
    b = _flatten({k: v for k, v in new.to_json().items() if k not in SKIP_FIELDS})
    fields = [{"field": k, "old": a.get(k), "new": b.get(k)}
              for k in sorted(a.keys() | b.keys()) if a.get(k) != b.get(k)]
    po, pn = dict(old.packages), dict(new.packages)
    packages = {"added": {n: pn[n] for n in sorted(pn.keys() - po.keys())},
                "removed": {n: po[n] for n in sorted(po.keys() - pn.keys())},
                "changed": {n: [po[n], pn[n]] for n in sorted(po.keys() & pn.keys())
                            if po[n] != pn[n]}}
    return {"fields": fields, "packages": packages}


# The tables that say which driver runs which CUDA on which GPU: a change there changes
# what runs where though no stack's own fields move (table, each row's identity, the facts
# compared: None for all). Of a base, only what forward compatibility reads: its other
# facts reach a stack as the stack's own fields.
COMPAT_TABLES = (("drivers", "branch", None), ("cuda_majors", "major", None),
                 ("cuda", "version", None), ("forward_compat", "cuda", None),
                 ("gpus", "name", None), ("architectures", "arch", None),
                 ("bases", "name", ("cuda", "cuda_compat")))
_PROVENANCE = {"source", "file", "line", "confidence", "why"}


def _facts(row, only=None) -> dict:
    from .core.record import fields
    return {f.name: getattr(row, f.name) for f in fields(row)
            if f.name not in _PROVENANCE and not f.name.endswith(("_source", "_why"))
            and (only is None or f.name in only)}


def compat_changes(old: Matrix, new: Matrix) -> list[dict]:
    """Every fact of the compatibility tables that differs: {table, key, field, old, new};
    a row added or removed is field `row`."""
    out = []
    for table, key, only in COMPAT_TABLES:
        a = {str(getattr(r, key)): _facts(r, only) for r in getattr(old, table)}
        b = {str(getattr(r, key)): _facts(r, only) for r in getattr(new, table)}
        for k in sorted(a.keys() | b.keys()):
            if k not in a or k not in b:
                out.append({"table": table, "key": k, "field": "row",
                            "old": "present" if k in a else None,
                            "new": "present" if k in b else None})
                continue
            for f in sorted(a[k]):
                x, y = a[k][f], b[k].get(f)
                if x != y:
                    out.append({"table": table, "key": k, "field": f,
                                "old": list(x) if isinstance(x, tuple) else x,
                                "new": list(y) if isinstance(y, tuple) else y})
    return out


def _affected(stack: Stack, changes: list[dict]) -> list[str]:
    """Which of `changes` bear on this stack: its CUDA release, its CUDA major's floor, its
    CUDA minor's forward compatibility (a GPU's, an architecture's, a driver branch's or a
    base's row bears on every CUDA stack alike: listed once, in the tables' changes, not
    under every stack; the stack's own base is among its fields)."""
    if not stack.cuda:
        return []
    release = stack.cuda_release or ""
    minor = ".".join(release.split(".")[:2])
    major = release.split(".")[0]
    return [f"{c['table']} {c['key']}: {c['field']}" for c in changes
            if (c["table"], c["key"]) in {("cuda", release), ("forward_compat", minor),
                                          ("cuda_majors", major)}]


def matrix_diff(old: Matrix, new: Matrix) -> dict:
    a, b = resolve_all(old), resolve_all(new)
    compat = compat_changes(old, new)
    changed, unchanged = [], []
    for name in sorted(a.keys() & b.keys()):
        o, n = a[name], b[name]
        if isinstance(o, str) or isinstance(n, str):
            if isinstance(o, str) and isinstance(n, str):
                unchanged.append(name)
                continue
            changed.append({"stack": name, "fields": [{
                "field": "resolves", "old": o if isinstance(o, str) else True,
                "new": n if isinstance(n, str) else True}],
                "packages": {"added": {}, "removed": {}, "changed": {}},
                "compatibility": _affected(n if isinstance(o, str) else o, compat)})
            continue
        ch = stack_changes(o, n)
        because = _affected(n, compat)
        if ch["fields"] or any(ch["packages"].values()) or because:
            changed.append({"stack": name, **ch, "compatibility": because})
        else:
            unchanged.append(name)
    return {"old_sha256": old.sha256, "new_sha256": new.sha256,
            "added": sorted(b.keys() - a.keys()), "removed": sorted(a.keys() - b.keys()),
            "changed": changed, "unchanged": unchanged, "compatibility": compat}
