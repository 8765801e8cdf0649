"""`envgen render --all -o DIR`: every stack the matrix offers, each into DIR/STACK, in one
process (the matrix loaded and the templates compiled once). Each stack is rendered as
`envgen render STACK -o DIR/STACK` renders it (the same two calls); one that fails is
reported with its name and the others are rendered all the same. The exit code is the
largest of the failed stacks' (docs/contract.md), 0 when every stack rendered.
With --no-resolve a stack without a stored closure is one of those failures instead of a
resolver run (uv, and the network) in the middle of the loop.
For a platform other than linux/amd64 (--platform, or a Grace GPU's) the stacks are those
that platform offers, as `envgen matrix list --platform P` shows them (each named and
written under its own name, pytorch-cpu-arm64); the others are left out, each with why,
and are no failure."""
from __future__ import annotations

import re
import sys
import time
from pathlib import Path

from ..core.errors import EnvgenError, InputError, shown
from ._common import host_for, load_matrix_for, out_json, progress_for, resolve_for

# A stack's folder under DIR: its name, which the matrix's schema already limits; checked
# again here because a --matrix file is input, and a name must not climb out of DIR.
FOLDER = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


def render_stack(args, matrix, name: str, out: Path) -> dict:
    """Render one stack into out/name, as `envgen render` does; its --json entry."""
    from ..build.context import write_context
    from ..resolve.closure import closure_for
    if not FOLDER.fullmatch(name) or ".." in name:
        raise InputError(f"the matrix names a stack {shown(name)} that is not usable as a "
                         f"folder name")
    st = resolve_for(args, matrix, name)
    if not FOLDER.fullmatch(st.stack) or ".." in st.stack:
        raise InputError(f"the stack {shown(st.stack)} is not usable as a folder name")
    closure, origin = closure_for(st, resolve=not args.no_resolve,
                                  progress=progress_for(args))
    files = write_context(st, closure, out / st.stack)   # its own name: pytorch-cpu-arm64
    return {"stack": st.stack, "framework": st.framework_package, "version": st.version,
            "path": str(out / st.stack),
            "closure": {"key": closure.key, "from": origin, "packages": len(closure.pins)},
            "files": [str(f) for f in files]}


def offered(matrix, platform: str | None) -> tuple[list[str], list[dict]]:
    """The matrix's stacks that `platform` offers (all of them for linux/amd64), and those
    it does not, as {stack, why}: a stack that does not resolve there on any host, as
    `envgen matrix list --platform P` shows it."""
    from ..core.errors import Unsatisfiable
    from ..core.model import DEFAULT_PLATFORM, platform_suffix
    from ..resolve.spec import parse_spec
    from ..resolve.stack import Host, resolve
    names = matrix.stack_names()
    if platform in (None, DEFAULT_PLATFORM):
        return names, []
    there, left_out = [], []
    for name in names:
        try:
            resolve(matrix, parse_spec(name, matrix), Host(platform=platform))
        except Unsatisfiable as e:
            left_out.append({"stack": name + platform_suffix(platform), "why": e.message})
            continue
        except EnvgenError:
            pass   # not the platform's doing: rendering it says what, as a failure
        there.append(name)
    return there, left_out


def run(args) -> int:
    if args.spec is not None:
        raise InputError(f"render: give a SPEC or --all, not both (got {shown(args.spec)})")
    started = time.monotonic()
    out = Path(args.output)
    if out.exists() and not out.is_dir():
        raise InputError(f"-o {out}: exists and is not a folder")
    m = load_matrix_for(args)
    platform = host_for(args, m).platform
    names, left_out = offered(m, platform)
    rendered, failed = [], []
    for name in names:
        try:
            rendered.append(render_stack(args, m, name, out))
        except EnvgenError as e:
            failed.append({"stack": name, **e.to_json()})
    seconds = round(time.monotonic() - started, 3)
    code = max((f["exit_code"] for f in failed), default=0)
    if args.json:
        # left_out: only where a platform leaves stacks out ({stack, why} each)
        out_json({"output": str(out), "rendered": rendered, "failed": failed,
                  **({"left_out": left_out} if left_out else {}), "seconds": seconds})
        return code
    for r in rendered:
        print(f"  {r['stack']:22} {r['framework']} {r['version']}: {len(r['files'])} files "
              f"({r['closure']['from']})")
    for f in failed:
        where = f"{f['file']}:{f['line']}: " if f["file"] and f["line"] else \
            f"{f['file']}: " if f["file"] else ""
        print(f"envgen: error: {f['stack']}: {where}{f['message']}", file=sys.stderr)
    print(f"rendered {len(rendered)} of {len(rendered) + len(failed)} stacks"
          + (f" {platform} offers" if left_out else "") + f" into {out}/STACK "
          f"in {seconds} s" + (f"; {len(failed)} failed: " + ", ".join(
              f["stack"] for f in failed) if failed else "")
          + (f"; left out {len(left_out)} that {platform} does not offer (`envgen matrix "
             f"list --platform {platform}` says why each)" if left_out else ""))
    return code
