"""Helpers the command handlers share: printing progress, JSON output, resolving."""
from __future__ import annotations

import json
import sys

_REPORTERS: dict[str, object] = {}


def progress_for(args):
    """The progress reporter `--progress` asks for (stderr; stdout stays the result). One
    per process and mode, closed by the CLI when the command ends."""
    from ..core import progress as p
    mode = getattr(args, "progress", None) or "auto"
    if mode not in _REPORTERS:
        _REPORTERS[mode] = p.reporter(mode)
    return _REPORTERS[mode]


def close_progress() -> None:
    from ..core import progress as p
    while _REPORTERS:
        _REPORTERS.popitem()[1].close()
    p.forget()   # a later note() writes a plain line, not through a closed view


SCHEMA_VERSION = 1   # of every --json document; docs/contract.md describes each shape


def versioned(obj: dict) -> dict:
    """`obj` with the schema version as its first key."""
    return {"schema_version": SCHEMA_VERSION, **obj}


def out_json(obj: dict) -> None:
    """The one --json document of a command, on stdout. Always an object that starts with
    its schema version: a list is returned inside a named key."""
    if not isinstance(obj, dict):
        raise TypeError("a --json document is an object")
    print(json.dumps(versioned(obj), indent=2))


def cert_line(cert: dict) -> str:
    gpus = ", ".join(g["name"] for g in cert["host"]["gpus"]) or "no GPU"
    from ..smoke._harness import tally
    return (f"{'PASSED' if cert['passed'] else 'FAILED'} at level {cert['level']}: "
            f"{tally(cert['report'].get('checks', []))}; {gpus}, driver "
            f"{cert['host']['driver'] or '-'}, {cert['seconds']} s"
            + (f"; {cert['platform']} emulated on {cert.get('host_machine')}"
               if cert.get("emulated") else ""))


def print_failed(checks: list[dict]) -> None:
    """Each failed check of a payload's report, on stderr."""
    for c in checks:
        if not c.get("passed"):
            print(f"  failed: {c.get('name')}: {c.get('detail', '')}", file=sys.stderr)


def print_certificate(cert: dict) -> None:
    """The one-line verdict and a line per thing to change on stdout, each failed check on
    stderr. The daemon's refused ulimits are left out: certification said that as it ran,
    once per daemon (doctor --image still lists it)."""
    from ..certs.diagnose import advice
    print(cert_line(cert))
    for line in advice(cert):
        if not line.startswith("run profile: "):
            print(f"  change: {line}")
    print_failed(cert["report"].get("checks", []))


def _cell(value) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    return " ".join(str(value).split())


def table(rows: list[list], header: list[str], width: int | None = None) -> str:
    """A plain table that fits the terminal (COLUMNS honoured): the widest columns give way
    first, and a cut cell ends in '…'; --json has every value whole."""
    import shutil
    rows = [[_cell(c) for c in r] for r in rows]
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h)
              for i, h in enumerate(header)]
    room = (width or shutil.get_terminal_size((100, 24)).columns) - 2 * (len(header) - 1)
    while sum(widths) > room and max(widths) > 12:
        widths[widths.index(max(widths))] -= 1
    while sum(widths) > room and max(widths[1:], default=0) > 6:   # the first names the row
        rest = widths[1:]
        widths[1 + rest.index(max(rest))] -= 1
    rows = [[c if len(c) <= w else c[:w - 1] + "…" for c, w in zip(r, widths, strict=True)]
            for r in [header, *rows]]
    header, rows = rows[0], rows[1:]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    return "\n".join([fmt.format(*header), fmt.format(*("-" * w for w in widths)),
                      *(fmt.format(*r) for r in rows)])


def load_matrix_for(args):
    """The matrix named by --matrix or ENVGEN_MATRIX, else the bundled one."""
    from ..resolve.request import load
    return load(getattr(args, "matrix", None))


def ref_or_spec(args, matrix, text: str) -> tuple[str | None, str | None]:
    """What a typed IMAGE|SPEC names: (it as an image reference, the tag `envgen build`
    gives it as a spec), each None when it is not one; InputError when it is neither.
    Needs no daemon."""
    from ..core.errors import EnvgenError, InputError, shown
    from ..core.image import default_tag, parse_image_ref
    as_ref = as_spec = not_ref = None
    if text is None:   # no IMAGE|SPEC: the project file's stack
        return None, default_tag(resolve_for(args, matrix))
    host_for(args, matrix or load_matrix_for(args))   # a bad flag is said as such, first
    try:
        as_ref = parse_image_ref(text)
    except InputError as e:
        not_ref = e
    try:
        as_spec = default_tag(resolve_for(args, matrix, text))
    except EnvgenError as e:
        if as_ref is None:   # both reasons: `pytorch-cu121,python=3.99` is a spec gone wrong
            raise InputError(f"{shown(text)} is neither an image reference "
                             f"({not_ref.message[:200]}) nor a spec that resolves "
                             f"({e.message[:300]})") from None
        if _names_a_stack(matrix or load_matrix_for(args), text):
            raise   # a stack's name that cannot resolve here: its reason, not "no image"
    return as_ref, as_spec


def _names_a_stack(matrix, text: str) -> bool:
    """Whether `text` is a spec that names a stack of the matrix (pytorch-cu121), not an
    image's name that happens to read as a spec."""
    from ..core.errors import EnvgenError
    from ..resolve.spec import parse_spec
    try:
        parse_spec(text, matrix)
    except EnvgenError:
        return False
    return True


def resolve_for(args, matrix=None, spec_text=None):
    """Resolve args.spec (or spec_text) with the host flags args carries, as
    resolve/request.py does for every caller; whether envgen.yaml is in play is said once
    per project file and process, on stderr."""
    from ..resolve.request import resolve
    text = getattr(args, "spec", None) if spec_text is None else spec_text
    m = matrix or load_matrix_for(args)
    return resolve(m, text, host_for(args, m), note=lambda msg: _say_once(args, msg))


def host_for(args, matrix):
    """The host constraints the flags args carries give."""
    from ..resolve.request import host
    return host(matrix, driver=getattr(args, "driver", None), gpu=getattr(args, "gpu", None),
                cc=getattr(args, "cc", None), python=getattr(args, "python", None),
                sources=getattr(args, "sources", None),
                platform=getattr(args, "platform", None))


_SAID: set = set()


def _say_once(args, msg: str) -> None:
    """A team's layer in an image must never be a surprise, nor its absence: one line."""
    if msg not in _SAID:
        _SAID.add(msg)
        progress_for(args)(msg)
