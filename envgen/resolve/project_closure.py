"""A team's requirements over a plain stack -> the project's closure (`envgen init --from`,
`envgen resolve` in a project folder): resolved once by uv with the plain stack's pins
preferred, each file pinned by its sha256; beside the pins, the sdists that compile CUDA
kernels and their compiler, the pure-Python sdists, and the build backends of the sdists the
project-build stage builds, each a wheel pinned by hash. Cached under ENVGEN_HOME by the
sha256 of its inputs, like any closure."""
from __future__ import annotations

import json
import os
import re
from pathlib import Path

from ..core.errors import EnvironmentMissing, InputError
from ..core.files import write_json
from ..core.model import Closure, Pin, Stack, canonical_name, requirement

# the resolver, the index and the cache: looked up there at each call (tests replace them)
from . import closure as cl


def project_inputs(stack: Stack, layer) -> dict:
    """The one resolution of a team's requirements over `stack` (the plain stack): its
    requirements and constraints as written, the stack's framework pins and the plain
    closure's CUDA libraries and packaging tools as constraints, everything else free."""
    plain = cl.closure_for(stack, resolve=True)[0]
    extras = dict(stack.extras)
    fixed = {canonical_name(n) for n in stack.pip_packages}
    # the plain closure's CUDA libraries, packaging tools and triton, and the framework's
    # own pins: constraints, so the project's layers go over the plain stack's as they are
    kept = sorted(p.requirement for p in plain.pins
                  if canonical_name(p.name) in fixed or p.name in cl.VENV_TOOLS
                  or p.name.startswith(("nvidia-", "cuda-")) or p.name == "triton")
    from .gitref import archive, references
    git, held = {}, {}
    for name, repo, commit in references(layer.requirements):
        try:
            path, sha, version = archive(name, repo, commit)
        except InputError as e:   # init --from tells it at the team's line
            e.package = name
            raise
        git[name] = {"repo": repo, "commit": commit, "sha256": sha, "version": version}
        held[name] = (version, path)
    from .urlref import fetch
    from .urlref import references as file_references
    files = {}
    for name, url, sha in file_references(layer.requirements):
        path, _sha, version = fetch(name, url, sha)
        files[name] = {"url": url, "sha256": sha, "version": version, "file": path.name}
        held[name] = (version, path)
    from .kernels import metadata_for
    metadata = metadata_for({**kernel_sdists_on_index(stack, layer.requirements), **held})
    own = [r for r in layer.requirements if not (
        " @ " in r and canonical_name(r.split(" @ ")[0].split("[")[0]) in {*git, *files})]
    marks = _markers(layer.requirements, {*git, *files})
    reqs = [*own, *(f"{n}=={g['version']}{marks.get(n, '')}" for n, g in sorted(git.items())),
            *(f"{n}=={f['version']}{marks.get(n, '')}" for n, f in sorted(files.items())),
            *(requirement(n, v, extras.get(n, ""))
                                   for n, v in stack.pip_packages.items()),
            *(f"{n}=={v}" for n, v in layer.pip)]
    tools = list(cl.VENV_TOOLS) if stack.base.kind != "framework" else []
    inputs = {"requirements": reqs + tools,
              "constraints": sorted({*cl.constraints_for(stack), *kept, *layer.constraints}),
              "python": stack.python, "platform": stack.base.platform,
              "index_url": stack.index_url, "extra_index_urls": list(layer.indexes),
              "project_over": plain.key, "sdists": True, **({"git": git} if git else {}),
              **({"files": files} if files else {}),
              **({"dependency_metadata": metadata} if metadata else {}),
              # the plain closure's pins are preferred, not required: a package the team
              # leaves free keeps the plain stack's version (so its layers stay shared),
              # and a team's own pin or range still wins
              "prefer": sorted(p.requirement for p in plain.pins),
              # another index for PyPI's place: a closure from it is another closure
              **({"pypi_simple": os.environ["ENVGEN_PYPI_SIMPLE"]}
                 if os.environ.get("ENVGEN_PYPI_SIMPLE") else {})}
    return json.loads(json.dumps(inputs, sort_keys=True))


def _parsed(requirements):
    """The requirement lines that parse (the rest are uv's to refuse, at their line)."""
    from packaging.requirements import InvalidRequirement, Requirement
    for text in requirements:
        try:
            yield Requirement(text)
        except InvalidRequirement:
            continue


def _markers(requirements, names) -> dict[str, str]:
    """canonical name → ' ; MARKER' of each git or file reference among `names` that has
    one: its exact pin keeps the line's condition (a Windows-only reference stays so)."""
    out = {}
    for req in _parsed(requirements):
        if req.url and req.marker is not None and canonical_name(req.name) in names:
            out[canonical_name(req.name)] = f" ; {req.marker}"
    return out


def kernel_sdists_on_index(stack: Stack, requirements) -> dict[str, tuple[str, Path]]:
    """name → (version, the sdist kept under ENVGEN_HOME) for each known CUDA-kernel package
    the team pins exactly (flash-attn==2.6.3): its PKG-INFO tells uv what it requires,
    which uv cannot ask it without torch. Only for a stack that can compile it (CUDA 13);
    an index that does not answer leaves it to uv, whose failure is then one sentence."""
    from .kernels import KNOWN, cuda_major
    if cuda_major(stack) != "13":
        return {}
    index = cl.stack_index(stack)
    out = {}
    for req in _parsed(requirements):
        name = canonical_name(req.name)
        pins = [s.version for s in req.specifier if s.operator == "=="]
        if name not in KNOWN or req.url or len(pins) != 1 or "*" in pins[0]:
            continue
        path = cl.index_file(index, name, lambda f, v=pins[0]: f["filename"].endswith(
            f"-{v}.tar.gz"))
        if path is not None:
            from .urlref import dist_version
            out[name] = (dist_version(name, path.name), path)
    return out


def project_closure(stack: Stack, layer, resolve: bool = True) -> tuple[Closure, str]:
    """The closure of a team's requirements over the plain `stack`, cached under
    ENVGEN_HOME by the sha256 of its inputs (a second `init --from` or `resolve` of the same
    file reads it back without uv)."""
    inputs = project_inputs(stack, layer)
    key = cl.key_of(inputs)
    cached = cl.cache_dir() / f"{key}.json"
    try:
        stored = cl._stored(cached) if cached.is_file() else None
    except InputError:   # envgen's own cache, written by an older envgen: resolved again
        stored = None
    if stored is not None and stored.key == key == cl.key_of(stored.inputs) and \
            not unpinned_backends(stored, stack):
        return stored, f"cached closure {cached}"
    if not resolve:
        raise InputError(f"the project's requirements over {stack.stack} are not resolved "
                         f"yet; run `envgen resolve`")
    index = (inputs["index_url"] or os.environ.get("ENVGEN_PYPI_SIMPLE", cl.SIMPLE_URL)
             ).rstrip("/")
    why = cl.probe_index(index)
    if why is not None:
        raise EnvironmentMissing(f"resolving the project's requirements needs {index}, "
                                 f"which does not answer ({why})")
    git = inputs.get("git") or {}
    files = inputs.get("files") or {}
    from .gitref import archive
    from .urlref import fetch
    links = sorted({*(str(archive(n, g["repo"], g["commit"])[0].parent)
                      for n, g in git.items()),
                    *(str(fetch(n, f["url"], f["sha256"])[0].parent)
                      for n, f in files.items())})
    refused = os.environ.get("ENVGEN_NO_HOST_BUILDS") not in (None, "", "0")
    pins, uv_version = cl.compile_pins({**inputs, "find_links": links},
                                       **({"no_build": True} if refused else {}))
    from concurrent.futures import ThreadPoolExecutor
    items = sorted(pins.items(), key=lambda kv: canonical_name(kv[0]))

    def pin(kv):
        g = git.get(canonical_name(kv[0]))
        if g is not None:   # the archive of its commit, built in the builder stage
            dist = re.sub(r"[-_.]+", "_", kv[0]).lower()
            return Pin(kv[0], kv[1], file=f"{dist}-{g['version']}.tar.gz", sha256=g["sha256"],
                       note=f"built from git {g['repo']} at {g['commit']}")
        f = files.get(canonical_name(kv[0]))
        if f is not None:   # the file its URL or path names, pinned by its sha256
            return Pin(kv[0], kv[1], file=f["file"], sha256=f["sha256"],
                       note=f"from {f['url']}")
        return cl.hash_pin(kv[0], kv[1], inputs["python"], inputs["platform"], index,
                        extra=tuple(inputs.get("extra_index_urls") or ()))
    with ThreadPoolExecutor(max_workers=8) as pool:
        hashed = list(pool.map(pin, items))
    # a cached closure with an unhashed pin failed every later build of the project
    _unread(hashed)
    kernels, build = _kernels(stack, layer, hashed, index)
    _unread(build)   # the kernel-build stage's compiler and tools, as the pins
    paths = _sdist_paths([p for p in hashed if p.name not in kernels], layer, index)
    pure = _pure_sdists(hashed, paths)
    _tell_host_builds(hashed, paths, inputs)
    sdist_build = _sdist_build_pins(stack, layer, hashed, index, set(kernels), paths)
    c = Closure(key=key, inputs=inputs, pins=tuple(hashed),
                resolver=f"{uv_version}, uv pip compile",
                created=cl.closure_for(stack)[0].created, stack=stack.stack,
                kernels=kernels, build_pins=build, pure_sdists=pure, sdist_build=sdist_build)
    write_json(cached, c.to_json())
    return c, f"resolved now with {c.resolver}, cached as {cached}"


def _unread(pins) -> None:
    """Stop (nothing cached) at a pin the index did not answer for: a passing fault, not a
    fact. uv took each of these from the index: one the index now does not list (or lists
    for no platform of the image) contradicts it, and is not cached as a fact either."""
    unread = next((p for p in pins if not p.sha256 and p.note and any(
        w in p.note for w in (" could not be read for ", " is not on ", " has no file of "))),
        None)
    if unread is not None:
        raise EnvironmentMissing(f"{unread.note}; nothing was cached, so running the "
                                 f"command again asks the index again")


def _sdist_paths(pins, layer, index: str) -> dict[str, Path | None]:
    """canonical name → the file of each hash-pinned sdist among `pins`: the held archive,
    or the index's file (kept under ENVGEN_HOME, checked by its sha256); None when neither.
    Read once for what the closure records of them (pure_sdists, sdist_build)."""
    from .held import held_files
    held = held_files(layer)
    sdists = [p for p in pins if p.sdist and p.sha256]

    # the team's extra indexes first, then the stack's, as hash_pin asked them: the file
    # is the one of that name and sha256, whichever index serves it
    order = cl.index_order(layer.indexes, index)

    def path(p) -> Path | None:
        return held.get(canonical_name(p.name)) or next(
            (got for at in order if (got := cl.index_file(
                at, p.name, lambda f: f["filename"] == p.file
                and f["hashes"]["sha256"] == p.sha256)) is not None), None)
    from concurrent.futures import ThreadPoolExecutor
    with ThreadPoolExecutor(max_workers=8) as pool:
        return dict(zip((canonical_name(p.name) for p in sdists), pool.map(path, sdists),
                        strict=True))


def _tell_host_builds(pins, paths: dict[str, Path | None], inputs: dict) -> None:
    """Say which sdists uv had to build on this machine to read their requirements: those
    that state them in no static form (sdists.static_requirements) and that envgen did not
    tell uv about. Building one runs its setup.py or build backend here, outside any
    container; ENVGEN_NO_HOST_BUILDS=1 refuses that. The final pins only: uv may have built
    other versions of them while it searched."""
    from ..core.progress import note
    from .sdists import static_requirements
    told = {canonical_name(d["name"]) for d in inputs.get("dependency_metadata") or ()}
    ran = [p for p in pins if p.sdist and canonical_name(p.name) not in told and not (
        paths.get(canonical_name(p.name)) is not None
        and static_requirements(paths[canonical_name(p.name)]))]
    if ran:
        names = ", ".join(f"{p.name} {p.version}" for p in ran[:8]) + (
            f" and {len(ran) - 8} more" if len(ran) > 8 else "")
        note(f"uv ran the build backend of {len(ran)} sdist(s) on this machine to read "
             f"requirements they state in no static form: {names}; set "
             f"ENVGEN_NO_HOST_BUILDS=1 where the requirements file is not trusted")


def _pure_sdists(pins, paths: dict[str, Path | None]) -> tuple[str, ...]:
    """The sdists of `paths` that hold no native source; one that cannot be read counts as
    native."""
    from .sdists import needs_compiler
    return tuple(p.name for p in pins if paths.get(canonical_name(p.name)) is not None
                 and not needs_compiler(paths[canonical_name(p.name)]))


def _sdist_build_pins(stack: Stack, layer, pins, index: str, kernels: set,
                      paths: dict[str, Path | None]) -> tuple[Pin, ...]:
    """What the builder stage installs to build the closure's sdists (kernel ones aside,
    which build over torch with tools of their own): each sdist's [build-system] requires,
    read from its file in `paths`, resolved together by uv for the stack's Python and
    platform, each a wheel pinned by its sha256. One that cannot be read or pinned stops the
    resolution with its reason; nothing is cached."""
    from .sdists import build_requires
    # one the index gives no sha256 for is not read: the stage's --require-hashes refuses it
    sdists = [p for p in project_sdists(pins, stack, kernels) if p.sha256]
    if not sdists:
        return ()
    missing = next((p for p in sdists if paths.get(canonical_name(p.name)) is None), None)
    if missing is not None:   # a passing fault: asked again next time
        where = ", ".join(cl.index_order(layer.indexes, index))
        raise EnvironmentMissing(f"the build requirements of the project's sdists: the sdist "
                                 f"{missing.file} could not be fetched from {where}")
    found = [build_requires(paths[canonical_name(p.name)]) for p in sdists]
    why = next((w for w in found if isinstance(w, str)), None)
    if why is not None:   # the sdist's own file says something envgen cannot pin
        raise InputError(f"the build requirements of the project's sdists: {why}")
    extra = tuple(layer.indexes)
    resolved, _uv = cl.compile_pins({
        "requirements": sorted({r for w in found for r in w}), "constraints": [],
        "python": stack.python, "platform": stack.base.platform,
        "index_url": stack.index_url, "extra_index_urls": list(extra)})
    from concurrent.futures import ThreadPoolExecutor
    with ThreadPoolExecutor(max_workers=8) as pool:
        build = tuple(pool.map(lambda kv: cl.hash_pin(kv[0], kv[1], stack.python,
                                                   stack.base.platform, index, extra=extra),
                               sorted(resolved.items())))
    bad = next((p for p in build if not p.sha256 or not (p.file or "").endswith(".whl")), None)
    if bad is not None:
        raise EnvironmentMissing(
            f"the build tool {bad.name} {bad.version} the project's sdists need "
            f"{'has no wheel pinned by its sha256' if not bad.note else bad.note}; the "
            f"builder stage installs its tools as wheels checked by hash")
    return build


def _kernels(stack: Stack, layer, pins, index: str) -> tuple[tuple[str, ...], tuple[Pin, ...]]:
    """The closure's sdists that compile CUDA kernels against torch, and the hash-pinned
    compiler and tools the image's kernel-build stage installs for them; a stack whose CUDA
    has no compiler on PyPI is refused, naming the package."""
    from . import kernels as k
    from .held import held_files
    names = k.kernel_sdists(pins, held_files(layer))
    if not names:
        return (), ()
    if k.cuda_major(stack) != "13" or not k.compiler_requirements(stack, pins):
        raise k.refuse(stack, names[0], layer.source)
    # the compiler at the stack's CUDA release and the build tools, resolved by uv against
    # the closure (what both hold keeps the closure's version), each pinned by its sha256;
    # the closure's own packages are not repeated
    extra = tuple(layer.indexes)
    have = {canonical_name(p.name) for p in pins}
    resolved, _uv = cl.compile_pins({
        "requirements": [*k.compiler_requirements(stack, pins), *k.BUILD_TOOLS],
        "constraints": sorted(p.requirement for p in pins), "python": stack.python,
        "platform": stack.base.platform, "index_url": stack.index_url,
        "extra_index_urls": list(extra)})
    wanted = sorted((n, v) for n, v in resolved.items() if canonical_name(n) not in have)
    from concurrent.futures import ThreadPoolExecutor
    with ThreadPoolExecutor(max_workers=8) as pool:
        build = tuple(pool.map(lambda kv: cl.hash_pin(kv[0], kv[1], stack.python,
                                                   stack.base.platform, index, extra=extra),
                               wanted))
    return tuple(names), build


def project_sdists(pins, stack: Stack, kernels) -> list[Pin]:
    """The sdists among `pins` that the project-build stage builds, the one place that
    decides it (views.install_layers lays the stage out from it, the closure pins their
    backends): not those that compile CUDA kernels (the kernel-build stage) nor the stack's
    own source builds (built over torch in the image, the 6-source layer)."""
    other = {canonical_name(n) for n in (*kernels, *stack.from_source)}
    return [p for p in pins if p.sdist and canonical_name(p.name) not in other]


def unpinned_backends(c: Closure, stack: Stack) -> bool:
    """A closure cached before envgen pinned the build backends of a project's sdists: it
    has sdists to build and no sdist_build. Resolved again when asked for, instead of
    building them with backends from the index unpinned."""
    return not c.sdist_build and any(p.sha256 for p in project_sdists(c.pins, stack,
                                                                      c.kernels))


def store_project(applied: Stack, free: Closure) -> None:
    """Keep the team's closure under the key the project stack's own inputs give, so
    render, build and lock find it without a second resolution. A project that adds no
    pin has the plain stack's own closure: nothing is written under that key."""
    if applied.project is None or not applied.project.pip:
        return
    inputs = cl.inputs_for(applied, resolve=False)
    key = cl.stored_key(applied, inputs)
    path = cl.cache_dir() / f"{key}.json"
    if not path.is_file() or unpinned_backends(cl._stored(path), applied):
        write_json(path, Closure(key=key, inputs=inputs, pins=free.pins,
                                 resolver=free.resolver, created=free.created,
                                 stack=applied.stack, kernels=free.kernels,
                                 build_pins=free.build_pins,
                                 pure_sdists=free.pure_sdists,
                                 sdist_build=free.sdist_build).to_json())
