"""envgen.yaml: a team's project file. It names the stack and what the team adds over it
(its own pinned pip packages, apt packages, files, and a smoke command of its own run
after envgen's payload), and every command that takes a SPEC reads it when no SPEC is
given. Like a lock, it arrives in pull requests: every value is checked, with file:line."""
from __future__ import annotations

import hashlib
import os
import re
import shlex
import stat
from pathlib import Path

from packaging.version import InvalidVersion, Version

from ..core import record
from ..core.errors import InputError, MatrixError, shown
from ..core.model import APP_DIR, ProjectLayer, Stack, canonical_name
from ..core.record import dataclass
from ..matrix.wire import CUDA_ARCH
from ..matrix.wire import ONE_LINE_CHARS as ONE_LINE
from ..matrix.wire import PROJECT_APT as APT
from ..matrix.wire import PROJECT_MAX_ARGS as MAX_ARGS
from ..matrix.wire import PROJECT_MAX_FILES as MAX_FILES
from ..matrix.wire import PROJECT_NAME as NAME
from ..matrix.wire import PROJECT_PIP as PIP
from ..matrix.wire import PROJECT_REL as REL
from .held import file_requirements, git_requirements, held_files  # noqa: F401 (API)

FILE = "envgen.yaml"
KEYS = ("stack", "name", "pip", "apt", "copy", "smoke", "from", "target", "why",
        "requirements", "constraints", "indexes", "cuda_archs")
MAX_REQUIREMENTS = 2000
SKIP = {"__pycache__", ".git", ".hg", ".svn", ".mypy_cache", ".pytest_cache", ".venv"}
MAX_BYTES = 512 * 1024 * 1024


@dataclass(frozen=True)
class Project:
    path: Path
    spec: str
    layer: ProjectLayer
    spec_line: int | None = None   # the line of `stack:`, where a spec that fails is told

    @property
    def root(self) -> Path:
        return self.path.parent


def located(path: Path):
    """The project file that applies: ENVGEN_PROJECT names one ('' for none), else
    ./envgen.yaml when it exists."""
    named = os.environ.get("ENVGEN_PROJECT")
    if named is not None:
        if not named:
            return None
        p = Path(named)
        if not p.is_file():
            raise InputError(f"ENVGEN_PROJECT={shown(named)}: no such file")
        return p
    p = path / FILE
    return p if p.exists() or p.is_symlink() else None


_LOADED: dict[tuple, Project] = {}


def current() -> Project | None:
    """The project of the current folder, loaded and checked; None when there is none.
    Read once per process while the file is unchanged (a command resolving several specs
    does not hash every copied file again); its files are checked again when copied."""
    p = located(Path.cwd())
    if p is None:
        return None
    try:
        st = p.stat()
        key = (str(p.resolve()), st.st_mtime_ns, st.st_size, st.st_ino)
    except OSError:
        return load(p)   # load says what is wrong with it
    if key not in _LOADED:
        _LOADED[key] = load(p)
    return _LOADED[key]


def load(path: Path) -> Project:
    from ..matrix.yamlfile import LDict, LList, load_file
    name = str(path)
    if path.is_symlink():
        raise InputError(f"{name}: is a symbolic link; envgen reads a project file only as a "
                         f"regular file")
    doc = load_file(path, name)

    def bad(msg: str, line: int | None = None):
        raise MatrixError(message=msg, file=name, line=line)

    if not isinstance(doc, LDict):
        bad("a project file is a mapping (run `envgen init` for an annotated one)",
            getattr(doc, "line", None) or 1)
    line = doc.lines.get
    for key in doc:
        if key not in KEYS:
            bad(f"unknown key {shown(key)}; a project file has {', '.join(KEYS)}", line(key))
    spec = doc.get("stack")
    if not isinstance(spec, str) or not spec.strip():
        bad("'stack' must name a stack or a spec, e.g. stack: pytorch-cu121",
            line("stack", doc.line))
    if len(spec) > 200 or any(ord(c) < 32 for c in spec):
        bad("'stack' is too long or holds control characters", line("stack"))
    title = doc.get("name", path.resolve().parent.name.lower())
    if not isinstance(title, str) or not NAME.fullmatch(title):
        bad(f"'name' {shown(title)} must be 1-63 of a-z 0-9 . _ - (it names the image: "
            f"envgen/NAME)", line("name", doc.line))

    def items(key) -> list:
        value = doc.get(key, [])
        if not isinstance(value, list):
            bad(f"'{key}' must be a list", line(key))
        return list(value), (value.lines if isinstance(value, LList) else [])

    pins, pip_lines = items("pip")
    pip: dict[str, str] = {}
    pip_at: dict[str, int] = {}
    for i, item in enumerate(pins):
        at = pip_lines[i] if i < len(pip_lines) else line("pip")
        m = PIP.fullmatch(item.strip()) if isinstance(item, str) else None
        if not m:
            bad(f"pip entry {shown(item)} must be an exact pin NAME==VERSION (envgen resolves "
                f"its sha256 and its dependencies into the closure)", at)
        try:
            Version(m.group(2))
        except InvalidVersion:
            bad(f"pip entry {shown(item)}: {m.group(2)!r} is not a version", at)
        key = canonical_name(m.group(1))
        if key in pip:
            bad(f"pip entry {shown(item)}: {key} is listed twice", at)
        pip[key] = m.group(2)
        pip_at[key] = at
    apts, apt_lines = items("apt")
    for i, item in enumerate(apts):
        if not isinstance(item, str) or not APT.fullmatch(item):
            bad(f"apt entry {shown(item)} is not a Debian package name (no version: the "
                f"base's dated archive snapshot pins it)",
                apt_lines[i] if i < len(apt_lines) else line("apt"))
    if len(set(apts)) != len(apts):
        bad("an apt package is listed twice", line("apt"))
    copies, copy_lines = items("copy")
    files = _files(path.parent, copies, copy_lines, bad, line("copy"))
    smoke = doc.get("smoke")
    argv: tuple[str, ...] = ()
    if smoke is not None:
        at = line("smoke")
        if isinstance(smoke, str):
            try:
                smoke = shlex.split(smoke)
            except ValueError as e:
                bad(f"'smoke' cannot be split into arguments ({e})", at)
        if not isinstance(smoke, list) or not smoke or len(smoke) > MAX_ARGS or not all(
                isinstance(a, str) and a and len(a) <= 1000 and ONE_LINE.fullmatch(a)
                for a in smoke):   # the lock's and the label's own rule (wire.ONE_LINE)
            bad(f"'smoke' must be a command: a list of 1-{MAX_ARGS} one-line arguments (run "
                f"without a shell), e.g. smoke: [python, app/check.py]", at)
        argv = tuple(smoke)
    reqs = tuple(_requirements(doc, "requirements", items, bad, line))
    cons = tuple(_requirements(doc, "constraints", items, bad, line))
    indexes, index_lines = items("indexes")
    from ..core.logins import has_login, refusal
    for i, url in enumerate(indexes):
        if isinstance(url, str) and has_login(url):
            bad(refusal("indexes entry", url),
                index_lines[i] if i < len(index_lines) else line("indexes"))
        if not isinstance(url, str) or not re.fullmatch(r"https://[A-Za-z0-9._~:/@%+-]{1,500}",
                                                        url):
            bad(f"indexes entry {shown(url)} must be an https URL of a package index",
                index_lines[i] if i < len(index_lines) else line("indexes"))
    archs, arch_lines = items("cuda_archs")
    for i, cap in enumerate(archs):
        if not isinstance(cap, str) or not re.fullmatch(CUDA_ARCH, cap):
            bad(f"cuda_archs entry {shown(cap)} must be a compute capability like 9.0 (what "
                f"a CUDA-kernel sdist is compiled for)",
                arch_lines[i] if i < len(arch_lines) else line("cuda_archs"))
    if len(set(archs)) != len(archs) or len(archs) > 32:
        bad("cuda_archs lists a compute capability twice, or more than 32", line("cuda_archs"))
    layer = ProjectLayer(name=title, pip=tuple(sorted(pip.items())), apt=tuple(sorted(apts)),
                         files=files, smoke=argv, root=str(path.parent), source=name,
                         pip_lines=tuple(sorted(pip_at.items())), requirements=reqs,
                         constraints=cons, indexes=tuple(indexes),
                         cuda_archs=tuple(archs))
    return Project(path=path, spec=spec.strip(), layer=layer, spec_line=line("stack"))


def _requirements(doc, key: str, items, bad, line) -> list[str]:
    """A list of PEP 508 requirement lines (`init --from` writes the team's own): each is
    read by packaging; a URL must be https or file and pinned: a git reference to a commit,
    a file by its sha256 (`URL#sha256=...`)."""
    from packaging.requirements import InvalidRequirement, Requirement
    values, lines = items(key)
    if len(values) > MAX_REQUIREMENTS:
        bad(f"'{key}' holds more than {MAX_REQUIREMENTS} entries", line(key))
    out = []
    for i, item in enumerate(values):
        at = lines[i] if i < len(lines) else line(key)
        if not isinstance(item, str) or len(item) > 4000 or not ONE_LINE.fullmatch(item):
            bad(f"{key} entry {shown(item)} must be one requirement line", at)
        try:
            req = Requirement(item)
        except InvalidRequirement as e:
            bad(f"{key} entry {shown(item)} is not a requirement "
                f"({str(e).splitlines()[0][:100]})", at)
        from ..core.logins import has_login, refusal
        if req.url and has_login(req.url.removeprefix("git+")):
            bad(refusal(f"{key} entry's URL", req.url), at)
        if req.url and not (_pinned_git(req.url) or _pinned_file(req.url)):
            bad(f"{key} entry {shown(item)}: envgen builds requirements from a package index "
                f"with their sha256, git references pinned to a commit "
                f"(git+https://...@<40 hex digits>) and files by https or file URL with their "
                f"sha256 (URL#sha256=<64 hex digits>), as `init --from` writes them", at)
        if re.search(r"\s#", str(req)):   # in a quoted marker value, say
            bad(f"{key} entry {shown(item)} holds ' #', where uv and pip read the rest of "
                f"the line as a comment", at)
        out.append(str(req))
    return out


def _pinned_git(url: str) -> bool:
    from .gitref import COMMIT, split
    if not url.startswith(("git+https://", "git+file://")):
        return False
    try:
        return bool(COMMIT.fullmatch(split(url)[1]))
    except InputError:
        return False


def _pinned_file(url: str) -> bool:
    from .urlref import split
    if url.startswith("git+"):
        return False
    try:
        return split(url)[1] is not None
    except InputError:
        return False






def wheel_files(layer: ProjectLayer) -> list[Path]:
    """The wheels the layer's requirements name by URL or path, as kept under ENVGEN_HOME."""
    return [p for p in held_files(layer).values() if p.name.endswith(".whl")]




def copy_archives(layer: ProjectLayer, into: Path) -> bool:
    """The sdists `git archive` made of the layer's git references and the sdists its
    requirements name by URL or path, into a build context's folder (the builder stage's
    pip checks each against the closure's sha256; wheels go beside the project layer's
    requirements.txt: `wheel_files`)."""
    paths = [p for p in held_files(layer).values() if not p.name.endswith(".whl")]
    for path in paths:
        into.mkdir(parents=True, exist_ok=True)
        (into / path.name).write_bytes(path.read_bytes())
    return bool(paths)


def _files(root: Path, copies: list, lines: list, bad, default_line) -> tuple:
    """(source, destination, sha256, mode) of every file the copy list names, in order of
    destination; a folder is walked (its caches and VCS folders skipped)."""
    out: dict[str, tuple] = {}
    lines_of: dict[str, int | None] = {}
    total = 0
    top = root.resolve()
    for i, item in enumerate(copies):
        at = lines[i] if i < len(lines) else default_line
        if isinstance(item, str):
            src, dest = item, item
        elif isinstance(item, dict) and set(item) <= {"src", "dest"} and "src" in item:
            src, dest = item["src"], item.get("dest", item["src"])
        else:
            bad(f"copy entry {shown(item)} must be a path or {{src: PATH, dest: PATH}}", at)
        for what, value in (("src", src), ("dest", dest)):
            if not isinstance(value, str) or not REL.fullmatch(value) or any(
                    part in ("..", ".") for part in value.split("/")):
                bad(f"copy {what} {shown(value)} must be a relative path inside the project "
                    f"folder (letters, digits, . _ + @ -; no '..')", at)
        source = root / src.rstrip("/")
        try:
            st = source.lstat()
        except OSError:
            bad(f"copy src {shown(src)}: no such file in {root}", at)
        if stat.S_ISLNK(st.st_mode):
            bad(f"copy src {shown(src)} is a symbolic link; copy what it points to instead", at)
        if stat.S_ISDIR(st.st_mode):
            found = []
            # a folder's hidden files and folders (.gitignore, .env, .venv) are not copied:
            # tooling's, or secrets that must not enter a layer; one named alone is refused
            for dirpath, dirnames, filenames in os.walk(source):
                dirnames[:] = sorted(d for d in dirnames if d not in SKIP
                                     and not d.startswith("."))
                for f in sorted(filenames):
                    if not f.startswith("."):
                        found.append(Path(dirpath) / f)
            pairs = [(p, f"{dest.rstrip('/')}/{p.relative_to(source).as_posix()}")
                     for p in found]
        else:   # a dest ending in / is a folder the file goes into, as in a Dockerfile's COPY
            pairs = [(source, f"{dest}{source.name}" if dest.endswith("/") else dest)]
        for p, d in pairs:
            rel = p.relative_to(root).as_posix()
            if not REL.fullmatch(rel) or not REL.fullmatch(d):
                bad(f"copy: {shown(rel)} has a name envgen does not copy (letters, digits, "
                    f". _ + @ - only)", at)
            st = p.lstat()
            if not stat.S_ISREG(st.st_mode) or not p.resolve().is_relative_to(top):
                bad(f"copy: {shown(rel)} is not a regular file inside the project folder", at)
            total += st.st_size
            if len(out) >= MAX_FILES or total > MAX_BYTES:
                bad(f"copy: more than {MAX_FILES} files or {MAX_BYTES >> 20} MiB; put data "
                    f"in a volume (envgen run mounts this folder at /workspace)", at)
            if d in out:
                bad(f"copy: two sources for {APP_DIR}/{d}", at)
            h = hashlib.sha256()
            with open(p, "rb") as fh:
                for chunk in iter(lambda: fh.read(1 << 20), b""):
                    h.update(chunk)
            out[d] = (rel, d, h.hexdigest(), 0o755 if st.st_mode & 0o111 else 0o644)
            lines_of[d] = at
    for d in out:   # a path cannot be a file and the folder of another file at once
        parts = d.split("/")
        clash = next(("/".join(parts[:k]) for k in range(1, len(parts))
                      if "/".join(parts[:k]) in out), None)
        if clash is not None:
            bad(f"copy: {APP_DIR}/{clash} would be a file and the folder of {APP_DIR}/{d}",
                max(lines_of[clash] or 0, lines_of[d] or 0) or None)
    return tuple(out[d] for d in sorted(out))


def apply(stack: Stack, layer: ProjectLayer) -> Stack:
    """The stack with the project's layer over it: its pip pins join the stack's packages
    (a package the stack already pins must agree with it). A project with requirements
    (`init --from`) is resolved first, once and cached: its pins are every distribution
    of that closure the plain closure does not hold as it is."""
    if layer.requirements:
        return _apply_requirements(stack, layer)
    pinned = {canonical_name(n): (n, v) for n, v in stack.packages}
    added = []
    for n, v in layer.pip:
        if n in pinned:
            have = pinned[n][1].split("+")[0]
            if have != v:
                raise InputError(f"project pins {n}=={v}, but {stack.stack} pins {n} {have}; "
                                 f"drop it from the project's pip list (the stack brings it)",
                                 file=layer.source or None,
                                 line=dict(layer.pip_lines).get(n))
            continue
        added.append((n, v))
    what = [f"{len(layer.pip)} pip package(s)"] if layer.pip else []
    what += [f"{len(layer.apt)} apt package(s)"] if layer.apt else []
    what += [f"{len(layer.files)} file(s) in {APP_DIR}"] if layer.files else []
    what += ["its own smoke command"] if layer.smoke else []
    reason = f"project {layer.name}: " + (", ".join(what) or "nothing added") + \
        " over the stack"
    layer = record.replace(layer, pip=tuple(added))
    return stack.replace(packages=stack.packages + tuple(added), project=layer,
                         reasons=stack.reasons + (reason,))


def _apply_requirements(stack: Stack, layer: ProjectLayer) -> Stack:
    from .closure import closure_for
    from .project_closure import project_closure, store_project
    free, _where = project_closure(stack, layer)
    plain = {p.requirement for p in closure_for(stack, resolve=False)[0].pins}
    fixed = {canonical_name(n) for n, _ in stack.packages}
    added = tuple(sorted((p.name, p.version) for p in free.pins
                         if p.requirement not in plain and canonical_name(p.name) not in fixed))
    applied = apply(stack, record.replace(layer, requirements=(), pip=added))
    applied = applied.replace(project=record.replace(applied.project,
                                                     requirements=layer.requirements,
                                                     constraints=layer.constraints,
                                                     indexes=layer.indexes))
    store_project(applied, free)
    return applied


def copy_files(layer: ProjectLayer, into: Path) -> None:
    """Copy the layer's files into `into` (a build context's project/ folder), each checked
    against the sha256 the stack records: a file edited since, or a folder that is not the
    project's, is refused rather than built."""
    root = Path(layer.root or ".")
    for src, dest, sha, mode in layer.files:
        path = root / src
        try:
            data = path.read_bytes() if not path.is_symlink() else None
        except OSError:
            data = None
        if data is None:
            raise InputError(f"project {layer.name}: {src} is not a regular file in "
                             f"{root.resolve()} (run envgen from the project's folder)")
        if hashlib.sha256(data).hexdigest() != sha:
            raise InputError(f"project {layer.name}: {src} changed since the stack was "
                             f"resolved (sha256 differs); run the command again")
        target = into / dest
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        target.chmod(mode)


INIT_TEXT = """\
# envgen.yaml: what `envgen build` builds in this folder, and what `envgen certify` checks.
# Every envgen command that takes a SPEC reads this file when no SPEC is given.

# The stack, as `envgen build` takes it: a name from `envgen matrix list` or a spec
# such as "torch==2.4.1,python=3.11".
stack: {stack}

# The image's name: `envgen build` tags it envgen/NAME:STACK-pyX.Y.
name: {name}

# Your own Python packages, each pinned exactly. envgen resolves them together with the
# stack (so they agree with its pins), hash-pins every file in the closure, and installs
# them in a layer of their own over the stack's layers, which stay those of the plain image.
pip: []
#  - einops==0.8.1

# Debian packages, from the base's dated archive snapshot (no versions: the snapshot pins
# them).
apt: []
#  - git

# Files from this folder, copied to {app}/ (owned by root, read-only to the
# image's user). A folder is copied whole, without __pycache__ or .git.
copy: []
#  - train.py
#  - src: configs/
#    dest: configs/

# Your own check, run after envgen's payload with the same GPU access and no network,
# from /home/envgen, without a shell. Exit 0 passes; anything else fails the certificate.
# smoke: [python, app/train.py, --steps, "20"]
"""


def init_text(stack: str, name: str) -> str:
    """The annotated file; a spec that is not a bare stack name is written as a
    double-quoted YAML string (JSON's form of it), so no character of it is read as YAML."""
    import json
    value = stack if re.fullmatch(r"[A-Za-z][A-Za-z0-9_.-]*", stack) else json.dumps(stack)
    return INIT_TEXT.format(stack=value, name=name, app=APP_DIR)
