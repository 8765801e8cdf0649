"""The shell: parse arguments, call one module, print. The only place that prints or exits."""
from __future__ import annotations

import argparse
import json
import re
import sys
import textwrap
from pathlib import Path

from . import __version__
from .core import leftovers
from .core.errors import EnvgenError, EnvironmentMissing, InputError, InternalError, shown


class _Once(argparse._StoreAction):
    """An option that takes one value may be given once: `--python 3.11 --python 3.12` is
    refused (exit 2), where argparse would keep the last silently. The names this parse has
    set are kept on the namespace; a default does not count."""
    def __call__(self, parser, namespace, values, option_string=None):
        seen = namespace.__dict__.setdefault("_given", {})
        text = " ".join(values) if isinstance(values, list) else str(values)
        text = shown(text, 44) if len(text) > 40 or not text.isprintable() else text
        if option_string is not None and self.dest in seen:
            raise argparse.ArgumentError(
                self, f"given twice ({seen[self.dest]}, then {text}): give it once")
        if option_string is not None:
            seen[self.dest] = text
        super().__call__(parser, namespace, values, option_string)


class _Parser(argparse.ArgumentParser):
    def __init__(self, *args, **kwargs):
        kwargs.setdefault("allow_abbrev", False)   # --jso is not --json: one spelling each
        super().__init__(*args, **kwargs)
        self.register("action", None, _Once)
        self.register("action", "store", _Once)

    def error(self, message):  # usage errors are exit 2, one sentence, no traceback
        # argparse quotes the value it refuses whole ("invalid choice: 'xxxx…'"): cut it
        message = re.sub(r"'([^']{60})[^']+'", r"'\1...'", message)
        raise InputError(f"{self.prog}: {message}")


def _whole(lo: int, hi: int, unit: str):
    """An argparse type: a whole number from lo to hi (a 5,000-digit one is refused too)."""
    def parse(text: str) -> int:
        if not (text.isascii() and text.isdigit()) or len(text) > 9 or \
                not lo <= int(text) <= hi:
            raise argparse.ArgumentTypeError(f"{text[:20]!r} is not a whole number of "
                                             f"{unit} from {lo} to {hi}")
        return int(text)
    return parse


def _path(text: str) -> str:
    """An argparse type for a file or folder name: refused before any system call when it
    could not name one (empty, a NUL byte, a component longer than 255 bytes)."""
    if not text or "\x00" in text or len(text.encode()) > 4096 or any(
            len(part.encode()) > 255 for part in text.split("/")):
        raise argparse.ArgumentTypeError(f"{text[:40]!r} is not a usable file or folder name")
    return text


from .commands._common import load_matrix_for as _matrix  # noqa: E402
from .commands._common import out_json as _json_out  # noqa: E402
from .commands._common import resolve_for as _resolve  # noqa: E402
from .commands._common import table as _table  # noqa: E402
from .core.progress import MODES as PROGRESS_MODES  # noqa: E402

SPEC_HELP = ("a stack name (pytorch-cu121; `envgen matrix list` shows them all) or a spec "
             "(torch==2.3.1,variant=cu121 or lightning>=2.5,torch==2.7.1); default: the stack "
             "of ./envgen.yaml")


# ---- matrix -------------------------------------------------------------------------------

def cmd_matrix(args) -> int:
    m = _matrix(args)
    if args.action == "validate":
        counts = {"drivers": len(m.drivers), "cuda": len(m.cuda), "gpus": len(m.gpus),
                  "libraries": len(m.libraries), "framework_releases": len(m.releases),
                  "bases": len(m.bases)}
        if args.json:
            _json_out({"valid": True, "sha256": m.sha256, "counts": counts})
        else:
            print(f"matrix is valid (sha256 {m.sha256[:12]}): " +
                  ", ".join(f"{v} {k}" for k, v in counts.items()))
        return 0
    if args.action == "list":
        from .core.errors import Unsatisfiable
        rows = []
        for name in m.stack_names():
            try:
                st = _resolve(args, m, name)
                rows.append({"stack": name, "version": st.version, "python": st.python,
                             "cuda": st.cuda, "source": st.wheel_source,
                             "driver_minimum": st.driver_minimum, "base": st.base.name})
            except Unsatisfiable as e:
                rows.append({"stack": name, "error": e.message})
        if args.json:
            _json_out({"stacks": rows})
        else:
            print(_table([[r["stack"], r.get("version"), r.get("python"), r.get("cuda"),
                           r.get("driver_minimum"), r.get("source"),
                           r.get("base") or r.get("error")] for r in rows],
                         ["stack", "version", "python", "cuda", "min driver", "source",
                          "base"]))
        return 0
    # show
    from .matrix.show import section_rows
    rows, header = section_rows(m, args.section)
    if args.json:
        _json_out({"section": args.section, "rows": [dict(zip(header, r)) for r in rows]})
    else:   # why a fact is inferred is a sentence: --json carries it
        keep = [i for i, h in enumerate(header) if h != "why"]
        print(_table([[r[i] for i in keep] for r in rows], [header[i] for i in keep]))
    return 0


# ---- resolve / render ---------------------------------------------------------------------

def cmd_resolve(args) -> int:
    st = _resolve(args)
    if args.json:
        _json_out(st.to_json())
        return 0
    d = st.to_json()
    print(f"{st.stack}: {st.framework_package} {st.version} ({st.variant}), Python "
          f"{st.python}, CUDA {st.cuda or '-'} (cuDNN {st.cudnn or '-'}, NCCL "
          f"{st.nccl or '-'})")
    print(f"  base:    {st.base.name} ({st.base.reference})")
    print(f"  wheels:  {st.wheel_source}" + (f" ({st.index_url})" if st.index_url else ""))
    print(f"  driver:  >= {d['driver']['minimum']} (native from {d['driver']['toolkit']})"
          if st.cuda else "  driver:  not needed (CPU build)")
    if st.require_cuda:
        print(f"  NVIDIA_REQUIRE_CUDA: {st.require_cuda}")
    import shutil

    from .render.views import requirement
    print(textwrap.fill(" ".join(requirement(n, v) for n, v in st.packages),
                        width=max(60, shutil.get_terminal_size((100, 24)).columns),
                        initial_indent="  packages: ", subsequent_indent=" " * 12,
                        break_on_hyphens=False))
    print("  reasons:")
    for r in st.reasons:
        print(f"    - {r}")
    return 0


def cmd_render(args) -> int:
    if args.all:
        return _later("render_all")(args)
    if args.no_resolve:
        raise InputError("render: --no-resolve goes with --all")
    from .build.context import write_context
    from .commands._common import progress_for
    from .resolve.closure import closure_for
    st = _resolve(args)
    closure, origin = closure_for(st, progress=progress_for(args))
    files = write_context(st, closure, Path(args.output))
    out = Path(args.output)
    if args.json:
        _json_out({"stack": st.to_json(), "closure": {"key": closure.key, "from": origin,
                                                      "packages": len(closure.pins)},
                   "files": [str(f) for f in files]})
    else:
        print(f"{st.stack} ({st.framework_package} {st.version}) rendered into "
              f"{args.output}: " + ", ".join(str(f.relative_to(out)) for f in files))
        hashed = sum(1 for p in closure.pins if p.sha256)
        print(f"  closure: {len(closure.pins)} distributions, {hashed} hash-pinned ({origin})")
        from .render.build_hint import build_command  # a line to paste, as the shell reads it
        print(f"  build it: {build_command(st, out)}")
    return 0


def cmd_closure(args) -> int:
    from .commands._common import progress_for
    from .resolve.closure import closure_for, resolve_closure
    st = _resolve(args)
    if args.refresh:
        c, origin = resolve_closure(st), "resolved now"
    else:
        c, origin = closure_for(st, progress=progress_for(args))
    if args.json:
        doc = c.to_json()
        for pkg in doc.get("packages", []):   # the contract's one sha256 beside its hashes
            first = next(iter(pkg.get("hashes") or []), None)
            pkg["sha256"] = first.removeprefix("sha256:") if first else None
        _json_out({**doc, "from": origin})
        return 0
    print(f"{st.stack}: {len(c.pins)} distributions for Python {st.python} on "
          f"{c.inputs['platform']} ({origin}; {c.resolver}, {c.created})")
    for p in c.pins:
        print(f"  {p.requirement:45} " + (f"sha256:{p.sha256[:16]}… {p.file}" if p.sha256
                                          else f"no hash: {p.note}"))
    return 0


# ---- require-cuda -------------------------------------------------------------------------

def cmd_require_cuda(args) -> int:
    import re

    from .resolve import require_cuda
    from .resolve.compat import as_release, check_cc, check_driver, driver_cuda
    check_driver(args.driver)
    # a bare branch (535) is its first release, as resolve reads it (compat.as_release)
    driver = args.driver if "." in args.driver else as_release(_matrix(args), args.driver)
    if args.cuda is not None and not re.fullmatch(r"[0-9]{1,2}\.[0-9]{1,2}", args.cuda):
        raise InputError(f"--cuda {args.cuda!r} is not a CUDA version like 12.2")
    if args.arch is not None:
        check_cc(args.arch, "--arch")
    cuda = args.cuda or driver_cuda(_matrix(args), driver)
    if cuda is None:
        raise InputError(f"driver {args.driver} is older than every CUDA release in the "
                         f"matrix; pass --cuda")
    env = {"NVIDIA_REQUIRE_CUDA": args.string}
    for extra in args.env or ():
        key, eq, value = extra.partition("=")
        if not eq or not re.fullmatch(r"NVIDIA_(REQUIRE_[A-Z0-9_]+|DISABLE_REQUIRE)", key):
            raise InputError(f"--env {shown(extra)} must be NAME=VALUE with NAME one the "
                             f"container runtime reads (NVIDIA_REQUIRE_*, "
                             f"NVIDIA_DISABLE_REQUIRE)")
        env[key] = value
    # nvidia-smi prints "GeForce", the toolkit compares brands without case (dsl.c)
    brand = None if args.brand is None else args.brand.lower()
    if brand is not None and not re.fullmatch(r"[a-z][a-z0-9]{0,31}", brand):
        raise InputError(f"--brand {shown(args.brand)} is not a GPU brand as the driver "
                         f"names it (tesla, geforce, quadro, nvidia, ...)")
    if args.gpu is None:
        host, refused = require_cuda.Host(driver, cuda, brand, args.arch), None
    else:
        host, refused = require_cuda.gpu_host(_matrix(args), args.gpu, driver, cuda,
                                              brand, args.arch)
    d = refused or require_cuda.evaluate(env, host)
    notes = [f"driver {args.driver} is read as {driver}, the first release of its branch "
             f"in the matrix"] if driver != args.driver else []
    notes += [f"the {rule} was not given" + (" (the matrix has none for the GPU)" if args.gpu
                                               else "") + f": pass --{rule}"
              + ("" if args.gpu else " or --gpu NAME") + f" to judge the {rule} clause"
              for rule in d.assumed]
    if args.json:
        _json_out({"ok": d.ok, "clause": d.clause, "why": d.why, "host": host.__dict__,
                   "assumed": list(d.assumed), "notes": notes})
    else:
        print(("yes: " if d.ok else "no: ") + d.why)
        for note in notes:
            print(f"  note: {note}")
    return 0 if d.ok else 1


def cmd_completion(args) -> int:
    """`envgen completion bash|zsh`: the script, from this very parser."""
    from .commands import completion
    from .commands._common import load_matrix_for
    stacks = load_matrix_for(args).stack_names()
    print(getattr(completion, args.shell)(build_parser(), stacks), end="")
    return 0


def _later(name):
    def run(args):
        from importlib import import_module
        mod = import_module(f".commands.{name}", __package__)
        return mod.run(args)
    return run


# envgen.matrix.refresh.READERS, named here so that building the parser imports no reader
# (tests/test_cli_contract.py holds the two equal)
REFRESH_READERS = ("pytorch", "lightning", "pytorch-lightning", "transformers", "accelerate",
                   "deepspeed", "nemo", "jax", "tensorflow", "keras", "tf-keras", "flax",
                   "optax", "platforms")


def _argparse_untranslated() -> None:
    """argparse asks gettext for each of its ~100 strings, and gettext looks for a catalogue
    on disk each time (10 ms a start). When there is none to find, its strings are its own."""
    import gettext
    if gettext.find(gettext.textdomain()) is None:
        argparse._ = lambda text: text
        argparse.ngettext = lambda one, many, n: one if n == 1 else many


def build_parser() -> argparse.ArgumentParser:
    _argparse_untranslated()
    p = _Parser(prog="envgen", description="Certified GPU training environments from a "
                                           "compatibility matrix.")
    p.add_argument("--version", action="version", version=f"envgen {__version__}")
    p.add_argument("--debug", action="store_true",
                   help="show the traceback of an internal error (also ENVGEN_DEBUG=1)")
    p.add_argument("--matrix", metavar="PATH", type=_path,
                   help="matrix file or folder to use instead of the bundled one")
    p.add_argument("--progress", choices=PROGRESS_MODES, default=None,
                   help="how progress shows on stderr: auto (default: live on a terminal, "
                        "else plain lines), tty, plain, json (JSON lines) or quiet")
    json_flag = _Parser(add_help=False)
    json_flag.add_argument("--json", action="store_true", help="machine-readable output")
    host = _Parser(add_help=False)
    host.add_argument("--driver", metavar="VER", help="host driver, e.g. 535.104.05")
    host.add_argument("--gpu", metavar="NAME", help="GPU name, e.g. H100 or 'RTX 4090'")
    host.add_argument("--cc", metavar="X.Y", help="GPU compute capability, e.g. 9.0")
    host.add_argument("--python", metavar="X.Y", help="Python version")
    host.add_argument("--platform", metavar="OS/ARCH",
                      help="image platform: linux/amd64 (default) or linux/arm64 (Grace); "
                           "a Grace --gpu implies linux/arm64")
    host.add_argument("--sources", metavar="POLICY",
                      help="wheel sources: auto (default: PyPI first, then per-variant "
                           "indexes), pypi, index, or a PyPI mirror URL")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)

    mx = sub.add_parser("matrix", help="list, show or validate the matrix")
    mxs = mx.add_subparsers(dest="action", required=True, parser_class=_Parser)
    mxs.add_parser("list", parents=[json_flag, host],
                   help="every stack the matrix offers, and whether its closure is bundled "
                        "(no index needed to resolve it)").set_defaults(
                       func=_later("matrix_list"))
    show = mxs.add_parser("show", parents=[json_flag], help="one section of the matrix")
    show.add_argument("section", nargs="?", default="frameworks",
                      choices=["drivers", "cuda", "forward_compat", "gpus",
                               "gpu_architectures", "libraries", "frameworks", "releases",
                               "bases", "sources"],
                      help="the section to print (default frameworks)")
    mxs.add_parser("validate", parents=[json_flag], help="validate the matrix")
    rf = mxs.add_parser("refresh", parents=[json_flag],
                        help="regenerate matrix files and closures from their upstreams",
                        description="Regenerate the matrix files that are derived from "
                        "upstream metadata (pytorch: PyPI's index and each wheel's METADATA), "
                        "then the stored closures whose inputs changed. Writes into "
                        "--matrix FOLDER (default: the checkout's matrices/); nothing is "
                        "written when a sanity check fails (exit 1).")
    rf.add_argument("readers", nargs="*", metavar="READER",
                    help=f"{', '.join(REFRESH_READERS)} and/or closures (default: all, "
                         f"in that order)")
    rf.add_argument("--check", action="store_true",
                    help="write nothing; exit 1 when a file would change")
    rf.add_argument("--index-url", default="https://pypi.org/simple", metavar="URL",
                    help="the package index to read (PEP 691 JSON; default PyPI)")
    rf.add_argument("--refetch", action="store_true",
                    help="ignore cached index pages (wheel metadata stays cached)")
    rf.add_argument("--jobs", type=_whole(1, 64, "parallel requests"), default=16,
                    help="parallel requests (1 to 64; default 16)")
    rf.set_defaults(func=_later("refresh"))
    mx.set_defaults(func=cmd_matrix)

    it = sub.add_parser("init", parents=[json_flag],
                        help="write an annotated envgen.yaml (the project file) here",
                        description="Write envgen.yaml: the stack, your own pinned pip "
                        "packages, apt packages, files to copy and a smoke command of your "
                        "own. Every command that takes a SPEC reads it when no SPEC is "
                        "given (ENVGEN_PROJECT names another file, or '' for none).")
    it.add_argument("spec", nargs="?", metavar="STACK",
                    help="the stack or spec the project builds on (default pytorch-cu121: "
                         "its closure is bundled, so no index but PyPI's files is needed)")
    it.add_argument("--name", help="the image's name, envgen/NAME (default: this folder's)")
    it.add_argument("-o", "--output", type=_path, metavar="FILE",
                    help="where to write it (default ./envgen.yaml)")
    it.add_argument("--force", action="store_true", help="replace an existing file")
    it.add_argument("--from", dest="from_path", type=_path, metavar="PATH",
                    help="the team's own file: a requirements file, pyproject.toml, setup.py "
                         "or setup.cfg (read, never run), environment.yml, uv.lock, "
                         "pylock.toml, or a folder holding one (docs/project.md)")
    it.add_argument("--driver", help="with --from: the target's NVIDIA driver")
    it.add_argument("--gpu", action="append", default=[], metavar="GPU",
                    help="with --from: a target GPU (repeatable)")
    it.add_argument("--hosts", metavar="FILE", type=_path,
                    help="with --from, instead of --driver/--gpu: a hosts file (as for `envgen "
                         "diff --hosts`, examples/fleet.yaml); the stack chosen runs on every "
                         "host and each of its GPUs")
    it.add_argument("--python", help="with --from: the image's Python (3.X)")
    it.add_argument("--extra", action="append", default=[], metavar="EXTRA",
                    help="with --from: an optional-dependencies extra to include (repeatable)")
    it.add_argument("--group", action="append", default=[], metavar="GROUP",
                    help="with --from: a PEP 735 dependency group to include (repeatable)")
    it.add_argument("--verbose", action="store_true",
                    help="with --from: show uv's own output when it finds no closure")
    it.add_argument("--no-source-builds", action="store_true",
                    help="with --from: refuse any package that would be built from its sdist "
                         "(in the builder stage) instead of installed from a wheel")
    it.set_defaults(func=_later("init"))

    co = sub.add_parser("completion", help="a shell completion script (bash or zsh)",
                        description="Print a completion script: commands, options, their "
                        "choices, files where a path goes and the matrix's stack names where "
                        "a SPEC goes. Load it with `source <(envgen completion bash)`, or "
                        "write it to ~/.local/share/bash-completion/completions/envgen.")
    co.add_argument("shell", choices=["bash", "zsh"], help="the shell to complete in")
    co.set_defaults(func=cmd_completion)

    r = sub.add_parser("resolve", parents=[json_flag, host], help="spec -> pinned stack")
    r.add_argument("spec", nargs="?", help=SPEC_HELP)
    r.set_defaults(func=cmd_resolve)

    cl = sub.add_parser("closure", parents=[json_flag, host],
                        help="the full hash-pinned closure of a stack (resolved once, cached)")
    cl.add_argument("spec", nargs="?", help=SPEC_HELP)
    cl.add_argument("--refresh", action="store_true",
                    help="resolve again with uv even when a closure is stored")
    cl.set_defaults(func=cmd_closure)

    rd = sub.add_parser("render", parents=[json_flag, host], help="write a build context",
                        description="Write the build context of one stack into DIR, or with "
                        "--all of every stack the matrix offers, each into DIR/STACK (one "
                        "process; a stack that fails is named and the others are written).")
    rd.add_argument("spec", nargs="?", help=SPEC_HELP)
    rd.add_argument("-o", "--output", required=True, metavar="DIR", type=_path,
                    help="the folder to write the build context into")
    rd.add_argument("--all", action="store_true",
                    help="every stack of the matrix, each into DIR/STACK (as `envgen render "
                         "STACK -o DIR/STACK` writes it)")
    rd.add_argument("--no-resolve", action="store_true",
                    help="with --all: use stored closures only; a stack without one is "
                         "reported (exit 2) instead of resolved now")
    rd.set_defaults(func=cmd_render)

    b = sub.add_parser("build", parents=[json_flag, host], help="render and build an image")
    b.add_argument("spec", nargs="?", help=SPEC_HELP)
    b.add_argument("--certify", action="store_true", help="certify the image after building")
    b.add_argument("--tag", metavar="T", help="image tag (default envgen/STACK:VERSION)")
    b.add_argument("--gpus", default="auto", help="for --certify: all, none, auto or 0,1")
    b.add_argument("--no-cache", action="store_true", help="build without the layer cache")
    b.add_argument("--builder", choices=["auto", "buildkit", "classic"], default="auto",
                   help="BuildKit (buildx or DOCKER_BUILDKIT=1) or the classic builder; "
                        "auto (default) takes BuildKit where the daemon has it")
    b.set_defaults(func=_later("build"))

    c = sub.add_parser("certify", parents=[json_flag, host],
                       help="run the smoke-training payload in an image")
    c.add_argument("target", metavar="IMAGE|SPEC", nargs="?",
                   help="an image reference or id, a spec whose built image to certify, or "
                        "a FILE.sif (run with apptainer) (default: the stack of "
                        "./envgen.yaml)")
    c.add_argument("--gpus", default="auto", help="all, none, auto (default) or 0,1")
    c.add_argument("--gpu-access", choices=["auto", "toolkit", "cdi", "devices"],
                   default="auto", help="how GPUs reach the container")
    c.add_argument("--timeout", type=_whole(60, 86400, "seconds"), default=900,
                   help="seconds before the run is killed (60 to 86400; default 900)")
    c.add_argument("--steps", type=_whole(6, 1_000_000, "steps"), default=None,
                   help="training steps (a run with other steps is another certificate)")
    c.add_argument("--multi-gpu", action="store_true", help="also run DDP over NCCL")
    c.add_argument("--measure", choices=["basic", "full"], default="basic",
                   help="full: also the habits of a training run: GPU telemetry under load, "
                        "host-to-device bandwidth, loader rates, memory peaks (another "
                        "certificate)")
    c.set_defaults(func=_later("certify"))

    sf = sub.add_parser("sif", parents=[json_flag, host],
                        help="an Apptainer SIF of a built image, for HPC sites")
    sf.add_argument("target", metavar="IMAGE|SPEC", nargs="?",
                    help="an envgen-built image, or a spec whose built image to convert "
                         "(default: the stack of ./envgen.yaml)")
    sf.add_argument("-o", "--output", required=True, metavar="FILE", type=_path,
                    help="the SIF file to write (replaced once the new one is whole)")
    sf.add_argument("--timeout", type=_whole(60, 86400, "seconds"), default=1800,
                    help="seconds apptainer build may take (60 to 86400; default 1800)")
    sf.add_argument("--compression", choices=["gzip", "lz4", "zstd"], default="gzip",
                    help="the squashfs compression: gzip (default: every kernel and "
                         "squashfuse reads it), or lz4 (about 3x faster to build, larger)")
    sf.set_defaults(func=_later("sif"))

    cs = sub.add_parser("certs", help="stored certificates")
    css = cs.add_subparsers(dest="action", required=True, parser_class=_Parser)
    clist = css.add_parser("list", parents=[json_flag],
                           help="the current certificate of each image, profile, GPU and "
                                "driver, newest first")
    clist.add_argument("--history", action="store_true",
                       help="every run the store keeps, earlier ones included")
    cshow = css.add_parser("show", parents=[json_flag], help="one image's certificate")
    cshow.add_argument("image", metavar="IMAGE_ID",
                       help="an image id (a prefix will do) or a tag of a certified image")
    cimp = css.add_parser("import", parents=[json_flag],
                          help="take certificates from files, folders and job logs")
    cimp.add_argument("inputs", nargs="+", metavar="FILE", type=_path,
                      help="a certificate's JSON, a folder of them, or a job log (Slurm, "
                           "kubectl logs) with `envgen-certificate: {...}` lines; - reads "
                           "standard input")
    cmerge = css.add_parser("merge", parents=[json_flag],
                            help="take every certificate of other stores, history included")
    cmerge.add_argument("inputs", nargs="+", metavar="DIR", type=_path,
                        help="another store: an ENVGEN_HOME or its certs/ folder (e.g. "
                             "copied from another host)")
    for sp in (cimp, cmerge):
        sp.add_argument("--lock", metavar="FILE", type=_path,
                        help="a lock whose pinned images the certificates must match "
                             "(default ./envgen.lock when there is one)")
    cs.set_defaults(func=_later("certs"))

    lk = sub.add_parser("lock", parents=[json_flag, host], help="pin built images")
    lk.add_argument("specs", nargs="*", metavar="SPEC",
                    help="stacks, specs or image references to pin (default: the image of "
                         "./envgen.yaml's stack, else every stack's newest certified image)")
    lk.add_argument("-o", "--output", default="envgen.lock", type=_path,
                    help="the lock file to write (default envgen.lock)")
    lk.add_argument("--push", metavar="REPOSITORY",
                    help="push each certified image to REPOSITORY/STACK and pin its "
                         "manifest digest, e.g. localhost:5000/team or ghcr.io/org/envgen")
    lk.add_argument("--merge", nargs="+", metavar="LOCK", type=_path,
                    help="merge these locks' stacks into the output (e.g. per-stack locks "
                         "from CI jobs)")
    lk.set_defaults(func=_later("lock"))

    vf = sub.add_parser("verify", parents=[json_flag], help="check images against a lock")
    vf.add_argument("lock", metavar="LOCK", type=_path, help="the lock file to check")
    vf.add_argument("--rebuild", action="store_true",
                    help="also rebuild each stack from the lock and compare layer digests")
    vf.add_argument("--no-pull", action="store_true",
                    help="do not pull a pinned digest that is not on this daemon")
    vf.add_argument("--level", choices=["cpu", "cuda", "multi-gpu"],
                    help="the lowest certificate level to accept (default: the one each "
                         "stack needs: cuda for a CUDA stack)")
    vf.set_defaults(func=_later("verify"))

    df = sub.add_parser("diff", parents=[json_flag], help="what changes between matrices "
                                                          "or drivers")
    df.add_argument("old", nargs="?", type=_path,
                    help="the old matrix: a file, a folder, or REV:PATH of this git checkout")
    df.add_argument("new", nargs="?", type=_path,
                    help="the new matrix: give OLD and NEW together, or neither (--driver "
                         "and --hosts then read --matrix, else the bundled one)")
    df.add_argument("--driver", metavar="OLD..NEW",
                    help="what a driver upgrade changes for every stack, e.g. "
                         "535.104.05..550.54.14")
    df.add_argument("--gpu", metavar="NAME", help="judge the stacks on this GPU, e.g. H100")
    df.add_argument("--hosts", "--fleet", dest="fleet", metavar="FILE", type=_path,
                    help="a hosts file: a mapping `hosts:` [{name, driver, gpus}, ...] to judge "
                         "every stack on (examples/fleet.yaml; --fleet is its older name)")
    df.set_defaults(func=_later("diff"))

    def run_options(parser):
        parser.add_argument("target", metavar="IMAGE|SPEC", nargs="?",
                            help="a certified image (reference or id) or the spec whose "
                                 "built image to use (default: the stack of ./envgen.yaml)")
        parser.add_argument("--gpus", default="auto",
                            help="all, none, auto (default: every GPU) or 0,1")
        parser.add_argument("--gpu-access", choices=["auto", "toolkit", "cdi", "devices"],
                            default="auto", help="how GPUs reach the container")
        parser.add_argument("-e", "--env", action="append", metavar="NAME=VALUE",
                            help="more environment for the command (repeatable)")
        parser.add_argument("--no-mount", action="store_true",
                            help="do not mount the current folder at /workspace")
        parser.add_argument("--no-network", action="store_true",
                            help="no network, as in certification")
        who = parser.add_mutually_exclusive_group()
        who.add_argument("--as-me", dest="as_me", action="store_true", default=True,
                         help="run as your own uid:gid, so what the command writes to "
                              "/workspace is yours (the default; under sudo that is uid "
                              "0, with no capabilities and no new privileges)")
        who.add_argument("--as-image-user", dest="as_me", action="store_false",
                         help="run as the image's own user (envgen's images: envgen, "
                              "UID 10001), as certification does; it may not write to "
                              "/workspace")
        parser.add_argument("--dry-run", action="store_true",
                            help="print the docker command instead of running it (the "
                                 "image is still started once, with no network, for a "
                                 "second, to learn which ulimits the daemon sets)")
    rn = sub.add_parser(
        "run", help="run your own command in a certified image, started as certification "
                    "starts the payload",
        description="Run COMMAND in the image with the GPU access, shared memory, NCCL "
                    "settings and security options certification used, the current "
                    "folder mounted at /workspace, as your own uid:gid (so the command "
                    "can write there; --as-image-user runs it as the image's user, as "
                    "certification does). Options go before IMAGE|SPEC.")
    run_options(rn)
    rn.add_argument("cmd", nargs=argparse.REMAINDER, metavar="-- COMMAND",
                    help="the command and its arguments, after --")
    rn.set_defaults(func=_later("run"), shell=False)
    sh = sub.add_parser("shell", help="an interactive shell in a certified image (as run)")
    run_options(sh)
    sh.set_defaults(func=_later("run"), shell=True, cmd=[])

    pf = sub.add_parser(
        "profile", parents=[json_flag, host],
        help="the run profile certification uses, for docker run, Compose or Kubernetes",
        description="Print how a training container of IMAGE|SPEC should start, as "
                    "certification starts it: shared memory (--shm-size 8g), --ulimit "
                    "memlock=-1 and stack=67108864, NCCL's settings, the GPUs, a non-root "
                    "user, no capabilities. IMAGE|SPEC as for envgen run.")
    pf.add_argument("target", metavar="IMAGE|SPEC", nargs="?",
                    help="an image (reference or id) or a spec (default: the stack of "
                         "./envgen.yaml)")
    pf.add_argument("--format", choices=["docker", "compose", "kubernetes", "json"],
                    default="docker", help="a docker run line (default), a Compose service, "
                    "a Kubernetes pod spec fragment, or the profile as JSON")
    pf.add_argument("--gpus", default="all", help="all (default), none or 0,1")
    pf.add_argument("--gpu-access", choices=["toolkit", "cdi"], default="toolkit",
                    help="the NVIDIA Container Toolkit (--gpus, default) or CDI device names")
    pf.set_defaults(func=_later("profile"))

    dr = sub.add_parser("doctor", parents=[json_flag], help="check this host")
    dr.add_argument("--image", metavar="IMAGE",
                    help="also say what to change for this certified image (an id prefix or "
                         "tag), read from its certificate")
    dr.set_defaults(func=_later("doctor"))

    rp = sub.add_parser("report", parents=[json_flag],
                        help="a static HTML page: every stack on every driver branch",
                        description="Write DIR/index.html: a grid of every stack of the "
                        "matrix on every driver branch (native, minor-version compatibility, "
                        "forward compatibility, or not, each with its reason), the stored "
                        "certificates (copied into DIR/certs/) and, with --fleet, a filter by "
                        "the fleet's GPUs. The page needs no network: open it from disk.",
                        epilog="example:\n  envgen report -o report/ --hosts "
                        "examples/fleet.yaml\n  then open report/index.html "
                        "(report/index.html#gpu=H100 opens it filtered)",
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    rp.add_argument("-o", "--output", required=True, metavar="DIR", type=_path,
                    help="folder to write index.html and certs/ into (made when missing)")
    rp.add_argument("--hosts", "--fleet", dest="fleet", metavar="FILE", type=_path,
                    help="a hosts file, as for `envgen diff --hosts`: its GPUs become a "
                         "filter and its hosts' driver branches are marked (--fleet is its "
                         "older name)")
    rp.set_defaults(func=_later("report"))

    fl = sub.add_parser(
        "fleet", parents=[json_flag],
        help="certify stacks across a fleet through Slurm job arrays or Kubernetes Jobs",
        description="Read FILE (stacks x GPU targets; docs/fleet.md) and write, for --slurm, "
        "one job array per target whose tasks run `envgen certify` and print their "
        "certificate as an `envgen-certificate: {...}` line; for --kubernetes, one Job "
        "manifest per stack and target. envgen schedules nothing itself.")
    fl.add_argument("file", metavar="FILE", type=_path, help="the fleet file (fleet.yaml)")
    how = fl.add_mutually_exclusive_group(required=True)
    how.add_argument("--slurm", dest="scheduler", action="store_const", const="slurm",
                     help="batch scripts for Slurm (sbatch)")
    how.add_argument("--kubernetes", dest="scheduler", action="store_const",
                     const="kubernetes", help="Job manifests for Kubernetes (kubectl apply)")
    fl.add_argument("-o", "--output", metavar="DIR", type=_path,
                    help="the folder to write the scripts or manifests into")
    fl.add_argument("--submit", action="store_true",
                    help="with --slurm: submit each job array with sbatch --parsable")
    fl.add_argument("--collect", metavar="DIR", type=_path,
                    help="with --slurm: each task's state (sacct) and its certificate, the "
                         "passing ones stored; exit 1 unless every task passed")
    fl.add_argument("--resubmit-failed", metavar="DIR", type=_path,
                    help="with --slurm: resubmit only the failed and timed-out tasks")
    fl.add_argument("--engine", choices=["docker", "apptainer"], default="docker",
                    help="what runs the image in each Slurm task (default docker; "
                         "apptainer certifies each stack's `sif:`)")
    fl.add_argument("--python", metavar="PATH",
                    help="with --slurm: the interpreter with envgen on the nodes (default: "
                         "the one beside `envgen` on the node's PATH, else python3)")
    fl.set_defaults(func=_later("fleet"))

    ci = sub.add_parser("ci", help="CI files: a GitHub workflow, a docker-bake.json or a "
                                   "devcontainer.json")
    ci.add_argument("kind", choices=["github", "bake", "devcontainer"],
                    help="github: the Actions workflow; bake: a docker-bake.json; "
                         "devcontainer: a devcontainer.json for one SPEC")
    ci.add_argument("specs", nargs="*", metavar="SPEC",
                    help="the stacks (default: a few of the matrix's); devcontainer: exactly one")
    ci.add_argument("--envgen-source", metavar="REQUIREMENT",
                    help="where CI installs envgen from, pinned: git+https://HOST/PATH@COMMIT "
                         "or 'envgen-gpu==VERSION --hash=sha256:HEX' (default: the git commit "
                         "this envgen was installed or runs from; without one, this release "
                         "by version alone, envgen-gpu==VERSION, with a warning)")
    ci.add_argument("--registry", metavar="REPOSITORY",
                    help="where the workflow pushes images (default: "
                         "ghcr.io/${{ github.repository_owner }}/envgen); devcontainer: use "
                         "the image pushed there, REPOSITORY/STACK:TAG")
    ci.add_argument("--gpu-runner", action="append", metavar="LABEL",
                    help="with github: a runs-on label of the GPU certification job; repeat "
                         "it or separate labels with commas (default: self-hosted,gpu)")
    ci.add_argument("--lock", metavar="FILE", type=_path,
                    help="with devcontainer: use the image this lock pins by digest")
    ci.add_argument("--refresh", action="store_true",
                    help="with github: a weekly workflow that runs `envgen matrix refresh` on "
                         "the --matrix folder (default matrices) and opens a pull request")
    ci.set_defaults(func=_later("ci"))

    sm = sub.add_parser("smoke", parents=[json_flag],
                        help="run the smoke-training payload natively on this host")
    sm.add_argument("--require", choices=["auto", "cuda", "cpu"], default="auto",
                    help="cuda: a CPU run is a failure; cpu: run on the CPU; auto (default): "
                         "cuda when a GPU is visible")
    sm.add_argument("--steps", type=_whole(6, 1_000_000, "steps"), default=None,
                    help="training steps (default: the payload's own)")
    sm.add_argument("--multi-gpu", action="store_true",
                    help="also run DDP over NCCL on every visible GPU")
    sm.add_argument("-v", "--verbose", action="store_true",
                    help="also print the payload's log (stderr)")
    sm.set_defaults(func=_later("smoke"))

    rq = sub.add_parser("require-cuda", help="NVIDIA_REQUIRE_CUDA checks")
    rqs = rq.add_subparsers(dest="action", required=True, parser_class=_Parser)
    chk = rqs.add_parser("check", parents=[json_flag],
                         help="would the toolkit start a container with this requirement?")
    chk.add_argument("string", help="an NVIDIA_REQUIRE_CUDA value, e.g. 'cuda>=12.1 "
                                    "brand=tesla,driver>=470,driver<471'")
    chk.add_argument("--driver", required=True, help="the host's driver, e.g. 535.104.05")
    chk.add_argument("--cuda", help="CUDA version the driver supports (derived if omitted)")
    chk.add_argument("--brand", help="GPU brand, e.g. tesla, geforce")
    chk.add_argument("--arch", help="compute capability, e.g. 9.0")
    chk.add_argument("--gpu", help="a GPU in the matrix (e.g. A100): its brand and compute "
                                   "capability, and whether the driver knows it at all")
    chk.add_argument("--env", action="append", metavar="NAME=VALUE",
                     help="more NVIDIA_REQUIRE_* or NVIDIA_DISABLE_REQUIRE variables")
    rq.set_defaults(func=cmd_require_cuda)
    _teach(p)
    return p


def _teach(top: argparse.ArgumentParser) -> None:
    """Every command: an example after its help, and --matrix accepted after its name too
    (`envgen matrix list --matrix F` as well as `envgen --matrix F matrix list`)."""
    from .commands import help_text as cli_help
    top.epilog = cli_help.TOP
    top.formatter_class = argparse.RawDescriptionHelpFormatter

    def walk(parser: argparse.ArgumentParser, path: str) -> None:
        for action in parser._actions:
            if not isinstance(action, argparse._SubParsersAction):
                continue
            for name, child in action.choices.items():
                where = f"{path} {name}".strip()
                child.epilog = cli_help.epilog(where)
                child.formatter_class = argparse.RawDescriptionHelpFormatter
                if child.description:   # raw now: wrap it here, as argparse would have
                    child.description = textwrap.fill(" ".join(child.description.split()),
                                                      80)
                if "--matrix" not in child._option_string_actions:
                    child.add_argument("--matrix", metavar="PATH", type=_path,
                                       default=argparse.SUPPRESS,
                                       help="matrix file or folder (as before the command)")
                if "--progress" not in child._option_string_actions:
                    child.add_argument("--progress", choices=PROGRESS_MODES,
                                       default=argparse.SUPPRESS,
                                       help="auto, tty, plain, json or quiet (as before the "
                                            "command)")
                walk(child, where)
    walk(top, "")


ISSUES_URL = "https://github.com/envgen/envgen/issues"


class Interrupted(KeyboardInterrupt):
    """SIGTERM or SIGHUP, raised where the process is, so every cleanup path that runs on
    Ctrl-C (containers removed, build children killed, temporary files gone) runs too."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


def _interrupt(signum, _frame):
    # Once: the cleanup this starts (a container removed, a build child killed) must not be
    # broken by the next signal. Slurm signals every process of a job at its time limit, and
    # the fleet task forwards the same SIGTERM to the envgen under it: two, close together.
    import signal
    for s in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, signal.SIG_IGN)
    raise Interrupted(signum)


def _report(e: EnvgenError, want_json: bool) -> int:
    from .commands._common import versioned
    if e.output is not None:   # a result that must not be lost (e.g. an unsaved certificate)
        print(json.dumps(versioned(e.output), indent=2))
    if want_json:
        print(json.dumps(versioned(e.to_json()), indent=2))
    else:
        text = str(e)
        text = text if len(text) <= 1000 else text[:997] + "..."   # the last guard on echoes
        print(f"envgen: error: {text}", file=sys.stderr)
        for h in e.hints:
            print(f"  try: {h}", file=sys.stderr)
        for p in getattr(e, "problems", [])[1:20]:
            print(f"  also: {p}", file=sys.stderr)
    return e.exit_code


def file_failed(e: BaseException) -> EnvgenError | None:
    """A file envgen was told to read or write that the system refused: a full disk or a
    folder it may not write is the environment (exit 3), a path that cannot be one is bad
    input (exit 2); None for any other error."""
    import errno

    from .core.files import fault_class
    if not isinstance(e, OSError) or e.errno is None:
        return None
    where = f" {e.filename}" if e.filename else ""
    text = f"cannot use{where}: {e.strerror or errno.errorcode.get(e.errno, '')}"
    kind = fault_class(e)
    if kind is EnvironmentMissing:
        return EnvironmentMissing(text + " (free space or fix the permissions, then run it "
                                         "again)")
    if kind is InputError:
        return InputError(text)
    return None


def main(argv: list[str] | None = None) -> int:
    """Run one command. Exit codes (docs/contract.md): 0 ok, 1 the thing checked is false, 2 bad
    input, 3 the environment lacks something, 4 a bug in envgen; 128+N on signal N."""
    import os
    import signal
    as_program = argv is None   # the process itself: it ends when main returns
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in argv or os.environ.get("ENVGEN_DEBUG", "") not in ("", "0")
    argv = [a for a in argv if a != "--debug"]
    ours = argv[:argv.index("--")] if "--" in argv else argv   # after --: the user's command
    want_json = "--json" in ours
    previous = {}
    for signum in (signal.SIGTERM, signal.SIGHUP):
        try:
            previous[signum] = signal.signal(signum, _interrupt)
        except ValueError:   # not the main thread: leave signals to whoever owns them
            pass
    from .core.terminal import Escaping
    streams = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = (s if isinstance(s, Escaping) or s is None else Escaping(s)
                              for s in streams)
    try:
        parser = build_parser()
        for flag in ("--matrix", "--progress"):   # before and after the command: the second
            given = [a for a in ours if a == flag or a.startswith(flag + "=")]   # one won
            if len(given) > 1:
                parser.error(f"argument {flag}: given twice: give it once")
        args, extra = parser.parse_known_args(argv)
        if extra and isinstance(getattr(args, "specs", None), list) and \
                not any(x.startswith("-") for x in extra):
            args.specs += extra   # `ci github --registry R SPEC`: SPECs after an option
        elif extra:
            parser.error("unrecognized arguments: " + " ".join(shown(x, 65) for x in extra[:5])
                         + (f" and {len(extra) - 5} more" if len(extra) > 5 else ""))
        from .core.environ import check as check_environment
        check_environment()
        return int(args.func(args) or 0)
    except EnvgenError as e:
        return _report(e, want_json)
    except KeyboardInterrupt as e:
        signum = getattr(e, "signum", signal.SIGINT)
        if as_program and signum != signal.SIGINT:
            previous.clear()   # the process ends: a late SIGTERM of a burst stays ignored
        left = leftovers.taken()
        print(f"envgen: {'interrupted' if signum == signal.SIGINT else 'terminated'} "
              f"({signal.Signals(signum).name}); "
              f"{leftovers.sentence(left) if left else 'nothing half-done was kept'}",
              file=sys.stderr)
        return 128 + signum
    except BrokenPipeError:
        return 0
    except RecursionError:
        return _report(InputError("the input is nested too deeply to read"), want_json)
    except Exception as e:  # the last resort: one sentence, exit 4, never a traceback
        if debug:
            import traceback
            traceback.print_exc()
        from .runtime.docker import daemon_failed
        known = file_failed(e) or daemon_failed(e)
        if known is not None:
            return _report(known, want_json)
        where = ""
        tb = e.__traceback__
        while tb is not None:
            where = f" at {Path(tb.tb_frame.f_code.co_filename).name}:{tb.tb_lineno}"
            tb = tb.tb_next
        text = " ".join(str(e).split())[:200]
        bug = InternalError(f"internal error{where}: {type(e).__name__}: {text} (a bug in "
                          f"envgen {__version__}; please report it at {ISSUES_URL} with "
                          f"the output of the same command run with --debug)")
        return _report(bug, want_json)
    finally:
        from .commands._common import close_progress
        close_progress()
        left = leftovers.taken()   # what an error or a success could not clean up either
        if left:
            print(f"envgen: {leftovers.sentence(left)}", file=sys.stderr)
        sys.stdout, sys.stderr = streams
        for signum, handler in previous.items():
            signal.signal(signum, handler)


if __name__ == "__main__":
    sys.exit(main())
