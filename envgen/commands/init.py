"""`envgen init [STACK]`: write an annotated envgen.yaml in the current folder."""
from __future__ import annotations

import os
import re
from contextlib import contextmanager
from pathlib import Path

from ..core.errors import InputError
from ..core.files import write_atomic
from ..resolve import project
from ..resolve.kernels import KNOWN, NVCC_ON_PYPI
from ._common import load_matrix_for, out_json

# The stack of `make demo`: its closure is bundled (`envgen matrix list`), so a new project
# builds where PyTorch's own indexes are out of reach, and it certifies on a CPU-only host.
DEFAULT_STACK = "pytorch-cu121"


def run(args) -> int:
    path = Path(args.output or project.FILE)
    if (path.exists() or path.is_symlink()) and not args.force:
        raise InputError(f"{path} exists; edit it, or pass --force to write a new one")
    m = load_matrix_for(args)
    if getattr(args, "from_path", None):
        return from_file(args, m, path)
    given = [flag for flag, value in (("--driver", args.driver), ("--gpu", args.gpu),
                                      ("--hosts", args.hosts), ("--python", args.python),
                                      ("--extra", args.extra), ("--group", args.group))
             if value]
    if given:   # they choose among a team's requirements: without --from, none is read
        raise InputError(f"{', '.join(given)} go{'es' if len(given) == 1 else ''} with --from "
                         f"PATH (they choose the stack for a team's requirements); without "
                         f"it, name the stack: envgen init STACK")
    if args.name is not None and not args.name:
        raise InputError("--name is empty; give the image's name (1-63 of a-z 0-9 . _ -)")
    from ..resolve.spec import parse_spec
    from ..resolve.stack import host_from_flags, resolve
    spec = args.spec or DEFAULT_STACK
    stack = resolve(m, parse_spec(spec, m), host_from_flags(m))   # refuses a spec now
    name = args.name or re.sub(r"[^a-z0-9._-]+", "-", Path.cwd().name.lower()).strip("-._")
    if not project.NAME.fullmatch(name or ""):
        raise InputError(f"--name {name!r} must be 1-63 of a-z 0-9 . _ - (it names the image)")
    text = project.init_text(spec if any(c in spec for c in "=<>,") else stack.stack, name)
    write_atomic(path, text)
    loaded = project.load(path)   # what was written reads back as a project
    if args.json:
        out_json({"path": str(path), "stack": loaded.spec, "name": loaded.layer.name})
    else:
        print(f"wrote {path}: stack {loaded.spec}, image envgen/{loaded.layer.name}; "
              f"edit it, then `envgen build`")
    return 0


def from_file(args, m, path: Path) -> int:
    """`init --from PATH`: the team's file read, the stack chosen for the target, the one
    resolution of the whole closure, smoke imports; envgen.yaml written only when all of
    it succeeded."""
    import os
    import tempfile

    from ..core.errors import EnvironmentMissing, Unsatisfiable
    from ..intake import choose, read
    from ..intake.modules import modules
    from ..resolve.closure import HostBuildRefused, closure_for, stack_index
    from ..resolve.stack import host_from_flags
    if args.spec:
        raise InputError("init takes a STACK or --from PATH, not both")
    intake = read(Path(args.from_path), tuple(args.extra), tuple(args.group))
    intake = _pin_files(_pin_git(choose.framework_files(intake, m)))
    for w in intake.requirements:
        if w.kind not in ("index", "git", "url", "path"):
            raise InputError(f"{w.text}: envgen reads this {w.kind} requirement but does not "
                             f"build it yet; put its wheel on an index or pin the release it "
                             f"was published as", file=w.file, line=w.line)
    python = args.python or intake.python
    hosts_file = getattr(args, "hosts", None)
    if hosts_file is not None and (args.driver or args.gpu):
        raise InputError("init --from takes --hosts FILE or --driver/--gpu, not both")
    if hosts_file is not None:
        from ..diff import parse_hosts
        from ..matrix.yamlfile import load_file
        fleet = parse_hosts(load_file(hosts_file, str(hosts_file)), str(hosts_file), m)
        pairs = dict.fromkeys((h.driver, g.name if g else None)
                              for h in fleet for g in (h.gpus or (None,)))
        hosts = [host_from_flags(m, driver=d, gpu=g, python=python) for d, g in pairs]
        target = {"hosts": str(hosts_file),
                  "drivers": sorted({h.driver for h in fleet if h.driver}),
                  "gpus": sorted({g.name for h in fleet for g in h.gpus}) or ["any"]}
    else:
        hosts = [host_from_flags(m, driver=args.driver, gpu=g, python=python)
                 for g in (args.gpu or [None])]
        target = {"driver": args.driver or "any", "gpus": list(args.gpu) or ["any"]}
    stack, spec, why = choose.choose(intake, m, hosts, python)
    name = args.name or re.sub(r"[^a-z0-9._-]+", "-",
                               Path.cwd().name.lower()).strip("-._")
    if not project.NAME.fullmatch(name or ""):
        raise InputError(f"--name {name!r} must be 1-63 of a-z 0-9 . _ - (it names the image)")
    target["python"] = stack.python
    _conda_names(intake)
    intake = _lock_yields(intake, stack)
    folder = path.resolve().parent
    fd, tmp = tempfile.mkstemp(prefix=".envgen-init-", suffix=".yaml", dir=folder)
    os.close(fd)
    try:
        first = choose.text(intake, stack, spec, name, why, target, [])
        Path(tmp).write_text(first)
        with _users_file(tmp, first, intake):
            loaded = project.load(Path(tmp))
        try:
            with _host_builds(refused=getattr(args, "no_source_builds", False)):
                applied = project.apply(stack, loaded.layer)
        except HostBuildRefused as e:
            raise _refused_build_sentence(e, intake, stack) from None
        except Unsatisfiable as e:
            raise _sentence(e, intake, stack, args.verbose) from None
        except EnvironmentMissing as e:
            raise _kernel_sentence(e, intake, args.verbose, stack) or \
                _file_sentence(e, intake) or e from None
        except InputError as e:   # a CUDA-kernel sdist this stack cannot compile
            w = next((w for w in intake.requirements
                      if w.name == getattr(e, "package", None)), None)
            if w is None:
                raise
            raise InputError(f"{w.text}: {e.message}", file=w.file, line=w.line) from None
        closure = closure_for(applied)[0]   # stored by project.apply: read it once
        _check_hashes(intake, closure)
        _check_builds(intake, closure, applied,
                      not getattr(args, "no_source_builds", False))
        direct = {w.name for w in intake.requirements if not w.constraint}
        index = stack_index(stack)
        mods, notes = modules(closure.pins, direct, index,
                              local=project.held_files(applied.project))
        # the framework first: an extension built against torch loads torch's libraries
        # (libc10.so) only once torch is imported
        first = applied.framework_package.replace("-", "_")
        mods = sorted(mods, key=lambda m: m != first)
        smoke = ["python", "-c", "import " + ", ".join(mods)] if mods else []
        archs, built = _kernels(closure, applied, hosts)
        notes += built + _sdist_notes(closure, applied)
        text = choose.text(intake, stack, spec, name, why + notes, target, smoke, archs)
        write_atomic(path, text)
    finally:
        Path(tmp).unlink(missing_ok=True)
    loaded = project.load(path)
    layer = applied.project
    out = {"path": str(path), "from": intake.path, "kind": intake.kind,
           "stack": applied.stack, "spec": spec, "name": name,
           "reasons": [*why, *applied.reasons], "notes": list(intake.notes) + notes,
           "requirements": len(loaded.layer.requirements),
           "project_pins": dict(layer.pip), "smoke": smoke}
    if args.json:
        out_json(out)
    else:
        print(f"read {intake.path} ({intake.kind}): {len(loaded.layer.requirements)} "
              f"requirement(s), {len(loaded.layer.constraints)} constraint(s)")
        for n in out["notes"]:
            print(f"  note: {n}")
        print(f"stack {applied.stack}: {applied.framework_package} {applied.version} "
              f"({applied.variant}), Python {applied.python} (spec {spec})")
        for r in out["reasons"]:
            print(f"  why: {r}")
        print(f"{len(layer.pip)} distribution(s) in the project's own layer; smoke: "
              f"{' '.join(smoke) or '(none)'}")
        print(f"wrote {path}: image envgen/{name}; then `envgen build --certify`")
    return 0


def _kernels(closure, applied, hosts) -> tuple[list[str], list[str]]:
    """The compute capabilities the closure's CUDA-kernel sdists are compiled for (the
    target GPUs'), and a note per sdist with the build time to expect."""
    if not closure.kernels:
        return [], []
    from packaging.version import Version

    from ..core.model import canonical_name
    from ..resolve.kernels import arch_list, cu_files, estimate
    archs = sorted({h.cc for h in hosts if h.cc}, key=Version)
    from ..resolve.project_closure import kernel_sdists_on_index
    held = {n: path for n, (_v, path) in kernel_sdists_on_index(
        applied, applied.project.requirements).items()}
    held.update(project.held_files(applied.project))
    listed = ";".join(archs) or arch_list(applied)
    notes = []
    for name in closure.kernels:
        path = held.get(canonical_name(name))
        files = cu_files(path) if path is not None else None
        notes.append(f"{name} compiles CUDA kernels: built in the image's kernel-build stage "
                     f"with NVIDIA's nvcc wheels for compute capabilities {listed}; "
                     f"{estimate(files, listed)}")
    return archs, notes


def _sdist_notes(closure, applied) -> list[str]:
    """One note for the sdists the project-build stage builds, naming the build backends
    the closure pins for them."""
    from ..resolve.project_closure import project_sdists
    sdists = project_sdists(closure.pins, applied, closure.kernels)
    if not sdists:
        return []
    names = ", ".join(f"{p.name} {p.version}" for p in sdists)
    if closure.sdist_build:
        how = "with " + ", ".join(f"{p.name} {p.version}" for p in closure.sdist_build) + \
            ", each a wheel checked by its sha256"
    else:
        how = "with backends from the index, unpinned (a closure from before envgen pinned them)"
    return [f"built from sdists in the image's project-build stage (no wheel for this "
            f"image): {names}; {how}"]


def _sentence(e, intake, stack, verbose: bool):
    """uv found no closure: one sentence naming the team's line uv's output names first."""
    from ..core.errors import Unsatisfiable
    text = e.message
    reason = text.split(": ", 1)[1] if ": " in text else text
    core = re.search(r"(Because .*?)(?:And because|$)", reason)
    short = (core.group(1) if core else reason)[:300].strip().rstrip(".,")

    def naming(words: str) -> list:
        return [w for w in intake.requirements if re.search(
            rf"(?<![A-Za-z0-9_.-]){re.escape(w.name)}(?![A-Za-z0-9_-])", words.lower())]
    # the line uv's reason names first; else any line its whole output names
    named = naming(short) or naming(text)
    head = f"{named[0].text} cannot be installed over {stack.framework_package} " \
        f"{stack.version} ({stack.variant}) on Python {stack.python}" if named else \
        f"the requirements cannot be installed over {stack.stack} on Python {stack.python}"
    w = named[0] if named else None
    broken = w is not None and w.kind in ("path", "url", "git") and re.search(
        r"invalid package format|failed to (read|extract|build)", short, re.I)
    # a lock is written by its tool: what changes is the requirement it was locked from
    fix = ("change the project's requirement that needs it and lock again (uv lock), or "
           "choose another --python") if intake.kind in ("uv.lock", "pylock.toml") else \
        "loosen that pin, or choose another --python"
    msg = f"{head}: {short}; " + ("fix or replace that file" if broken else fix)
    if verbose:
        msg += f" (uv: {reason})"
    w = named[0] if named else None
    return Unsatisfiable(msg, file=w.file if w else intake.path, line=w.line if w else None)


def _file_sentence(e, intake):
    """uv could not read or build a file the team's own line names (a wheel or sdist by
    path or URL, a git reference's archive): bad input at that line (exit 2), not the
    index being away; None for any other failure."""
    text = e.message
    if "uv could not resolve" not in text:
        return None
    named = [w for w in intake.requirements if w.kind in ("path", "url", "git") and re.search(
        rf"(?<![A-Za-z0-9_.-]){re.escape(w.name)}(?![A-Za-z0-9_-])",
        text.lower().replace("_", "-"))]
    if not named:
        return None
    w = named[0]
    reason = text.split("error: ", 1)[-1]
    return InputError(f"{w.name}: the file this line names cannot be used: "
                      f"{' '.join(reason.split())[:300]}", file=w.file, line=w.line)


def _kernel_sentence(e, intake, verbose: bool, stack=None):
    """uv stopped at a package whose sdist builds CUDA kernels: one sentence at the team's
    line, saying why (where nvcc would come from for the stack's CUDA) and what to give
    instead; None for any other failure."""
    text = e.message.replace("_", "-").lower()

    def stopped_at(name):   # "`flash-attn@2.6.3` depends on `torch`, but doesn't declare it"
        at = rf"`{re.escape(name)}(@[^`]*)?`"
        return bool(re.search(at + r" depends on `torch`", text) or (
            name in KNOWN and re.search(at, text)))
    named = [w for w in intake.requirements if stopped_at(w.name)]
    if not named:
        return None
    w = named[0]
    cuda = str(getattr(stack, "cuda", None) or "")
    nvcc = NVCC_ON_PYPI.get(cuda.split(".")[0])
    why = (f"; {nvcc}, so {stack.stack} (CUDA {cuda}) cannot build it"
           if nvcc and stack is not None else "")
    if stack is not None and cuda.split(".")[0] == "13":
        why = (f"; {stack.stack} (CUDA {cuda}) compiles such sdists with NVIDIA's nvcc "
               f"wheels, but uv cannot read what this one requires without building it over "
               f"torch (its sdist states no metadata 2.2): pin it exactly (envgen then reads "
               f"its sdist's PKG-INFO), or pin a release whose sdist states them")
    msg = (f"{w.text}: {w.name} has no wheel on the index for this platform, and its sdist "
           f"compiles CUDA kernels against torch (it imports torch and runs nvcc to build){why}"
           f": give its prebuilt wheel for this torch, CUDA and Python as "
           f"`{w.name} @ https://.../FILE.whl#sha256=...` or a local wheel path, or drop it")
    if verbose:
        msg += f" (uv: {e.message})"
    return InputError(msg, file=w.file, line=w.line)


def _check_hashes(intake, closure) -> None:
    """A hash the team's file gives must be the file envgen installs."""
    from packaging.utils import canonicalize_name
    pins = {canonicalize_name(p.name): p for p in closure.pins}
    for w in intake.requirements:
        p = pins.get(w.name)
        if w.hashes and p is not None and p.sha256 and p.sha256 not in w.hashes:
            raise InputError(f"{w.text}: envgen installs {p.file} (sha256 {p.sha256[:12]}...), "
                             f"whose hash is not one the file lists; update the --hash lines "
                             f"(or the lock) for {p.name} {p.version}", file=w.file,
                             line=w.line)


@contextmanager
def _users_file(tmp: str, written: str, intake):
    """An error placed in the temporary envgen.yaml init writes and reads back is placed at
    the team's file and line its entry came from (each entry's `# FILE:LINE`): the
    temporary file is gone when the error is read. Its text is masked as every echo is."""
    from ..core.errors import EnvgenError
    from ..intake.model import hidden
    try:
        yield
    except EnvgenError as e:
        if e.file is None or Path(e.file).name != Path(tmp).name:
            raise
        lines = written.splitlines()
        at = lines[e.line - 1] if e.line and 0 < e.line <= len(lines) else ""
        where = re.search(r"#\s+(.+):([0-9]+)$", at)
        raise InputError(hidden(e.message), file=where.group(1) if where else intake.path,
                         line=int(where.group(2)) if where else None) from None


@contextmanager
def _host_builds(refused: bool):
    """--no-source-builds: uv builds no sdist on this machine while it resolves (it would
    run the sdist's own build backend here to read what it requires)."""
    if not refused:
        yield
        return
    before = os.environ.get("ENVGEN_NO_HOST_BUILDS")
    os.environ["ENVGEN_NO_HOST_BUILDS"] = "1"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("ENVGEN_NO_HOST_BUILDS", None)
        else:
            os.environ["ENVGEN_NO_HOST_BUILDS"] = before


def _check_builds(intake, closure, stack, source_builds: bool = True) -> None:
    """A team's pin with wheels for other Pythons but none for the image's is a Python
    mismatch, not a package to compile: one sentence naming the Pythons it was built for.
    Without `source_builds` (--no-source-builds), any other distribution of the closure that
    would be built from its sdist is refused, at the team's line that asked for it."""
    from ..resolve.closure import stack_index
    index = stack_index(stack)
    for p in closure.pins:
        w = _wanted(intake, p.name)
        if w is None or not p.sdist:
            continue
        mismatch = _python_mismatch(w, p.name, p.version, p.sha256, index, stack)
        if mismatch is not None:
            raise mismatch
    for p in closure.pins:
        w = _wanted(intake, p.name)
        if p.sdist and w is not None and w.origin == "conda":
            raise _at_line(intake, p.name, f"{p.version} would be built from its sdist "
                           f"({p.file}), and its name came only from conda's "
                           f"{w.name}: envgen builds no such sdist; name the PyPI package "
                           f"that carries it, with a wheel")
    # said after a Python mismatch, which no source build would mend
    if not source_builds:
        for p in closure.pins:
            if p.sdist:
                raise _at_line(intake, p.name, f"{p.version} would be built from its sdist "
                               f"({p.file}) and --no-source-builds refuses that: pin a release "
                               f"with a wheel for Python {stack.python} on Linux, or give a "
                               f"wheel URL with its sha256")


def _lock_yields(intake, stack):
    """A uv.lock's pins of the packages the stack itself pins (the framework's own CUDA
    libraries, resolved by uv for whatever torch wheel the lock took) yield to the stack's,
    said in a note: the stack decides them, and the lock's would contradict its closure."""
    if intake.kind != "uv.lock":
        return intake
    from packaging.utils import canonicalize_name

    from ..core import record
    from ..core.errors import EnvgenError
    from ..resolve.closure import closure_for
    try:
        pins = {canonicalize_name(p.name): p.version for p in closure_for(stack)[0].pins}
    except EnvgenError:
        return intake   # the resolution below says why there is no closure
    pins.update({canonicalize_name(n): v for n, v in stack.packages})
    kept, gave = [], []
    for w in intake.requirements:
        have = pins.get(w.name)
        locked = w.text.split("==", 1)[1].split(";")[0].strip() if "==" in w.text else None
        if w.constraint and have and locked and locked.split("+")[0] != have.split("+")[0]:
            gave.append(f"{w.name} {locked} → {have}")
            continue
        kept.append(w)
    if not gave:
        return intake
    note = (f"{intake.path}: {len(gave)} locked pin(s) of packages the stack pins yield to "
            f"{stack.stack}'s: {', '.join(gave)}")
    return record.replace(intake, requirements=tuple(kept), notes=intake.notes + (note,))


def _conda_names(intake) -> None:
    """A conda package taken from PyPI under its own name (conda's ffmpeg, PyPI's unrelated
    ffmpeg sdist) must be a PyPI project with wheels: one without is refused at its line
    before uv could run its build backend here to read it."""
    from ..resolve.closure import SIMPLE_URL, fetch_json
    index = os.environ.get("ENVGEN_PYPI_SIMPLE", SIMPLE_URL).rstrip("/")
    for w in intake.requirements:
        if w.origin != "conda":
            continue
        try:
            files = fetch_json(f"{index}/{w.name}/").get("files") or []
        except LookupError:
            files = []
        except OSError:
            continue   # the index away: the resolution says so, exit 3
        if not any(str(f.get("filename", "")).endswith(".whl") for f in files
                   if isinstance(f, dict)):
            raise InputError(f"{w.text}: conda's {w.name} was taken from PyPI under the same "
                             f"name, where {w.name} has no wheel (at most an sdist, which "
                             f"envgen does not build for a name that came only from conda): "
                             f"name the PyPI package that carries it in the pip: section, "
                             f"or put a Debian package in envgen.yaml's apt:", file=w.file,
                             line=w.line)


def _wanted(intake, name: str):
    """The team's line that asks for `name`, or None."""
    from packaging.utils import canonicalize_name
    return next((w for w in intake.requirements if w.name == canonicalize_name(name)), None)


def _at_line(intake, name: str, why: str) -> InputError:
    """'LINE: NAME WHY' at the team's line that asked for `name`, or naming it as a
    dependency of the file."""
    w = _wanted(intake, name)
    asked = w.text if w else f"{name} (a dependency of the requirements)"
    return InputError(f"{asked}: {name} {why}", file=w.file if w else intake.path,
                      line=w.line if w else None)


def _wheel_pythons(index: str, name: str, version: str, sha256: str | None) -> set | None:
    """The CPython minor versions the index has wheels of `name` `version` for (kept in
    ENVGEN_HOME by the sdist's sha256 when there is one); None when the index cannot say."""
    import json

    from packaging.utils import canonicalize_name, parse_wheel_filename

    from ..core import home
    from ..resolve.closure import fetch_json
    memo = home.home() / "cache" / "wheel-pythons" / f"{sha256}.json" if sha256 else None
    try:
        pys = set(json.loads(memo.read_text())) if memo else None
    except (OSError, ValueError, TypeError):
        pys = None
    if pys is None:
        try:
            files = fetch_json(f"{index}/{canonicalize_name(name)}/").get("files") or []
        except (OSError, LookupError):
            return None
        pys = set()
        for f in files:
            try:
                _n, v, _b, tags = parse_wheel_filename(f.get("filename", ""))
            except Exception:   # not a wheel, or a name packaging refuses
                continue
            if str(v) == version:
                pys |= {int(t.interpreter[3:]) for t in tags
                        if re.fullmatch(r"cp3\d+", t.interpreter)}
        if memo is not None:
            from ..core.files import write_json
            write_json(memo, sorted(pys))
    return pys if all(isinstance(x, int) for x in pys) else None


def _python_mismatch(w, name: str, version: str, sha256, index: str, stack):
    """The sentence for a team's pin whose version has wheels for other Pythons only, at
    its line; None when it has none at all (an sdist alone) or the index cannot say."""
    pys = _wheel_pythons(index, name, version, sha256)
    if not pys:
        return None   # sdist only: built in the builder stage
    want = int(stack.python.split(".")[1])
    below = [m for m in pys if m < want]
    fix = f"python=3.{max(below)} resolves it (--python 3.{max(below)}), or " if below \
        else ""
    return InputError(f"{w.text}: {name} {version} has no build for Python {stack.python} "
                      f"(cp3{min(pys)} to cp3{max(pys)}): {fix}a newer {name} that has one",
                      file=w.file, line=w.line)


def _refused_build_sentence(e, intake, stack):
    """uv refused to build an sdist on this machine (init --from --no-source-builds): one
    sentence at the team's line that asked for it, the Python mismatch first when the
    pinned version has wheels for other Pythons."""
    from packaging.requirements import InvalidRequirement, Requirement

    from ..resolve.closure import stack_index
    name = next((n for n in e.packages if _wanted(intake, n) is not None),
                e.packages[0] if e.packages else None)
    if name is None:
        return InputError(f"{e.message} (--no-source-builds)")
    w = _wanted(intake, name)
    if w is not None:
        try:
            pinned = [x.version for x in Requirement(w.text).specifier if x.operator == "=="]
        except InvalidRequirement:
            pinned = []
        if len(pinned) == 1 and "*" not in pinned[0]:
            mismatch = _python_mismatch(w, name, pinned[0], None, stack_index(stack), stack)
            if mismatch is not None:
                return mismatch
    return _at_line(intake, name, f"has no wheel for Python {stack.python} on Linux that "
                    f"fits, and --no-source-builds refuses building its sdist (uv would run "
                    f"its build backend on this machine even to read what it requires): pin "
                    f"a release with a wheel, or give a wheel URL with its sha256")


def _pin_git(intake):
    """Each git reference pinned to the commit its ref names now (a branch resolves once:
    envgen.yaml records the commit)."""
    from packaging.requirements import Requirement

    from ..core import record
    from ..core.errors import EnvgenError
    from ..resolve.gitref import commit_of, split
    out = []
    for w in intake.requirements:
        if w.kind == "git":
            req = Requirement(w.text)
            try:
                repo, ref = split(req.url)
                commit = commit_of(repo, ref)
            except EnvgenError as e:
                raise InputError(f"{w.text}: {e.message}", file=w.file, line=w.line) from None
            marker = f" ; {req.marker}" if req.marker else ""
            w = record.replace(w, text=f"{_named(req)} @ git+{repo}@{commit}{marker}")
        out.append(w)
    return record.replace(intake, requirements=tuple(out))


def _named(req) -> str:
    """NAME[extra,...] of a requirement: what a pinned URL or commit keeps of the line."""
    return req.name + (f"[{','.join(sorted(req.extras))}]" if req.extras else "")


def _pin_files(intake):
    """Each requirement naming a file by URL or path fetched once and pinned by its sha256
    (`#sha256=` in envgen.yaml); a `--hash` the team's file gives must match it."""
    from packaging.requirements import Requirement

    from ..core import record
    from ..core.errors import EnvgenError
    from ..resolve.urlref import fetch, split
    out = []
    for w in intake.requirements:
        if w.kind in ("url", "path"):
            req = Requirement(w.text)
            try:
                bare, sha = split(req.url)
                _path, digest, _version = fetch(req.name, bare, sha)
            except EnvgenError as e:
                raise type(e)(f"{w.text}: {e.message}", file=w.file, line=w.line) from None
            if w.hashes and digest not in w.hashes:
                raise InputError(f"{w.text}: the file's sha256 is {digest}, not one of the "
                                 f"--hash values the line gives", file=w.file, line=w.line)
            marker = f" ; {req.marker}" if req.marker else ""
            w = record.replace(w, text=f"{_named(req)} @ {bare}#sha256={digest}{marker}")
        out.append(w)
    return record.replace(intake, requirements=tuple(out))
