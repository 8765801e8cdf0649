"""`envgen lock [SPEC|IMAGE…] [--push REPOSITORY] [--merge LOCK…] [-o envgen.lock]`."""
from __future__ import annotations

import os
import sys
from pathlib import Path

from ..core.errors import CheckFailed, InputError, named, shown
from ..lock import write as lk
from ..runtime import docker as engine
from ._common import load_matrix_for, out_json, progress_for, ref_or_spec


def _wanted(args, m) -> list[tuple[str, str | None, str | None]]:
    """Each named SPEC|IMAGE with what it names (`ref_or_spec`), checked before any daemon."""
    if not args.specs:   # in a project's folder: its image; elsewhere every certified one
        from ..resolve.project import current
        proj = current()
        return [(proj.spec, *ref_or_spec(args, m, None))] if proj else []
    return [(spec, *ref_or_spec(args, m, spec)) for spec in args.specs]


def _refs(args, c, wanted) -> tuple[list[str], list]:
    """Image references to lock: the named specs (an image tag/ID, or a spec resolved to its
    default tag), or the newest certified image of every stack."""
    if not wanted:
        refs, skipped = lk.certified_images(
            exists=lambda i: engine.image_or_none(c, i) is not None)
        if not refs:
            gone = "".join(f"; {s}: {why}" for s, why in skipped)
            raise InputError(f"no certified image to lock: build and certify one first "
                             f"(`envgen build SPEC --certify`){gone}")
        return refs, skipped
    refs = []
    for spec, as_ref, as_spec in wanted:
        if as_ref is not None and engine.image_or_none(c, as_ref) is not None:
            refs.append(as_ref)
            continue
        if as_spec is None or engine.image_or_none(c, as_spec) is None:
            where = f"resolves to {as_spec}, which is" if as_spec else "is"
            raise InputError(f"{spec} {where} not on this Docker daemon (build it with "
                             f"`envgen build SPEC`)")
        refs.append(as_spec)
    return refs, []


def _push(c, name: str, entry: dict, repository: str, progress) -> None:
    """Push a certified image and pin its manifest digest in the entry."""
    from ..core.image import split_tag
    from ..runtime.registry import push
    cert = entry.get("certificate")
    if not cert or not cert.get("passed") or cert.get("image_id") != entry["image"]["id"]:
        raise CheckFailed(f"{name}: {entry['image']['id'][:19]} has no passing certificate; "
                          f"only certified images are pushed (run `envgen certify`)")
    target = f"{repository}/{name}"
    tag = split_tag(entry["image"]["tag"] or "")[1] if entry["image"]["tag"] else "latest"
    progress(f"pushing {name} to {target}:{tag}")
    entry["image"]["pinned"] = push(c, entry["image"]["id"], target, tag)
    img = c.images.get(entry["image"]["id"])
    entry["image"]["repo_digests"] = sorted(img.attrs.get("RepoDigests") or [])


def run(args) -> int:
    m = load_matrix_for(args)
    if args.push is not None:   # --push '' is refused, not taken for no push
        from ..core.image import parse_repository
        parse_repository(args.push)
        if args.merge and not args.specs:
            raise InputError("--push pushes the images of the SPECs locked now; --merge "
                             "alone takes entries as they are and pushes nothing: push "
                             "with `envgen lock SPEC --push REPO` first, then merge")
    entries, skipped = _merged(args.merge or ()), []
    _check_output(args.output)
    if args.specs or not args.merge:
        wanted = _wanted(args, m)
        before = (lk.read_lock(args.output)["stacks"] if os.path.lexists(args.output)
                  else None)
        c = engine.client()
        refs, skipped = _refs(args, c, wanted)
        progress = progress_for(args)
        for ref in refs:
            progress(f"locking {ref}: reading its closure and certificate")
            name, entry = lk.lock_entry(c, ref)
            if args.push:
                _push(c, name, entry, args.push, progress)
            elif entry["image"]["pinned"] is None:
                entry["image"]["pinned"] = _pinned_before(before, name, entry)
            entries[name] = entry
    data = lk.write_lock(args.output, entries, m.sha256)
    if args.json:
        out_json({"lock": args.output, "locked": sorted(entries),
                  "skipped": [{"stack": s, "why": w} for s, w in skipped],
                  "stacks": {n: data["stacks"][n] for n in sorted(entries)}})
        return 0
    for name in sorted(entries):
        e = entries[name]
        reqs = e["requirements"]
        hashed = sum(1 for r in reqs if r["hashes"])
        cert = e["certificate"]
        cert_text = (f"certificate {'passed' if cert['passed'] else 'FAILED'} at level "
                     f"{cert['level']} ({cert['created']})" if cert else "no certificate")
        where = e["image"].get("pinned") or e["image"]["tag"] or "-"
        print(f"{name}: {where} {e['image']['id'][:19]}, {len(reqs)} distributions "
              f"({hashed} hash-pinned), {cert_text}")
        for r in reqs:
            if not r["hashes"]:
                print(f"  no hash for {r['name']}=={r['version']}: {r['hash_note']}")
        for n in e.get("unlocked") or ():
            print(f"  installed but not in the closure: {n}")
    for s, why in skipped:
        print(f"skipped {s}: {why}", file=sys.stderr)
    print(f"wrote {named(args.output)} ({len(data['stacks'])} stack(s))")
    return 0


def _merged(paths) -> dict:
    """The entries of the locks `--merge` names; the same stack in two of them must be the
    very same entry: InputError (exit 2) naming both files and the stack when its image or
    certificate differ (which one is right is a reviewer's call, not the order of the
    arguments)."""
    from ..lock.read import stack_line
    entries: dict = {}
    came_from: dict[str, str] = {}
    for path in paths:
        for name, entry in lk.read_lock(path)["stacks"].items():
            if name in entries and entries[name] != entry:
                raise InputError(
                    f"lock --merge: stack {name} is pinned both here and in "
                    f"{named(came_from[name])}:{stack_line(came_from[name], name) or 1}, "
                    f"with {_difference(entries[name], entry)}; merge only one of them, or "
                    f"lock the stack again", file=path, line=stack_line(path, name))
            entries[name] = entry
            came_from.setdefault(name, path)
    return entries


def _difference(old: dict, new: dict) -> str:
    """What differs between two entries of one stack, in a few words."""
    if old["image"]["id"] != new["image"]["id"]:
        return f"image {new['image']['id'][:19]} here, {old['image']['id'][:19]} there"
    if old.get("certificate") != new.get("certificate"):
        def verdict(c):
            return "none" if not c else (f"{'passed' if c.get('passed') else 'FAILED'} "
                                         f"{c.get('created')}")
        return (f"certificate {verdict(new.get('certificate'))} here, "
                f"{verdict(old.get('certificate'))} there")
    fields = sorted(k for k in old.keys() | new.keys() if old.get(k) != new.get(k))
    return f"the same image and certificate, but another {', '.join(fields)}"


def _check_output(path: str) -> None:
    """A lock that cannot be written is said before any daemon is asked or image pushed:
    the first thing that exists above it must be a folder (write_lock makes the rest)."""
    above = Path(os.path.abspath(path)).parent
    while not os.path.lexists(above):
        above = above.parent
    if not above.is_dir():
        raise InputError(f"-o {shown(path)}: {shown(str(above))} is not a folder")


def _pinned_before(before: dict | None, name: str, entry: dict):
    """Re-locking an image that the lock already pins by digest keeps that digest, when
    the image still carries it (e.g. after a GPU certification on a teammate's machine).
    `before`: the stacks of the lock being written, read once; None when it is new."""
    if before is None:
        return None
    old = before.get(name) or {}
    pinned = (old.get("image") or {}).get("pinned")
    if pinned and old["image"].get("id") == entry["image"]["id"]:
        return pinned
    digest = next((d for d in entry["image"]["repo_digests"] if "@sha256:" in d), None)
    return digest
