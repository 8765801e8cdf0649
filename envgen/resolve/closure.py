"""Stack → its closure: every distribution the image's environment will hold, by exact
version and the sha256 of the exact file pip picks for the image's Python and platform.

Resolution is uv's resolver (`uv pip compile --python-version --python-platform`): it
resolves for a target interpreter and platform other than this host's, and reads wheel
metadata with HTTP range requests where an index has no PEP 658 files, so a CUDA stack
resolves without downloading gigabytes. The file and its hash then come from the index's
JSON simple API (PEP 691), chosen by wheel-tag rank the way pip chooses.

Bundled stacks ship their closures in `matrices/closures/` (written by
`envgen matrix refresh closures`, reviewed in diffs): building them needs no resolver run. Any
other spec resolves once and is cached under ENVGEN_HOME by the sha256 of its inputs."""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import time
from pathlib import Path

# Only resolving a closure needs the resolver, the index client and the wheel-tag rules
# (subprocess, urllib, packaging.tags): they are imported where used, so rendering a stored
# closure starts without them.
from ..core import home as state
from ..core.errors import EnvironmentMissing, InputError, Unsatisfiable
from ..core.files import write_json
from ..core.model import CLOSURE_VERSION, Closure, Pin, Stack, canonical_name, requirement

SIMPLE_URL = "https://pypi.org/simple"
CA_BUNDLE = "/etc/ssl/certs/ca-certificates.crt"
# What every venv-based image holds besides the stack's own packages: `python -m venv`
# seeds pip and setuptools from the distribution's bundled wheels; the first install step
# replaces them with these hash-pinned ones, so nothing in the image goes unpinned.
VENV_TOOLS = ("pip", "setuptools")

NAME = re.compile(r"[A-Za-z0-9]([A-Za-z0-9._-]{0,98}[A-Za-z0-9])?")
VERSION = re.compile(r"[0-9][0-9A-Za-z.+!_-]{0,59}")
SHA256 = re.compile(r"[0-9a-f]{64}")
FILENAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+!-]{0,199}\.(whl|tar\.gz|zip)")
KEY = re.compile(r"[0-9a-f]{64}")


def stack_index(stack) -> str:
    """The simple index a stack's wheels come from: its own, else ENVGEN_PYPI_SIMPLE, else
    PyPI's; no trailing slash."""
    return (stack.index_url or os.environ.get("ENVGEN_PYPI_SIMPLE", SIMPLE_URL)).rstrip("/")


def constraints_for(stack: Stack) -> list[str]:
    """Constraints that keep transitive CUDA libraries on the stack's CUDA line. A wheel
    that pins its CUDA libraries but not nvJitLink (torch 2.4's cusparse pulls it in) would
    otherwise get whatever CUDA line is newest on build day (inferred from the pins, not
    stated by the wheel)."""
    if not stack.cuda:
        return []
    major, minor = stack.cuda.split(".")[:2]
    name = f"nvidia-nvjitlink-cu{major}"
    pinned = {canonical_name(n) for n, _ in stack.packages}
    cuda_wheels = any(n.startswith("nvidia-") and n.endswith(f"-cu{major}") for n in pinned)
    if not cuda_wheels or canonical_name(name) in pinned:
        return []
    return [f"{name}=={major}.{minor}.*"]


def inputs_for(stack: Stack, resolve: bool = True) -> dict:
    """Everything the closure depends on, and nothing else (its key is their sha256). A
    stack built over another is constrained to that stack's closure, so the two share
    every distribution they have in common, and every lower image layer."""
    if stack.project is not None and not stack.project.pip:
        return inputs_for(stack.plain(), resolve)   # nothing to resolve over the stack
    extras = dict(stack.extras)   # nemo-toolkit[asr]: the extra's dependencies are pinned too
    reqs = sorted(requirement(n, v, extras.get(n, "")) for n, v in stack.pip_packages.items())
    tools = list(VENV_TOOLS) if stack.base.kind != "framework" else []
    constraints = constraints_for(stack)
    extra = {}
    if stack.project is not None:
        # A project's packages go over the plain stack's closure, held as it is: the
        # project image shares every lower layer with the plain image.
        plain = closure_for(stack.plain(), resolve=resolve)[0]
        own = {canonical_name(n) for n, _ in stack.project.pip}   # the team's pin wins
        constraints = sorted({*constraints, *(p.requirement for p in plain.pins
                                              if canonical_name(p.name) not in own)})
        extra = {"project": {"over": plain.key, "apt": list(stack.project.apt),
                             "snapshot": stack.base.snapshot}}
    elif stack.builds_on:
        base = base_closure(stack, resolve)
        loose = {*stack.addons, *stack.unpinned}   # resolved anew, in the add-ons' layer
        constraints += sorted(p.requirement for p in base.pins if p.name not in loose)
    if stack.from_source:   # only then: every other stack's key stays what it was
        extra["from_source"] = sorted(stack.from_source)
    inputs = {"requirements": reqs + tools, "constraints": constraints,
              "python": stack.python, "platform": stack.base.platform,
              "index_url": stack.index_url, **extra}
    # As a stored closure reads back (its file is written with sorted keys): a closure
    # resolved now renders the same closure.json as the same closure read from the cache.
    return json.loads(json.dumps(inputs, sort_keys=True))


def stored_key(stack: Stack, inputs: dict) -> str:
    """The key a stack's closure is stored under: its inputs' sha256, and for a project
    also where its pins' files come from when not from the stack's index by name and
    version (a file or git reference, with its sha256 or commit, or another index). Two
    projects pinning mypkg==1.0 from two different files are two closures. Kept out of the
    inputs themselves: the closure.json a lock rebuilds (from the stack it records, which
    holds no requirement lines) must be the one the build wrote, to the byte."""
    project = stack.project
    sources = sorted(r for r in project.requirements if " @ " in r) if project else []
    indexes = list(project.indexes) if project else []
    if not sources and not indexes:
        return key_of(inputs)
    return key_of({**inputs, "project_sources": {"from": sources, "indexes": indexes}})


def base_closure(stack: Stack, resolve: bool = True) -> Closure:
    """The closure of the stack `stack` is built over (stored, or resolved now)."""
    return closure_for(stack.base_stack(), resolve=resolve)[0]


def key_of(inputs: dict) -> str:
    return hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()


def bundled_dir() -> Path:
    from ..matrix.load import bundled_path
    return bundled_path() / "closures"


def cache_dir() -> Path:
    return state.home() / "closures"


# ---- reading and validating ---------------------------------------------------------------

def parse_closure(data, name: str) -> Closure:
    """A closure from JSON data (a bundled file, the cache or a lock): every value checked,
    since a lock arrives in pull requests. InputError names the file and the field."""
    def bad(what):
        return InputError(f"not a valid closure: {what}", file=name)
    if not isinstance(data, dict):
        raise bad("it must be a JSON object")
    if data.get("closure_version") != CLOSURE_VERSION:
        raise bad(f"closure_version must be {CLOSURE_VERSION}")
    key = data.get("key")
    if not isinstance(key, str) or not KEY.fullmatch(key):
        raise bad("'key' must be 64 hex digits")
    if not isinstance(data.get("inputs"), dict):
        raise bad("'inputs' must be an object")
    platform, python = data["inputs"].get("platform"), data["inputs"].get("python")
    if platform is not None and (not isinstance(platform, str) or
                                 not re.fullmatch(r"[a-z0-9_]{1,60}", platform)):
        raise bad("inputs.platform is not a wheel platform tag (manylinux_2_36_x86_64)")
    if python is not None and (not isinstance(python, str) or
                               not re.fullmatch(r"3\.[0-9]{1,2}", python)):
        raise bad("inputs.python is not a Python version like 3.11")
    created = data.get("created")
    if not isinstance(created, str) or not re.fullmatch(r"(?a)\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ",
                                                        created):
        raise bad("'created' must be a UTC time like 2026-12-01T09:40:00Z")
    pkgs = data.get("packages")
    wanted = data["inputs"].get("requirements")
    if not isinstance(pkgs, list) or (not pkgs and wanted != []):
        raise bad("'packages' must be a list, empty only when nothing was required")
    pins, seen = [], set()
    for i, p in enumerate(pkgs):
        pins.append(parse_pin(p, f"packages[{i}]", bad))
        canon = canonical_name(pins[-1].name)
        if canon in seen:
            raise bad(f"packages[{i}]: {pins[-1].name} is listed twice")
        seen.add(canon)
    stack = data.get("stack", "")
    if not isinstance(stack, str) or (stack and not NAME.fullmatch(stack)):
        raise bad("'stack' must be a stack name")
    resolver = data.get("resolver", "")
    # printable: no line break of any kind (U+2028 ends a line for pip's reader too)
    if not isinstance(resolver, str) or len(resolver) > 200 or not resolver.isprintable():
        raise bad("'resolver' must be one short line")
    # Sorted as inputs_for() gives them: a closure read from a file (a bundled one, written
    # before keys were sorted) and the same closure rebuilt from a lock must render the same
    # closure.json, or the image's payload layer differs between the build and the rebuild.
    inputs = json.loads(json.dumps(data["inputs"], sort_keys=True))
    kernels, build = _kernel_build(data.get("kernel_build"), seen, bad)
    pure = data.get("pure_sdists", [])
    if not isinstance(pure, list) or not all(
            isinstance(n, str) and canonical_name(n) in seen for n in pure):
        raise bad("'pure_sdists' must name packages of the closure")
    return Closure(key=key, inputs=inputs, pins=tuple(pins), resolver=resolver,
                   created=created, stack=stack, kernels=kernels, build_pins=build,
                   pure_sdists=tuple(pure), sdist_build=_sdist_build(data.get("sdist_build"),
                                                                     bad))


def _sdist_build(data, bad) -> tuple[Pin, ...]:
    """A closure's sdist_build: the wheels the builder stage installs to build the project's
    sdists, each pinned by its sha256 (the stage installs them with --only-binary)."""
    if data is None:
        return ()
    if not isinstance(data, dict) or set(data) != {"packages"}:
        raise bad("'sdist_build' must be an object of packages")
    pkgs = data["packages"]
    if not isinstance(pkgs, list) or not pkgs or len(pkgs) > 100:
        raise bad("sdist_build.packages must be a list of 1-100 packages")
    pins = tuple(parse_pin(p, f"sdist_build.packages[{i}]", bad) for i, p in enumerate(pkgs))
    if not all(p.sha256 and p.file and p.file.endswith(".whl") for p in pins):
        raise bad("sdist_build.packages: every file the builder stage installs is a wheel "
                  "pinned by its sha256")
    if len({canonical_name(p.name) for p in pins}) != len(pins):
        raise bad("sdist_build.packages names a package twice")
    return pins


def _kernel_build(data, names: set, bad) -> tuple[tuple[str, ...], tuple[Pin, ...]]:
    """A closure's kernel_build: the sdists (of its own packages) that compile CUDA kernels,
    and the hash-pinned files the stage that builds them installs."""
    if data is None:
        return (), ()
    if not isinstance(data, dict) or set(data) != {"sdists", "packages"}:
        raise bad("'kernel_build' must be an object of sdists and packages")
    sdists, pkgs = data["sdists"], data["packages"]
    if not isinstance(sdists, list) or not sdists or not all(
            isinstance(n, str) and canonical_name(n) in names for n in sdists):
        raise bad("kernel_build.sdists must name packages of the closure")
    if not isinstance(pkgs, list) or not pkgs or len(pkgs) > 100:
        raise bad("kernel_build.packages must be a list of 1-100 packages")
    pins = tuple(parse_pin(p, f"kernel_build.packages[{i}]", bad) for i, p in enumerate(pkgs))
    if not all(p.sha256 for p in pins):
        raise bad("kernel_build.packages: every file the build stage installs is hash-pinned")
    return tuple(sdists), pins


def parse_pin(p, where: str, bad) -> Pin:
    if not isinstance(p, dict):
        raise bad(f"{where} must be an object")
    name, version = p.get("name"), p.get("version")
    if not isinstance(name, str) or not NAME.fullmatch(name):
        raise bad(f"{where}.name is not a distribution name")
    if not isinstance(version, str) or not VERSION.fullmatch(version):
        raise bad(f"{where}.version is not a version")
    file = p.get("file")
    if file is not None and (not isinstance(file, str) or not FILENAME.fullmatch(file)):
        raise bad(f"{where}.file is not a wheel or sdist file name")
    hashes = p.get("hashes")
    if not isinstance(hashes, list) or len(hashes) > 1:
        raise bad(f"{where}.hashes must be a list of at most one sha256")
    sha = None
    if hashes:
        h = hashes[0]
        if not isinstance(h, str) or not h.startswith("sha256:") or \
                not SHA256.fullmatch(h[7:]):
            raise bad(f"{where}.hashes[0] must be sha256:<64 hex digits>")
        sha = h[7:]
    note = p.get("hash_note")
    if note is not None and (not isinstance(note, str) or len(note) > 400
                             or not note.isprintable()):
        raise bad(f"{where}.hash_note must be one short line")
    if sha is None and not note:
        raise bad(f"{where}: {name} has no sha256 and no hash_note saying why")
    return Pin(name=name, version=version, file=file, sha256=sha, note=note)


def load_closure(path: Path) -> Closure:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise InputError(f"cannot read the closure: {e}", file=str(path)) from None
    return parse_closure(data, str(path))


_STORED: dict[tuple, Closure] = {}


def _stored(path: Path) -> Closure:
    """A stored closure, read and checked once per process while its file is unchanged: a
    stack whose own file does not match reads every bundled file, and `render --all` asks
    for many stacks."""
    try:
        st = path.stat()
    except OSError:
        return load_closure(path)   # load_closure says what is wrong with it
    key = (str(path), st.st_mtime_ns, st.st_size, st.st_ino)
    if key not in _STORED:
        _STORED[key] = load_closure(path)
    return _STORED[key]


def find(stack: Stack) -> tuple[Closure, str] | None:
    """The stored closure for this stack's inputs: bundled first, then the user's cache."""
    if stack.project is not None and not stack.project.pip:
        return find(stack.plain())   # nothing over the plain stack: its own closure
    try:
        key = stored_key(stack, inputs_for(stack, resolve=False))
    except InputError:   # the stack it is built over has no stored closure yet
        return None
    bundled = bundled_dir()
    if bundled.is_dir() and stack.project is None:   # a project's closure is never bundled
        # Its own file first (the usual hit: one file read, not all of them); then the
        # others, since another spec can resolve to the same inputs.
        own = bundled / f"{stack.stack}.json"
        paths = [own] if own.is_file() else []
        paths += [p for p in sorted(bundled.glob("*.json")) if p != own]
        for path in paths:
            c = _stored(path)
            if c.key == key:
                return c, f"bundled closure {path.name}"
    cached = cache_dir() / f"{key}.json"
    if cached.is_file():
        c = _stored(cached)
        # Its key recomputed from the inputs it holds: a file copied or edited under another
        # key is passed over (and resolved again), not taken for this stack's closure.
        if c.key == key and stored_key(stack, c.inputs) == key:
            return c, f"cached closure {cached}"
    return None


def closure_for(stack: Stack, resolve: bool = True, progress=lambda _m: None
                ) -> tuple[Closure, str]:
    """(closure, where it came from): stored, or resolved now and cached by its inputs."""
    found = find(stack)
    if found:
        return found
    if not resolve:
        raise InputError(f"no stored closure for {stack.stack} with these inputs; run "
                         f"`envgen closure {stack.stack}` to resolve one")
    progress(f"resolving the full closure of {stack.stack} (once; then cached)")
    c = resolve_closure(stack)
    path = cache_dir() / f"{c.key}.json"
    write_json(path, c.to_json())
    return c, f"resolved now with {c.resolver}, cached as {path}"


# ---- resolving ----------------------------------------------------------------------------

def uv_binary() -> str:
    try:
        from uv import find_uv_bin
        return find_uv_bin()
    except (ImportError, FileNotFoundError):
        found = shutil.which("uv")
        if found:
            return found
    raise EnvironmentMissing("uv is not installed (`pip install uv`); envgen uses its "
                             "resolver for hash-pinned closures")


def _uv_env() -> dict:
    env = dict(os.environ)
    if os.environ.get("ENVGEN_NETRC") and "NETRC" not in env:   # a private index's login
        env["NETRC"] = os.environ["ENVGEN_NETRC"]
    ca = os.environ.get("PIP_CERT") or (CA_BUNDLE if os.path.exists(CA_BUNDLE) else None)
    if ca and "SSL_CERT_FILE" not in env:
        env["SSL_CERT_FILE"] = ca
    return env


# The newest manylinux tag uv's --python-platform names (uv 0.13: manylinux_2_40). A newer
# glibc (trixie's 2.41) installs every wheel a 2.40 system does: no wheel asks for more yet.
UV_NEWEST_GLIBC = (2, 40)


def _uv_platform(platform: str) -> str:
    """uv's --python-platform for a wheel platform: manylinux_2_36_aarch64 ->
    aarch64-manylinux_2_36 (x86_64 or aarch64, glibc capped at uv's newest)."""
    m = re.fullmatch(r"manylinux_([0-9]+)_([0-9]+)_(x86_64|aarch64)", platform)
    if not m:
        return "x86_64-" + platform.removesuffix("_x86_64")
    glibc = min((int(m.group(1)), int(m.group(2))), UV_NEWEST_GLIBC)
    return "%s-manylinux_%d_%d" % (m.group(3), *glibc)


class HostBuildRefused(InputError):
    """uv would have run an sdist's build backend on this machine, and that was refused
    (ENVGEN_NO_HOST_BUILDS=1, init --from --no-source-builds); `packages`: the names uv
    gave."""

    def __init__(self, packages, message: str, **kw):
        self.packages = list(packages)
        super().__init__(message, **kw)


def compile_pins(inputs: dict, uv: str | None = None, timeout: int = 900,
                 no_build: bool = False) -> tuple[dict, str]:
    """name → version for the whole closure, from uv's resolver; and uv's version.
    `no_build`: uv builds no sdist to read its requirements (ENVGEN_NO_HOST_BUILDS=1), so
    a package that has only an sdist is refused."""
    import subprocess
    import tempfile
    uv = uv or uv_binary()
    index = inputs["index_url"] or os.environ.get("ENVGEN_PYPI_SIMPLE", SIMPLE_URL)
    with tempfile.TemporaryDirectory(prefix="envgen-closure-") as tmp:
        req, con = Path(tmp) / "requirements.in", Path(tmp) / "constraints.txt"
        req.write_text("\n".join(inputs["requirements"]) + "\n")
        con.write_text("\n".join(inputs["constraints"]) + "\n")
        # uv prefers the versions an existing output file names (unless --upgrade)
        out = Path(tmp) / "preferred.txt"
        out.write_text("".join(f"{x}\n" for x in inputs.get("prefer", ())))
        platform = _uv_platform(inputs["platform"])
        config = ()
        if inputs.get("dependency_metadata"):
            # what an sdist that builds against torch requires, from its own PKG-INFO: uv
            # would otherwise build it to ask, and cannot without torch
            toml = Path(tmp) / "uv.toml"
            toml.write_text("".join(
                f"[[dependency-metadata]]\nname = {json.dumps(d['name'])}\n"
                f"version = {json.dumps(d['version'])}\n"
                f"requires-dist = {json.dumps(d['requires-dist'])}\n\n"
                for d in inputs["dependency_metadata"]))
            config = ("--config-file", str(toml))
        argv = [uv, "pip", "compile", str(req), "--constraint", str(con),
                "--python-version", inputs["python"], "--python-platform", platform,
                # a team's sdist-only package is built in the project's builder stage
                *(() if inputs.get("sdists") else ("--only-binary", ":all:")),
                *(("--no-build",) if no_build else ()),
                # uv reads such a package's metadata from its sdist's PKG-INFO
                *(a for n in inputs.get("from_source", ()) for a in ("--no-binary", n)),
                "--no-header", "--no-annotate", "--no-config", *config,
                *(("--output-file", str(out)) if inputs.get("prefer") else ()),
                "--index-url", index, "--quiet", "--cache-dir", str(Path(tmp) / "uv-cache"),
                *(a for x in inputs.get("extra_index_urls", ()) for a in
                  ("--extra-index-url", x)),
                *(a for x in inputs.get("find_links", ()) for a in ("--find-links", x))]
        try:
            # in the throw-away folder: an sdist uv builds to read its metadata runs its own
            # setup.py, and what that writes beside itself goes with the folder
            r = subprocess.run(argv, capture_output=True, text=True, timeout=timeout,
                               env={**_uv_env(), "PWD": tmp}, cwd=tmp)
        except subprocess.TimeoutExpired:
            raise EnvironmentMissing(f"uv did not resolve within {timeout} s (is {index} "
                                     f"reachable?)") from None
        uv_version = subprocess.run([uv, "--version"], capture_output=True, text=True,
                                    timeout=30).stdout.strip()
        resolved = out.read_text() if r.returncode == 0 and inputs.get("prefer") else r.stdout
    if r.returncode != 0:
        text = " ".join(line.strip() for line in r.stderr.strip().splitlines()[-6:])[:600]
        if no_build and "building from source is disabled" in r.stderr:
            held = sorted(set(re.findall(r"Wheels are required for `([^`]{1,100})`",
                                         r.stderr)))
            raise HostBuildRefused(
                held, f"{', '.join(held) or 'a requirement'} has no wheel for Python "
                f"{inputs['python']} {inputs['platform']}, and ENVGEN_NO_HOST_BUILDS=1 "
                f"forbids running an sdist's build backend on this machine to read its "
                f"requirements; pin a release with a wheel, or unset it where the file is "
                f"trusted")
        if "No solution found" in r.stderr or "unsatisfiable" in r.stderr:
            raise Unsatisfiable(f"uv found no closure for {', '.join(inputs['requirements'])} "
                                f"on Python {inputs['python']} {inputs['platform']}: {text}")
        extra = [x for x in inputs.get("extra_index_urls", ()) if x]
        where = index + (f" and {', '.join(extra)}" if extra else "")   # every index asked
        raise EnvironmentMissing(f"uv could not resolve from {where}: {text}")
    pins = {}
    for line in resolved.splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        name, sep, version = line.partition("==")
        if not sep or not NAME.fullmatch(name.strip()) or not VERSION.fullmatch(
                version.split(";")[0].strip()):
            raise EnvironmentMissing(f"uv printed a line envgen cannot read: {line[:120]!r}")
        pins[name.strip()] = version.split(";")[0].strip()
    return pins, uv_version


def fetch_json(url: str) -> dict:
    """An index's simple page as PEP 691 JSON: asked for as JSON, and read from the HTML
    page (PEP 503, with `#sha256=` fragments, as PyTorch's per-variant indexes and most
    mirrors serve it) when the index has no JSON form. LookupError for 404, OSError
    otherwise."""
    import urllib.error
    import urllib.request

    from ..core import fetching
    req = urllib.request.Request(url, headers={
        "Accept": "application/vnd.pypi.simple.v1+json, text/html;q=0.1",
        "User-Agent": "envgen"})
    try:
        with fetching.urlopen(req, timeout=30) as r:
            kind, answered = r.headers.get("Content-Type", ""), r.geturl()
            body = _read_by(r, 32 * 1024 * 1024, PAGE_S)
    except urllib.error.HTTPError as e:
        if e.code == 404:
            raise LookupError(url) from e
        raise OSError(f"HTTP {e.code}") from e
    if "json" in kind:
        try:
            data = json.loads(body)
        except (ValueError, RecursionError) as e:
            raise OSError(f"not a JSON simple index: {str(e)[:80]}") from None
        if not isinstance(data, dict) or not isinstance(data.get("files", []), list):
            raise OSError("not a JSON simple index: its page has no list of files")
        return data
    return simple_html(body.decode("utf-8", "replace"), answered)


PAGE_S = 120   # the most one index page may take, however slowly its bytes arrive


def _read_by(response, limit: int, seconds: float) -> bytes:
    """The page `response` answers, at most `limit` bytes, within `seconds` in all (an
    OSError otherwise, as for an index that does not answer)."""
    from ..core import fetching
    try:
        return b"".join(fetching.chunks(response, limit, seconds))
    except fetching.StreamLimit as e:
        raise OSError(f"the page {e}") from None


_ANCHOR = re.compile(r"<a\s", re.IGNORECASE)
_HREF = re.compile(r"\shref\s*=\s*(?:\"([^\"]*)\"|'([^']*)'|([^\s\"'>]+))", re.IGNORECASE)


def simple_html(text: str, page: str = "") -> dict:
    """A PEP 503 page as the PEP 691 shape: {"files": [{"filename", "url", "hashes"}]},
    each URL made absolute against `page`. Linear in the page: each anchor's tag is read
    from its `<a ` to the next `>`, and a tag that never closes ends the page (a regex
    that looked for the end from every `<a ` took seconds on 64 KiB of them)."""
    import html
    import urllib.parse
    files, pos = [], 0
    while (start := _ANCHOR.search(text, pos)) is not None:
        end = text.find(">", start.end())
        if end < 0:
            break
        pos = end + 1
        href = _HREF.search(text, start.end() - 1, end)
        if href is None:
            continue
        url, _, fragment = html.unescape(next(g for g in href.groups() if g is not None)
                                         ).partition("#")
        name = urllib.parse.unquote(url.rsplit("/", 1)[-1].split("?")[0])
        algo, _, digest = fragment.partition("=")
        files.append({"filename": name, "url": urllib.parse.urljoin(page, url),
                      "hashes": {algo: digest} if algo == "sha256" and digest else {}})
    return {"files": files}


def platform_tags(python: str, platform: str = "manylinux_2_36_x86_64") -> tuple[str, ...]:
    """Wheel tags CPython `python` accepts on glibc x86_64 (or aarch64) Linux, most
    preferred first."""
    from packaging.tags import compatible_tags, cpython_tags
    major, minor = (int(x) for x in python.split("."))
    m = re.fullmatch(r"manylinux_2_([0-9]+)_(x86_64|aarch64)", platform)
    glibc = int(m.group(1)) if m else 17
    arch = m.group(2) if m else "x86_64"
    plats = [f"manylinux_2_{g}_{arch}" for g in range(glibc, 4, -1)]
    legacy = (("manylinux2014", 17), ("manylinux2010", 12), ("manylinux1", 5)) \
        if arch == "x86_64" else (("manylinux2014", 17),)
    plats += [f"{p}_{arch}" for p, g in legacy if g <= glibc] + [f"linux_{arch}"]
    return tuple(str(t) for t in [*cpython_tags((major, minor), platforms=plats),
                                  *compatible_tags((major, minor), platforms=plats)])


def pick_file(files: list, name: str, version: str, tags: tuple[str, ...]):
    """(file entry, is_sdist) pip would choose for name==version: the best-ranked
    compatible wheel, else the sdist; (None, False) when there is neither."""
    from packaging.utils import (
        InvalidSdistFilename,
        InvalidWheelFilename,
        parse_sdist_filename,
        parse_wheel_filename,
    )
    from packaging.version import InvalidVersion, Version
    want, rank = canonical_name(name), {t: i for i, t in enumerate(tags)}
    try:
        ver = Version(version)
    except InvalidVersion:
        return None, False
    best, sdist = None, None
    # what a pin may name: a plain file name (no path, quote or shell character), and a
    # file that is not yanked, unless only yanked ones are there (as pip chooses)
    usable = [f for f in files if isinstance(f, dict) and isinstance(f.get("filename"), str)
              and FILENAME.fullmatch(f["filename"])]
    live = [f for f in usable if not f.get("yanked")]
    for f in live if any(_fits(f, want, ver) for f in live) else usable:
        fn = f["filename"]
        try:
            if fn.endswith(".whl"):
                n, v, _b, ftags = parse_wheel_filename(fn)
                r = min((rank[str(t)] for t in ftags if str(t) in rank), default=None)
                if n == want and v == ver and r is not None and (best is None or r < best[0]):
                    best = (r, f)
            elif fn.endswith((".tar.gz", ".zip")):
                n, v = parse_sdist_filename(fn)
                if n == want and v == ver:
                    sdist = f
        except (InvalidWheelFilename, InvalidSdistFilename, InvalidVersion):
            continue
    return (best[1], False) if best else (sdist, sdist is not None)


def _fits(f: dict, want: str, ver) -> bool:
    """Whether file entry `f` is a file of want==ver at all (any platform)."""
    from packaging.utils import (
        InvalidSdistFilename,
        InvalidWheelFilename,
        parse_sdist_filename,
        parse_wheel_filename,
    )
    fn = f["filename"]
    try:
        n, v = (parse_wheel_filename(fn)[:2] if fn.endswith(".whl")
                else parse_sdist_filename(fn))
    except (InvalidWheelFilename, InvalidSdistFilename, ValueError):
        return False
    return n == want and v == ver


def index_order(extra, index: str) -> list[str]:
    """The indexes uv asks, in its order (first-index): the extra ones, then `index`; a
    trailing slash is the same index."""
    return list(dict.fromkeys([*(u.rstrip("/") for u in extra if u), index]))


def hash_pin(name: str, version: str, python: str, platform: str, index: str,
             fetch=fetch_json, extra: tuple[str, ...] = ()) -> Pin:
    """The exact file of name==version for this interpreter and its sha256, or a Pin with a
    note saying why the index gave none. With `extra` indexes the file comes from the index
    uv took it from: uv's default strategy (first-index) asks the extra indexes in their
    order, then `index`, and takes the first that serves the project at all."""
    order = index_order(extra, index)
    for at in order:
        try:
            data = fetch(f"{at}/{canonical_name(name)}/")
        except LookupError:
            continue   # not on this index: uv asks the next
        except OSError as e:
            return Pin(name, version, note=f"{at} could not be read for {name} ({e})")
        return _pick_pin(data, name, version, python, platform, at)
    where = f"any of {', '.join(order)}" if len(order) > 1 else index
    return Pin(name, version, note=f"{name} is not on {where}")


def _pick_pin(data: dict, name: str, version: str, python: str, platform: str,
              index: str) -> Pin:
    files = data.get("files") if isinstance(data, dict) else None
    if not isinstance(files, list):
        return Pin(name, version, note=f"{index} could not be read for {name} (its page is "
                                       f"not a simple index)")
    chosen, is_sdist = pick_file(files, name, version, platform_tags(python, platform))
    if chosen is None:
        return Pin(name, version, note=f"{index} has no file of {name} {version} for "
                                       f"Python {python} on {platform}")
    hashes = chosen.get("hashes")
    sha = hashes.get("sha256") if isinstance(hashes, dict) else None
    if not isinstance(sha, str) or not SHA256.fullmatch(sha):
        return Pin(name, version, file=chosen["filename"],
                   note=f"the index serves no sha256 for {chosen['filename']}")
    note = "no wheel for this platform: pip builds it from this sdist" if is_sdist else None
    if chosen.get("yanked"):   # the only file there is: said, as pip says it
        why = chosen["yanked"] if isinstance(chosen["yanked"], str) else ""
        note = f"yanked on the index{': ' + why[:100] if why.isprintable() and why else ''}"
    return Pin(name, version, file=chosen["filename"], sha256=sha, note=note)


# Index hosts asked in this process, with why they do not answer (None: they do):
# `render --all` asks download.pytorch.org once, not once per stack that needs it.
_UNREACHABLE: dict[str, str | None] = {}
PROBE_S = 10


def probe_index(index: str, timeout: float = PROBE_S) -> str | None:
    """Why `index` does not answer at all (no DNS name, connection refused or timed out),
    or None when it answers anything (an HTTP error, a certificate uv may yet accept) or is
    not HTTP. Asked once per host and process."""
    import socket
    import ssl
    import urllib.error
    import urllib.parse
    import urllib.request
    parts = urllib.parse.urlsplit(index)
    if parts.scheme not in ("http", "https"):
        return None
    host = f"{parts.scheme}://{parts.netloc}"
    if host not in _UNREACHABLE:
        why = None
        from ..core import fetching
        req = urllib.request.Request(index.rstrip("/") + "/", method="HEAD",
                                     headers={"User-Agent": "envgen"})
        try:
            fetching.urlopen(req, timeout=timeout).close()
        except urllib.error.HTTPError:
            pass   # it answered
        except (urllib.error.URLError, OSError) as e:
            reason = getattr(e, "reason", e)
            if isinstance(reason, ssl.SSLError):
                pass   # it answered; uv reads the CA bundle it is given
            elif isinstance(reason, socket.gaierror):
                why = f"no DNS answer for {parts.hostname}"
            elif isinstance(reason, (TimeoutError, socket.timeout)):
                why = f"no answer within {timeout:g} s"
            else:
                why = " ".join(str(getattr(reason, "strerror", None) or reason).split())[:120]
                why = why[:1].lower() + why[1:]
        _UNREACHABLE[host] = why
    return _UNREACHABLE[host]


def resolve_closure(stack: Stack, uv: str | None = None, fetch=fetch_json,
                    workers: int = 8) -> Closure:
    inputs = inputs_for(stack)
    if not inputs["requirements"]:   # a framework base provides everything: nothing to resolve
        return Closure(key=key_of(inputs), inputs=inputs, pins=(),
                       resolver="none (the base provides every requirement)",
                       created=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                       stack=stack.stack)
    index = (inputs["index_url"] or os.environ.get("ENVGEN_PYPI_SIMPLE", SIMPLE_URL)
             ).rstrip("/")
    why = probe_index(index)
    if why is not None:
        raise EnvironmentMissing(
            f"{stack.stack} has no bundled closure and resolving one needs {index}, which "
            f"does not answer ({why}); the stacks `envgen matrix list` marks bundled build "
            f"without it")
    pins, uv_version = compile_pins(inputs, uv)
    # A stack built over another takes that closure's time: SOURCE_DATE_EPOCH stamps every
    # layer, and the shared lower layers are bit-identical only with the same stamp.
    created = closure_for(stack.plain())[0].created if stack.project is not None else \
        base_closure(stack).created if stack.builds_on else \
        time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    from concurrent.futures import ThreadPoolExecutor
    items = sorted(pins.items(), key=lambda kv: canonical_name(kv[0]))
    with ThreadPoolExecutor(max_workers=workers) as pool:
        hashed = list(pool.map(lambda kv: hash_pin(kv[0], kv[1], inputs["python"],
                                                   inputs["platform"], index, fetch), items))
    return Closure(key=key_of(inputs), inputs=inputs, pins=tuple(hashed),
                   resolver=f"{uv_version}, uv pip compile", created=created,
                   stack=stack.stack)


def index_file(index: str, name: str, wanted) -> Path | None:
    """The first file of `name`'s page on `index` that `wanted(entry)` accepts and that
    names its sha256, fetched once and kept under ENVGEN_HOME/files/SHA256/ (checked against
    that sha256); None when the index does not answer, lists no such file, or serves other
    bytes."""
    from urllib.parse import urljoin

    from .urlref import fetch
    page = f"{index}/{canonical_name(name)}/"
    try:
        data = fetch_json(page)
    except (OSError, LookupError, ValueError):
        return None
    files = data.get("files") if isinstance(data, dict) else None
    if not isinstance(files, list):
        return None

    def sha(f) -> str | None:   # an index's page is not trusted to have the right shapes
        h = f.get("hashes")
        s = h.get("sha256") if isinstance(h, dict) else None
        return s if isinstance(s, str) and SHA256.fullmatch(s) else None
    entry = next((f for f in files if isinstance(f, dict) and isinstance(
        f.get("filename"), str) and sha(f) and wanted(f)), None)
    if entry is None:
        return None
    try:
        return fetch(name, urljoin(page, str(entry.get("url", ""))), sha(entry))[0]
    except (InputError, EnvironmentMissing):
        return None
