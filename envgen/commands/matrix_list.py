"""`envgen matrix list`: every stack the matrix offers, resolved for the host flags given
(named for their platform: `--platform linux/arm64` lists the `-arm64` names),
and whether its closure ships with envgen (then it renders with no index at all and builds
from PyPI's files alone; the others resolve theirs from their index on first use)."""
from __future__ import annotations

from ..core.errors import Unsatisfiable
from ..core.model import DEFAULT_PLATFORM, platform_suffix
from ._common import host_for, load_matrix_for, out_json, table


def bundled(stack) -> bool:
    """Whether envgen ships the closure of exactly this stack."""
    from ..resolve.closure import find
    found = find(stack)
    return found is not None and found[1].startswith("bundled closure")


def rows(args) -> list[dict]:
    from ..resolve.spec import parse_spec
    from ..resolve.stack import resolve
    m = load_matrix_for(args)
    host = host_for(args, m)
    # the names a platform's stacks go by (pytorch-cpu-arm64), as resolve names them
    platform = host.platform or (host.gpu.platform if host.gpu else "") or DEFAULT_PLATFORM
    suffix = platform_suffix(platform)
    out = []
    for name in m.stack_names():   # the plain stacks: a project file has no say here
        try:
            st = resolve(m, parse_spec(name, m), host)
        except Unsatisfiable as e:
            out.append({"stack": name + suffix, "error": e.message})
            continue
        out.append({"stack": st.stack, "version": st.version, "python": st.python,
                    "cuda": st.cuda, "source": st.wheel_source,
                    "driver_minimum": st.driver_minimum, "base": st.base.name,
                    "closure_bundled": bundled(st)})
    return out


def run(args) -> int:
    found = rows(args)
    if args.json:
        out_json({"stacks": found})
        return 0
    # bundled: yes or no (no: the first use resolves it from the index named in source)
    print(table([[r["stack"], r.get("version"), r.get("python"), r.get("cuda"),
                  r.get("driver_minimum"), r.get("source"), r.get("closure_bundled"),
                  r.get("base") or r.get("error")] for r in found],
                ["stack", "version", "python", "cuda", "min driver", "source", "bundled",
                 "base"]))
    return 0
