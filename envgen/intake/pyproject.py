"""pyproject.toml (PEP 621 `dependencies`, `optional-dependencies` chosen with --extra,
PEP 735 `dependency-groups` chosen with --group, `[tool.uv]` indexes and sources), and
uv.lock / pylock.toml, whose versions and hashes are kept. Read with tomllib; a value's
line is found in the text, since TOML parsers keep none."""
from __future__ import annotations

from pathlib import Path

from packaging.utils import canonicalize_name

from .line import parse
from .model import Intake, Wanted, bad, check_index, check_url, git_parts, show
from .text import line_at, line_of, read


def _toml(path: Path, what: str) -> tuple[dict, str]:
    text = read(path, what)
    try:
        import tomllib
    except ImportError:   # Python 3.10
        from ..core.errors import EnvironmentMissing
        raise EnvironmentMissing(f"reading a {what} needs Python 3.11's tomllib") from None
    try:
        return tomllib.loads(text), text
    except tomllib.TOMLDecodeError as e:
        # tomllib says "(at line N, column M)"
        msg = str(e)
        line = int(msg.rsplit("line ", 1)[1].split(",")[0]) if "at line " in msg else None
        raise bad(f"is not a {what}: not TOML ({msg.split(' (at')[0]})", str(path),
                  line) from None
    except RecursionError:   # tomllib recurses once per nested array or inline table
        raise bad(f"is not a {what} envgen reads: nested too deeply", str(path),
                  None) from None


def _strings(value, what: str, file: str, text: str, tables: bool = False) -> list:
    """A list of requirement strings (and, with `tables`, {include-group = NAME} tables)."""
    kinds = (str, dict) if tables else str
    if not isinstance(value, list) or not all(isinstance(v, kinds) for v in value):
        raise bad(f"{what} must be a list of requirement strings", file,
                  line_of(text, what.split(".")[-1].split()[-1].strip("[]'\"")))
    return value


def _of(value, kind: type, what: str, file: str, line: int):
    """`value` when it is a `kind` (dict: a table, list: an array), else one sentence."""
    if not isinstance(value, kind):
        raise bad(f"{what} must be {'a table' if kind is dict else 'an array'}, not "
                  f"{show(value)}", file, line)
    return value


def _version(value, name: str, file: str, line: int) -> str:
    """A locked version: a PEP 440 version and nothing more (a marker or a range there would
    change what is installed without saying so)."""
    from packaging.version import InvalidVersion, Version
    try:
        Version(value)
    except (InvalidVersion, TypeError):
        raise bad(f"package {show(name)}: version {show(value)} is not a PEP 440 "
                  f"version", file, line) from None
    return value


def _placer(text: str, start: int):
    """The line of each value of a list, in the order it is written: each is looked for
    after the one before (then from `start`), so placing n values reads the text once,
    not n times."""
    start = max(start, 0)
    at = start

    def place(value: str) -> int:
        nonlocal at
        pos = text.find(value, at)
        pos = pos if pos >= 0 else text.find(value, start)
        at = pos + len(value) if pos >= 0 else at
        return line_at(text, pos)
    return place


def read_pyproject(path: Path, extras=(), groups=()) -> Intake:
    data, text = _toml(path, "pyproject.toml")
    file = str(path)
    project = data.get("project")
    notes = []
    if not isinstance(project, dict):
        raise bad("has no [project] table (PEP 621): envgen reads the dependencies a "
                  "project states there (Poetry's own table is not read)", file)
    dynamic = _of(project.get("dynamic") or [], list, "[project] dynamic", file,
                  line_of(text, "dynamic"))
    if "dependencies" in dynamic:
        raise bad("[project] lists 'dependencies' as dynamic: they are computed by the build "
                  "backend, which envgen does not run; write them in [project] or give "
                  "envgen the requirements file they come from", file,
                  line_of(text, "dynamic"))
    want: list[tuple[str, int]] = []
    place = _placer(text, text.find("[project]"))
    for req in _strings(project.get("dependencies", []), "[project] dependencies", file, text):
        want.append((req, place(req)))
    optional = _of(project.get("optional-dependencies") or {}, dict,
                   "[project.optional-dependencies]", file, line_of(text, "optional-dependencies"))
    for e in extras:
        want += _extra(optional, e, f"--extra {show(e)}", file, text)
    dgroups = _of(data.get("dependency-groups") or {}, dict, "[dependency-groups]", file,
                  line_of(text, "dependency-groups"))
    for g in groups:
        for req in _group(dgroups, g, file, text, ()):
            want.append((req, line_of(text, req, max(text.find("[dependency-groups]"), 0))))
    want = _own_extras(want, project.get("name"), optional, file, text, notes, set())
    sources, indexes = _uv(data, file, text, notes)
    reqs = []
    for req, n in want:
        w = parse(req, file, n)
        src = sources.get(w.name)
        if src is not None and " @ " not in w.text:
            from packaging.requirements import Requirement
            r = Requirement(w.text)   # parse() read it: its name, extras and marker stay;
            # a version range gives way to the source, as uv reads it
            extra = f"[{','.join(sorted(r.extras))}]" if r.extras else ""
            w = parse(f"{r.name}{extra} @ {src}" + (f" ; {r.marker}" if r.marker else ""),
                      file, n)
            notes.append(f"{w.where}: {w.name} from [tool.uv.sources]: {src}")
        reqs.append(w)
    requires = _requires_python(project, file, text)
    return Intake(path=file, kind="pyproject.toml", requirements=tuple(reqs),
                  indexes=indexes, notes=tuple(notes), requires_python=requires,
                  requires_python_at=f"{file}:{line_of(text, 'requires-python')}"
                  if requires else "")


def _requires_python(project: dict, file: str, text: str) -> str:
    """[project] requires-python (or a uv.lock's) as a PEP 440 specifier set ("" for
    none)."""
    from packaging.specifiers import InvalidSpecifier, SpecifierSet
    value = project.get("requires-python")
    if value is None:
        return ""
    try:
        if isinstance(value, str):
            return str(SpecifierSet(value))
    except InvalidSpecifier:
        pass
    raise bad(f"requires-python {show(value)} is not a version specifier "
              f"(>=3.10)", file, line_of(text, "requires-python"))


def _extra(optional: dict, e: str, what: str, file: str, text: str) -> list:
    """(requirement, line) of the optional-dependencies extra `e` (PEP 685 names)."""
    key = next((k for k in optional if canonicalize_name(k) == canonicalize_name(e)), None)
    if key is None:
        raise bad(f"{what}: [project.optional-dependencies] has "
                  f"{', '.join(sorted(optional)) or 'none'}", file,
                  line_of(text, "optional-dependencies"))
    place = _placer(text, text.find("optional-dependencies"))
    return [(req, place(req)) for req in
            _strings(optional[key], f"optional-dependencies.{key}", file, text)]


def _own_extras(want: list, name, optional: dict, file: str, text: str, notes: list,
                done: set) -> list:
    """A requirement on the project itself (`acme[train]` among acme's own extras or
    groups, as uv and pip read it) is those extras of this file, read here: no index has
    the team's own project. Its marker goes with each of their requirements; an extra
    read once under that marker (a loop, or two extras naming it) adds nothing more."""
    from packaging.markers import Marker
    from packaging.requirements import InvalidRequirement, Requirement
    own = canonicalize_name(name) if isinstance(name, str) else None
    out = []
    for req, n in want:
        try:
            r = Requirement(req)
        except InvalidRequirement:   # parse() says why, at its line
            r = None
        if own is None or r is None or canonicalize_name(r.name) != own:
            out.append((req, n))
            continue
        notes.append(f"{file}:{n}: {req} names this project itself: its extra(s) "
                     f"{', '.join(sorted(r.extras)) or '(none)'} read from this file, not "
                     f"fetched from an index")
        for e in sorted(r.extras):
            if (e, str(r.marker)) in done:
                continue
            done.add((e, str(r.marker)))
            inner = []
            for x, at in _extra(optional, e, f"{show(req)} names the extra {show(e)}", file,
                                text):
                try:
                    xr = Requirement(x)
                except InvalidRequirement:
                    inner.append((x, at))
                    continue
                if r.marker is not None:
                    xr.marker = Marker(f"({xr.marker}) and ({r.marker})" if xr.marker
                                       else str(r.marker))
                inner.append((str(xr), at))
            out += _own_extras(inner, name, optional, file, text, notes, done)
    return out


def _group(groups: dict, name: str, file: str, text: str, seen: tuple) -> list[str]:
    key = next((k for k in groups if canonicalize_name(k) == canonicalize_name(name)), None)
    if key is None:
        raise bad(f"--group {show(name)}: [dependency-groups] has "
                  f"{', '.join(sorted(groups)) or 'none'}", file,
                  line_of(text, "[dependency-groups]"))
    if key in seen:
        raise bad(f"dependency group {key} includes itself ({' -> '.join((*seen, key))})",
                  file, line_of(text, "include-group"))
    out = []
    for item in _strings(groups[key], f"dependency-groups.{key}", file, text, tables=True):
        if isinstance(item, dict):
            inc = item.get("include-group")
            if not isinstance(inc, str) or set(item) != {"include-group"}:
                raise bad(f"dependency group {key}: {show(item)} is neither a requirement "
                          f"nor {{include-group = NAME}}", file, line_of(text, key))
            out += _group(groups, inc, file, text, (*seen, key))
        else:
            out.append(item)
    return out


def _uv(data: dict, file: str, text: str, notes: list) -> tuple[dict, tuple]:
    """[tool.uv.sources] as name → URL (git pinned by rev/tag/branch), and [[tool.uv.index]]
    as (default index, extras...)."""
    tool = _of(data.get("tool") or {}, dict, "[tool]", file, line_of(text, "tool"))
    uv = _of(tool.get("uv") or {}, dict, "[tool.uv]", file, line_of(text, "tool.uv"))
    sources = {}
    for name, src in _of(uv.get("sources") or {}, dict, "[tool.uv.sources]", file,
                         line_of(text, "sources")).items():
        n = line_of(text, f"{name} =", max(text.find("sources"), 0))
        if isinstance(src, list):
            raise bad(f"[tool.uv.sources] {name}: a list of sources by marker is not read; "
                      f"give one", file, n)
        if not isinstance(src, dict):
            raise bad(f"[tool.uv.sources] {name} must be a table", file, n)
        if "subdirectory" in src:   # envgen builds a repository's or archive's root
            raise bad(f"[tool.uv.sources] {name}: a subdirectory source is not supported "
                      f"(envgen builds the repository's root); publish that package, or "
                      f"point at its own folder with path =", file, n)
        if "git" in src:
            ref = src.get("rev") or src.get("tag") or src.get("branch")
            if not isinstance(ref, str):
                raise bad(f"[tool.uv.sources] {name}: a git source names a rev, tag or "
                          f"branch (envgen pins it to a commit)", file, n)
            url = f"git+{str(src['git']).removeprefix('git+')}@{ref}"
            git_parts(url, file, n)
            sources[canonicalize_name(name)] = url
        elif "url" in src:
            sources[canonicalize_name(name)] = check_url(str(src["url"]), "the URL", file, n)
        elif "path" in src:
            try:
                p = (Path(file).parent / str(src["path"])).resolve()
            except (OSError, RuntimeError, ValueError) as e:   # a NUL, a loop of links
                raise bad(f"[tool.uv.sources] {name}: the path {show(str(src['path']))} "
                          f"cannot be read ({getattr(e, 'strerror', None) or e})", file,
                          n) from None
            sources[canonicalize_name(name)] = p.as_uri()
        elif "index" in src:
            notes.append(f"{file}:{n}: {name} from index {src['index']!r}")
        elif src.get("workspace"):
            raise bad(f"[tool.uv.sources] {name} is a workspace member: build it as part of "
                      f"the team's code (copy:), not as a dependency", file, n)
    default, extras = "", []
    for ix in _of(uv.get("index") or [], list, "[[tool.uv.index]]", file,
                  line_of(text, "index")):
        if not isinstance(ix, dict) or not isinstance(ix.get("url"), str):
            raise bad("[[tool.uv.index]] entries need a url", file, line_of(text, "tool.uv.index"))
        url = check_index(ix["url"], "[[tool.uv.index]] url", file,
                        line_of(text, ix["url"])).rstrip("/")
        if ix.get("default"):
            default = url
        else:
            extras.append(url)
    return sources, ((default, *extras) if default or extras else ())


def read_uv_lock(path: Path) -> Intake:
    """uv.lock: the root project's direct requirements as its [package.metadata]
    requires-dist states them (extras and markers kept) are the requirements; every package
    from a registry is kept at its locked version (a constraint) with its hashes."""
    data, text = _toml(path, "uv.lock")
    file = str(path)
    pkgs = data.get("package")
    if not isinstance(pkgs, list) or "version" not in data:
        raise bad("is not a uv.lock: it has no version and [[package]] tables", file)
    reqs, roots, notes = [], [], []
    indexes: list[str] = []
    from collections import Counter
    versions = Counter(p.get("name") for p in pkgs if isinstance(p, dict))
    for p in pkgs:
        if not isinstance(p, dict) or not isinstance(p.get("name"), str):
            raise bad("a [[package]] has no name", file)
        name = p["name"]
        n = line_of(text, f'name = "{name}"\nversion = "{p.get("version")}"')
        if n == 1:
            n = line_of(text, f'name = "{name}"')
        src = _of(p.get("source") or {}, dict, f"package {show(name)}: source", file, n)
        if "editable" in src or "virtual" in src:
            roots.append(p)
            continue
        version = p.get("version")
        if not isinstance(version, str):
            raise bad(f"package {show(name)} has no version", file, n)
        _version(version, name, file, n)
        hashes = tuple(h.removeprefix("sha256:") for f in
                       [p.get("sdist") or {}, *_of(p.get("wheels") or [], list,
                                                  f"package {show(name)}: wheels", file, n)]
                       if isinstance(f, dict) and isinstance(h := f.get("hash"), str)
                       and h.startswith("sha256:"))
        # one version of several for the Pythons and platforms its resolution-markers say
        # (numpy 2.0.2 below Python 3.10, 2.2.6 from it): that condition goes with its pin
        marks = p.get("resolution-markers")
        tail = ""
        if versions[name] > 1:
            if not isinstance(marks, list) or not marks or not all(
                    isinstance(m, str) for m in marks):
                raise bad(f"package {name} is locked at several versions, and {version} "
                          f"names no resolution-markers saying where it applies", file, n)
            tail = " ; " + " or ".join(f"({m})" for m in marks)
        if "registry" in src:
            reg = str(src["registry"]).rstrip("/")
            if reg != "https://pypi.org/simple" and reg not in indexes:
                indexes.append(check_index(reg, "the registry", file, n))
            reqs.append(parse(f"{name}=={version}{tail}", file, n, hashes=hashes,
                              constraint=True))
        elif "git" in src:
            url = str(src["git"])
            commit = url.split("#", 1)[1] if "#" in url else None
            base = url.split("?")[0].split("#")[0]
            if "subdirectory=" in url.split("#")[0]:   # the root would be built instead
                raise bad(f"package {name}: its git source is a subdirectory of the "
                          f"repository, which envgen does not build", file, n)
            if not commit:
                raise bad(f"package {name}: its git source records no commit", file, n)
            reqs.append(parse(f"{name} @ git+{base.removeprefix('git+')}@{commit}", file, n,
                              constraint=True))
        elif "url" in src:
            reqs.append(parse(f"{name} @ {src['url']}", file, n, hashes=hashes,
                              constraint=True))
        else:
            raise bad(f"package {name}: source {show(src)} is not one envgen reads", file, n)
    if not roots:
        notes.append(f"{file}: no root project (editable or virtual); every locked package "
                     f"is required")
        return _lock_intake(file, text, data, reqs, indexes, notes)
    direct, how = [], {}
    for root in roots:
        got, entries = _root_requirements(root, file, text)
        direct += got
        how.update(entries)
    # requires-dist's requirements as written, the lock's pins of the rest as constraints;
    # a direct one that requires-dist does not state (a git, URL or path source, or a lock
    # without metadata) is its locked pin, with the entry's extras and marker
    stated = {w.name for w in direct}
    out = direct + [_direct(w, how[w.name]) if w.name in how else w for w in reqs
                    if w.name not in stated]
    return _lock_intake(file, text, data, out, indexes, notes)


def _lock_intake(file: str, text: str, data: dict, reqs: list, indexes: list,
                 notes: list) -> Intake:
    """The Intake of a uv.lock, with the requires-python it was locked for."""
    requires = _requires_python(data, file, text)
    return Intake(path=file, kind="uv.lock", requirements=tuple(reqs),
                  indexes=(("", *indexes) if indexes else ()), notes=tuple(notes),
                  requires_python=requires,
                  requires_python_at=f"{file}:{line_of(text, 'requires-python')}"
                  if requires else "")


_SOURCE_KEYS = ("git", "url", "path", "directory", "editable")


def _root_requirements(root: dict, file: str, text: str) -> tuple[list, dict]:
    """(requirements, {name: (extras, marker)}) of a root project: its [package.metadata]
    requires-dist as written (specifier, extras, marker); an entry with a git, URL or path
    source, or every entry of its dependencies where the lock states no requires-dist, is
    left to the locked pin of its name, with its extras and marker."""
    name = root["name"]
    at = line_of(text, f'name = "{name}"')
    meta = _of(root.get("metadata") or {}, dict, f"package {show(name)}: metadata", file, at)
    listed = meta.get("requires-dist")
    key = "requires-dist" if listed is not None else "dependencies"
    items = _of(listed if listed is not None else root.get("dependencies") or [], list,
                f"package {show(name)}: {key}", file, at)
    place = _placer(text, text.find(key, text.find(f'name = "{name}"')))
    out, pinned = [], {}
    for d in items:
        if not isinstance(d, dict) or not isinstance(d.get("name"), str):
            raise bad(f"package {show(name)}: {key} entry {show(d)} names no package", file, at)
        n = place(f'name = "{d["name"]}"')
        extras = d.get("extras", d.get("extra")) or []
        spec, marker = d.get("specifier", ""), d.get("marker") or ""
        if not (isinstance(extras, list) and all(isinstance(e, str) for e in extras)
                and isinstance(spec, str) and isinstance(marker, str)):
            raise bad(f"package {show(name)}: {key} entry {show(d)}: extras must be a list of "
                      f"names, specifier and marker strings", file, n)
        if key == "dependencies" or any(k in d for k in _SOURCE_KEYS):
            pinned[canonicalize_name(d["name"])] = (tuple(extras), marker)
            continue
        out.append(parse(d["name"] + (f"[{','.join(extras)}]" if extras else "") + spec
                         + (f" ; {marker}" if marker else ""), file, n))
    return out, pinned


def _direct(w: Wanted, entry: tuple) -> Wanted:
    """A locked pin as a direct requirement: the root's extras on it, and its marker with
    the pin's own (a version locked for some Pythons only)."""
    from packaging.markers import InvalidMarker, Marker
    from packaging.requirements import Requirement

    from ..core import record
    extras, marker = entry
    r = Requirement(w.text)
    r.extras = set(extras) | r.extras
    if marker:
        try:
            r.marker = Marker(f"({r.marker}) and ({marker})" if r.marker else marker)
        except InvalidMarker:
            raise bad(f"package {w.name}: the root's marker {show(marker)} is not a marker",
                      w.file, w.line) from None
    return record.replace(w, text=str(r), constraint=False)


def read_pylock(path: Path) -> Intake:
    """pylock.toml (PEP 751): every package applies where its marker does; versions and
    hashes kept."""
    data, text = _toml(path, "pylock.toml")
    file = str(path)
    pkgs = data.get("packages")
    if not isinstance(pkgs, list) or "lock-version" not in data:
        raise bad("is not a pylock.toml: it has no lock-version and [[packages]]", file)
    reqs = []
    for p in pkgs:
        if not isinstance(p, dict) or not isinstance(p.get("name"), str):
            raise bad("a [[packages]] entry has no name", file)
        name = p["name"]
        n = line_of(text, f'name = "{name}"')
        marker = p.get("marker")
        tail = f" ; {marker}" if isinstance(marker, str) and marker else ""
        files = [p.get("sdist") or {}, *_of(p.get("wheels") or [], list,
                                            f"package {show(name)}: wheels", file, n)]
        hashes = tuple(h for f in files if isinstance(f, dict)
                       and isinstance(h := _of(f.get("hashes") or {}, dict,
                                               f"package {show(name)}: hashes", file, n
                                               ).get("sha256"), str))
        for kind in ("archive", "directory"):   # not the index's file of that name
            if kind in p:
                raise bad(f"package {name}: a [packages.{kind}] source is not one envgen "
                          f"reads (its index's {name} would be installed in its place); "
                          f"give it as `{name} @ URL#sha256=...` in a requirements file",
                          file, n)
        if isinstance(p.get("vcs"), dict):
            v = p["vcs"]
            commit = v.get("commit-id")
            if v.get("subdirectory"):
                raise bad(f"package {name}: its vcs entry names a subdirectory, which "
                          f"envgen does not build", file, n)
            if not isinstance(commit, str) or not isinstance(v.get("url"), str):
                raise bad(f"package {name}: its vcs entry needs url and commit-id", file, n)
            reqs.append(parse(f"{name} @ git+{v['url']}@{commit}{tail}", file, n))
        elif isinstance(p.get("version"), str):
            version = _version(p["version"], name, file, n)
            reqs.append(parse(f"{name}=={version}{tail}", file, n, hashes=hashes))
        else:
            raise bad(f"package {name} has no version and no vcs entry envgen reads", file, n)
    return Intake(path=file, kind="pylock.toml", requirements=tuple(reqs))
