#!/usr/bin/env python3
"""Regenerate matrices/pytorch.yaml from PyPI (plus a hand-kept table of index variants).

Usage:  python3 tools/refresh_pytorch.py [--out matrices/pytorch.yaml] [--refresh] [--jobs 16]

What it reads
  * PyPI's simple index (PEP 691 JSON) for torch, torchvision, torchaudio.
  * Each torch release's wheel METADATA (PEP 658 `<wheel-url>.metadata`; where PyPI
    does not serve that file, the METADATA member is read out of the wheel itself with
    HTTP range requests, never the whole wheel).
  * tools/pytorch_index_variants.yaml: the variants published only on
    download.pytorch.org/whl/<variant> (this machine cannot reach that host), kept by
    hand from PyTorch's own published facts (RELEASE.md, previous-versions page,
    .github/scripts/generate_binary_build_matrix.py, .ci/manywheel/build_cuda.sh).

What it writes
  matrices/pytorch.yaml with the sections `frameworks`, `framework_releases`,
  `wheel_sources` (docs/matrix-format.md).

Only the standard library, PyYAML and packaging are used. HTTP responses are cached
under ~/.cache/envgen-refresh (simple-index pages for an hour, wheel metadata for good;
--refresh ignores the cache for simple-index pages).
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import email.parser
import hashlib
import io
import json
import os
import sys
import time
import urllib.error
import urllib.request
import zipfile
from pathlib import Path

import yaml
from packaging.requirements import Requirement
from packaging.utils import parse_wheel_filename
from packaging.version import Version

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = ROOT / "matrices" / "pytorch.yaml"
VARIANTS_FILE = Path(__file__).resolve().parent / "pytorch_index_variants.yaml"
CACHE = Path(os.environ.get("ENVGEN_REFRESH_CACHE", Path.home() / ".cache" / "envgen-refresh"))
SIMPLE = "https://pypi.org/simple"
SIMPLE_TTL = 3600
FIRST = Version("1.13.0")
UA = "envgen-refresh/1 (+tools/refresh_pytorch.py)"

# CUDA runtime wheel (nvidia-cuda-runtime[-cuXX]) version -> the CUDA toolkit releases
# that ship it, and the one to assume when nothing else tells them apart.
# Source: the "CUDA Toolkit Major Component Versions" table, row "CUDA Runtime (cudart)",
# of each release's notes: https://docs.nvidia.com/cuda/archive/<release>/cuda-toolkit-release-notes/
# Several updates can ship the same cudart (12.6.2/12.6.3 both ship 12.6.77). Where the
# torch wheel pins NVIDIA's cuda-toolkit meta-wheel (torch >= 2.11) that pin names the
# release and must be one of the candidates; otherwise the default is the release
# PyTorch's build matrix names (CUDA_ARCHES_FULL_VERSION in
# .github/scripts/generate_binary_build_matrix.py).
# A runtime version missing here is an error: add it from the release notes, never guess.
CUDA_RUNTIME_TO_RELEASE = {
    # cudart       candidates                 default    (notes)
    "11.6.55":  (("11.6.1", "11.6.2"),       "11.6.2"),  # PyTorch's cu116 builder image: 11.6.2
    "11.7.99":  (("11.7.1",),                "11.7.1"),  # 11.7.0 ships 11.7.60
    "11.8.89":  (("11.8.0",),                "11.8.0"),
    "12.1.105": (("12.1.1",),                "12.1.1"),  # 12.1.0 ships 12.1.55
    "12.4.99":  (("12.4.0",),                "12.4.0"),
    "12.4.127": (("12.4.1",),                "12.4.1"),
    "12.6.68":  (("12.6.1",),                "12.6.1"),  # 12.6.0 ships 12.6.37
    "12.6.77":  (("12.6.2", "12.6.3"),       "12.6.3"),  # both updates ship cudart 12.6.77; CUDA_ARCHES_FULL_VERSION "12.6": "12.6.3"
    "12.8.57":  (("12.8.0",),                "12.8.0"),
    "12.8.90":  (("12.8.1", "12.8.2"),       "12.8.1"),  # CUDA_ARCHES_FULL_VERSION "12.8": "12.8.1"
    "12.9.37":  (("12.9.0",),                "12.9.0"),
    "12.9.79":  (("12.9.1", "12.9.2"),       "12.9.1"),
    "13.0.48":  (("13.0.0",),                "13.0.0"),
    "13.0.88":  (("13.0.1",),                "13.0.1"),
    "13.0.96":  (("13.0.2", "13.0.3"),       "13.0.2"),  # 13.0.2/13.0.3 per NVIDIA's cuda-toolkit meta-wheel pins (release notes page not read)
    "13.2.86":  (("13.2.2",),                "13.2.2"),  # per NVIDIA's cuda-toolkit==13.2.2 meta-wheel pins (release notes page not read)
}

CPU_ENV = {
    "platform_system": "Linux",
    "platform_machine": "x86_64",
    "sys_platform": "linux",
    "os_name": "posix",
    "implementation_name": "cpython",
    "platform_python_implementation": "CPython",
}


class RefreshError(RuntimeError):
    pass


def warn(msg: str) -> None:
    print(f"warning: {msg}", file=sys.stderr)


# --------------------------------------------------------------------------- HTTP + cache

def _cache_path(key: str) -> Path:
    h = hashlib.sha256(key.encode()).hexdigest()
    return CACHE / h[:2] / h


def http_get(url: str, headers: dict | None = None, ttl: float | None = None,
             refresh: bool = False) -> bytes | None:
    """GET with an on-disk cache. Returns None on 404 (the 404 is cached too)."""
    key = url + "\n" + json.dumps(headers or {}, sort_keys=True)
    path = _cache_path(key)
    if path.exists() and not refresh:
        if ttl is None or time.time() - path.stat().st_mtime < ttl:
            data = path.read_bytes()
            return None if data == b"\0404" else data
    req = urllib.request.Request(url, headers={"User-Agent": UA, **(headers or {})})
    for attempt in range(4):
        try:
            with urllib.request.urlopen(req, timeout=120) as r:
                data = r.read()
            break
        except urllib.error.HTTPError as e:
            if e.code == 404:
                data = b"\0404"
                break
            if e.code < 500 or attempt == 3:
                raise
        except (urllib.error.URLError, TimeoutError, ConnectionError):
            if attempt == 3:
                raise
        time.sleep(2 ** attempt)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".tmp{os.getpid()}.{id(data)}")
    tmp.write_bytes(data)
    tmp.replace(path)
    return None if data == b"\0404" else data


def simple_index(project: str, refresh: bool) -> dict:
    data = http_get(f"{SIMPLE}/{project}/",
                    headers={"Accept": "application/vnd.pypi.simple.v1+json"},
                    ttl=SIMPLE_TTL, refresh=refresh)
    if data is None:
        raise RefreshError(f"{project}: not on PyPI")
    return json.loads(data)


class RangeFile(io.RawIOBase):
    """A read-only, seekable view of a remote file through HTTP range requests."""

    def __init__(self, url: str, size: int):
        self.url, self.size, self.pos = url, size, 0

    def readable(self):
        return True

    def seekable(self):
        return True

    def tell(self):
        return self.pos

    def seek(self, off, whence=0):
        self.pos = {0: off, 1: self.pos + off, 2: self.size + off}[whence]
        return self.pos

    def readinto(self, b):
        n = min(len(b), self.size - self.pos)
        if n <= 0:
            return 0
        req = urllib.request.Request(self.url, headers={
            "User-Agent": UA, "Range": f"bytes={self.pos}-{self.pos + n - 1}"})
        for attempt in range(4):
            try:
                with urllib.request.urlopen(req, timeout=120) as r:
                    if r.status != 206:
                        raise RefreshError(f"{self.url}: server ignored the Range header")
                    data = r.read()
                break
            except (urllib.error.URLError, TimeoutError, ConnectionError):
                if attempt == 3:
                    raise
                time.sleep(2 ** attempt)
        b[:len(data)] = data
        self.pos += len(data)
        return len(data)


def wheel_metadata(f: dict) -> tuple[str, str]:
    """METADATA text of a wheel file entry, and how it was obtained."""
    text = http_get(f["url"] + ".metadata")
    if text is not None:
        return text.decode("utf-8"), "pep658"
    key = "zip-metadata:" + f["url"]
    path = _cache_path(key)
    if path.exists():
        return path.read_text("utf-8"), "range"
    raw = io.BufferedReader(RangeFile(f["url"], f["size"]), buffer_size=1 << 16)
    with zipfile.ZipFile(raw) as z:
        names = [n for n in z.namelist()
                 if n.count("/") == 1 and n.endswith(".dist-info/METADATA")]
        if len(names) != 1:
            raise RefreshError(f"{f['filename']}: expected one .dist-info/METADATA, got {names}")
        text = z.read(names[0]).decode("utf-8")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, "utf-8")
    return text, "range"


# --------------------------------------------------------------------------- wheel helpers

def cpython_of(tag) -> str | None:
    """'3.11' for a cp311/cp311 tag; None for free-threaded (cp313t), abi3, PyPy."""
    interp, abi = tag.interpreter, tag.abi
    if not interp.startswith("cp") or abi.endswith("t") or abi in ("abi3", "none"):
        return None
    digits = interp[2:]
    return f"{digits[0]}.{digits[1:]}"


def is_linux_x86_64(tag) -> bool:
    p = tag.platform
    return (p.startswith("manylinux") or p.startswith("linux")) and p.endswith("_x86_64")


def releases(index: dict, first: Version | None = None) -> dict[Version, list[dict]]:
    """Final releases -> their non-yanked wheel file entries, each annotated with
    'python' (or None), 'build' (tuple) and 'linux_x86_64'."""
    out: dict[Version, list[dict]] = {}
    for f in index["files"]:
        if not f["filename"].endswith(".whl") or f.get("yanked"):
            continue
        name, ver, build, tags = parse_wheel_filename(f["filename"])
        if ver.is_prerelease or ver.is_devrelease or ver.is_postrelease or ver.local:
            continue
        if first is not None and ver < first:
            continue
        pys = {cpython_of(t) for t in tags} - {None}
        out.setdefault(ver, []).append({
            **f,
            "python": max(pys, key=Version) if pys else None,
            "build": build,
            "linux_x86_64": any(is_linux_x86_64(t) for t in tags),
        })
    return out


def best_wheels(files: list[dict]) -> dict[str, dict]:
    """CPython version -> the Linux x86_64 wheel pip would pick (highest build tag)."""
    best: dict[str, dict] = {}
    for f in files:
        if not f["linux_x86_64"] or f["python"] is None:
            continue
        cur = best.get(f["python"])
        if cur is None or f["build"] > cur["build"]:
            best[f["python"]] = f
    return best


def requirements(metadata: str, python: str) -> list[Requirement]:
    """Requires-Dist entries that apply on Linux x86_64 CPython `python`, extras ignored."""
    msg = email.parser.Parser().parsestr(metadata, headersonly=True)
    env = {**CPU_ENV, "python_version": python, "python_full_version": python + ".0", "extra": ""}
    out = []
    for line in msg.get_all("Requires-Dist") or []:
        req = Requirement(line)
        if req.marker is not None:
            if "extra" in str(req.marker):
                continue
            if not req.marker.evaluate(env):
                continue
        out.append(req)
    return out


def exact_pin(req: Requirement) -> str | None:
    specs = list(req.specifier)
    if len(specs) == 1 and specs[0].operator in ("==", "==="):
        return specs[0].version
    return None


# --------------------------------------------------------------------------- facts

def pin_text(req: Requirement) -> str:
    """An exact version: the wheel's own exact pin, or, for a wildcard or range the wheel
    states ('==13.0.96.*', '>=13.0.88,<14'), the newest release on PyPI inside it that has a
    Linux x86_64 wheel (what pip would install today), so the matrix pins exactly."""
    pin = exact_pin(req)
    if pin is not None and "*" not in pin:
        return pin
    return newest_matching(req.name.lower(), req.specifier)


def newest_matching(project: str, specifier) -> str:
    idx = simple_index(project, refresh=False)
    versions = set()
    for f in idx["files"]:
        if f.get("yanked") or not f["filename"].endswith(".whl"):
            continue
        _, ver, _, tags = parse_wheel_filename(f["filename"])
        if any(is_linux_x86_64(t) or t.platform == "any" for t in tags):
            versions.add(ver)
    ok = [v for v in versions if specifier.contains(v, prereleases=False)]
    if not ok:
        raise RefreshError(f"{project}{specifier}: no Linux x86_64 wheel on PyPI satisfies it")
    return str(max(ok))


def cuda_toolkit_pins(version: str, extras: set[str]) -> dict[str, str]:
    """nvidia-* pins that NVIDIA's cuda-toolkit meta-wheel `version` requires for `extras`
    (Linux), read from its METADATA on PyPI."""
    idx = simple_index("cuda-toolkit", refresh=False)
    files = [f for f in idx["files"] if f["filename"].endswith(".whl") and not f.get("yanked")
             and parse_wheel_filename(f["filename"])[1] == Version(version)]
    if not files:
        raise RefreshError(f"cuda-toolkit {version}: no wheel on PyPI")
    msg = email.parser.Parser().parsestr(wheel_metadata(files[0])[0], headersonly=True)
    out = {}
    for line in msg.get_all("Requires-Dist") or []:
        req = Requirement(line)
        if req.marker is None or not any(
                req.marker.evaluate({**CPU_ENV, "python_version": "3.11",
                                     "python_full_version": "3.11.0", "extra": e}) for e in extras):
            continue
        out[req.name.lower()] = pin_text(req)
    return out


def nvidia_facts(reqs: list[Requirement], what: str, quiet: bool = False) -> dict:
    """CUDA/cuDNN/NCCL facts from a wheel's applicable Requires-Dist entries.

    packages: every nvidia-* requirement (exact pins as bare versions, anything else as
    its specifier), plus, where the wheel requires NVIDIA's `cuda-toolkit[extras]==X`
    meta-wheel (torch >= 2.11), `cuda-toolkit` itself and the nvidia-* pins it brings in
    for those extras."""
    packages: dict[str, str] = {}
    for r in reqs:
        name = r.name.lower()
        if name == "cuda-toolkit":
            tk = exact_pin(r)
            if tk is None:
                raise RefreshError(f"{what}: {r} is not an exact cuda-toolkit pin")
            packages["cuda-toolkit"] = tk
            for k, v in cuda_toolkit_pins(tk, set(r.extras)).items():
                packages.setdefault(k, v)
        elif name.startswith("nvidia-"):
            if exact_pin(r) is None and not quiet:
                warn(f"{what}: {r} is not an exact pin; pinned to the newest wheel inside it")
            packages[name] = pin_text(r)

    def find(stem: str) -> str | None:
        hits = [v for k, v in packages.items() if k == stem or k.startswith(stem + "-cu")]
        if len(hits) > 1:
            raise RefreshError(f"{what}: several {stem} pins: {hits}")
        return hits[0] if hits else None

    runtime = find("nvidia-cuda-runtime")
    cuda = None
    if runtime is not None:
        rt = runtime.removeprefix("==").removesuffix(".*")
        if rt not in CUDA_RUNTIME_TO_RELEASE:
            raise RefreshError(
                f"{what}: CUDA runtime wheel {runtime} is not in CUDA_RUNTIME_TO_RELEASE; "
                "add it from the CUDA toolkit release notes' component-version table")
        candidates, cuda = CUDA_RUNTIME_TO_RELEASE[rt]
        tk = packages.get("cuda-toolkit")
        if tk is not None:
            tk_rel = ".".join(tk.split(".")[:3])
            if tk_rel not in candidates:
                raise RefreshError(f"{what}: cuda-toolkit=={tk} but its cudart {rt} belongs to "
                                   f"CUDA {candidates} per CUDA_RUNTIME_TO_RELEASE")
            cuda = tk_rel
    elif packages:
        raise RefreshError(f"{what}: nvidia-* pins but no nvidia-cuda-runtime pin: {packages}")
    return {"cuda": cuda, "cudnn": find("nvidia-cudnn"), "nccl": find("nvidia-nccl"),
            "packages": packages}


def variant_name(cuda: str | None) -> str:
    if cuda is None:
        return "cpu"
    major, minor = cuda.split(".")[:2]
    return f"cu{major}{minor}"


def torch_release(ver: Version, files: list[dict]) -> dict:
    what = f"torch {ver}"
    best = best_wheels(files)
    if not best:
        raise RefreshError(f"{what}: no Linux x86_64 CPython wheel on PyPI")
    pythons = sorted(best, key=Version)
    pick = best["3.11"] if "3.11" in best else best[pythons[-1]]
    metadata, how = wheel_metadata(pick)
    reqs = requirements(metadata, pick["python"])
    facts = nvidia_facts(reqs, f"{what} ({pick['filename']})")

    # Cross-check: every other Linux x86_64 wheel whose PEP 658 metadata PyPI serves
    # must carry the same nvidia-* pins.
    for py, f in best.items():
        if f is pick:
            continue
        other = http_get(f["url"] + ".metadata")
        if other is None:
            continue
        o = nvidia_facts(requirements(other.decode("utf-8"), py), f"{what} ({f['filename']})",
                         quiet=True)
        if o["packages"] != facts["packages"]:
            warn(f"{what}: {f['filename']} pins differ from {pick['filename']}: "
                 f"{sorted(set(o['packages'].items()) ^ set(facts['packages'].items()))}")
    superseded = [f["filename"] for f in files if f["linux_x86_64"] and f["python"] == pick["python"]
                  and f is not pick]
    uploaded = min(f["upload-time"] for f in files)
    return {
        "version": str(ver),
        "released": uploaded[:7],
        "pythons": pythons,
        "wheel": pick["filename"],
        "metadata_via": how,
        "superseded": superseded,
        "requires_python": pick.get("requires-python"),
        **facts,
    }


def companion_pins(project: str, index: dict, first: Version) -> dict[str, list[tuple[Version, str]]]:
    """torch version -> [(companion version, wheel file name)] from Requires-Dist torch==X."""
    rels = releases(index, first)

    def one(item):
        ver, files = item
        best = best_wheels(files)
        if best:
            f = best["3.11"] if "3.11" in best else best[max(best, key=Version)]
            py = f["python"]
        else:  # pure-Python or no Linux wheel: any wheel will do
            f, py = files[0], "3.11"
        reqs = requirements(wheel_metadata(f)[0], py)
        pins = [exact_pin(r) for r in reqs if r.name.lower() == "torch"]
        return ver, f["filename"], pins

    out: dict[str, list[tuple[Version, str]]] = {}
    with cf.ThreadPoolExecutor(16) as ex:
        for ver, fn, pins in ex.map(one, sorted(rels.items())):
            pins = [p for p in pins if p]
            if not pins:
                warn(f"{project} {ver}: no torch==X pin in {fn}")
                continue
            out.setdefault(pins[0], []).append((ver, fn))
    return out


# --------------------------------------------------------------------------- assembly

VARIANT_KEYS = ("name", "cuda", "cudnn", "nccl", "compute_capabilities", "ptx", "sources", "packages")
UNCONFIRMED: list[str] = []


def load_index_variants() -> dict:
    doc = yaml.safe_load(VARIANTS_FILE.read_text("utf-8"))
    out = {}
    for rel in doc["releases"]:
        for v in rel["versions"]:
            if v in out:
                raise RefreshError(f"{VARIANTS_FILE.name}: {v} listed twice")
            out[v] = rel
    return {"arch_lists": doc["arch_lists"], "releases": out, "sources": doc["sources"]}


def arch_for(table: dict, version: str, name: str) -> dict:
    """compute_capabilities/ptx of variant `name` of torch `version`: the first arch_lists
    row whose variant matches and whose torch specifier contains the version."""
    from packaging.specifiers import SpecifierSet
    if name == "cpu":
        return {"compute_capabilities": [], "ptx": None}
    for row in table["arch_lists"]:
        if row["variant"] == name and Version(version) in SpecifierSet(row["torch"]):
            if not row.get("confirmed", False):
                UNCONFIRMED.append(f"torch {version} {name}: TORCH_CUDA_ARCH_LIST ({row['source']})")
            return {"compute_capabilities": list(row["sass"]), "ptx": row["ptx"]}
    raise RefreshError(f"torch {version} {name}: no arch_lists row in {VARIANTS_FILE.name}")


def build_release(rel: dict, comp: dict, table: dict) -> dict:
    v = rel["version"]
    hand = table["releases"].get(v)
    if hand is None:
        raise RefreshError(f"torch {v}: no entry in {VARIANTS_FILE.name}; add its index variants")
    pypi_name = variant_name(rel["cuda"]) if rel["packages"] else None
    hand_vars = {h["name"]: h for h in hand["variants"]}
    if len(hand_vars) != len(hand["variants"]):
        raise RefreshError(f"torch {v}: a variant is listed twice in {VARIANTS_FILE.name}")
    if not hand.get("complete", True):
        UNCONFIRMED.append(f"torch {v}: index variants unknown; only cpu and PyPI's {pypi_name} emitted")
    elif not hand.get("confirmed", False):
        UNCONFIRMED.append(f"torch {v}: index variants/cuDNN/NCCL ({hand['source']})")
    if pypi_name is not None and pypi_name not in hand_vars:
        if hand.get("complete", True):
            warn(f"torch {v}: PyPI variant {pypi_name} is not among the index variants "
                 f"{list(hand_vars)} in {VARIANTS_FILE.name}")
        hand_vars[pypi_name] = {"name": pypi_name}

    variants = []
    for name, hv in hand_vars.items():
        if name == pypi_name:
            for key in ("cuda", "cudnn", "nccl"):
                if key in hv and hv[key] != rel[key]:
                    warn(f"torch {v} {name}: {key} in {VARIANTS_FILE.name} is {hv[key]!r}, "
                         f"PyPI METADATA says {rel[key]!r}; PyPI wins")
            entry = {"name": name, "cuda": rel["cuda"], "cudnn": rel["cudnn"], "nccl": rel["nccl"],
                     **arch_for(table, v, name),
                     "sources": ["pypi", f"pytorch-{name}"], "packages": dict(rel["packages"])}
        else:
            if name != "cpu" and not hv.get("cuda"):
                raise RefreshError(f"torch {v} {name}: {VARIANTS_FILE.name} gives no cuda for a "
                                   f"variant PyPI does not carry (PyPI's is {pypi_name})")
            if name != "cpu" and variant_name(hv["cuda"]) != name:
                raise RefreshError(f"torch {v} {name}: cuda {hv['cuda']} does not match the name")
            entry = {"name": name, "cuda": hv.get("cuda"), "cudnn": hv.get("cudnn"),
                     "nccl": hv.get("nccl"), **arch_for(table, v, name),
                     "sources": [f"pytorch-{name}"], "packages": dict(hv.get("packages") or {})}
        variants.append(entry)

    def order(e):  # PyPI's variant first, then CUDA variants newest first, cpu last
        if e["name"] == pypi_name:
            return (0, 0)
        if e["name"] == "cpu":
            return (2, 0)
        return (1, -int(e["name"][2:]))
    variants.sort(key=order)

    companions = {}
    for project in ("torchvision", "torchaudio"):
        hits = comp[project].get(v, [])
        if len(hits) > 1:
            warn(f"torch {v}: several {project} releases pin it: {[str(h[0]) for h in hits]}; "
                 "taking the newest")
        if hits:
            companions[project] = str(max(hits)[0])
        else:
            warn(f"torch {v}: no {project} release on PyPI pins torch=={v}")
    return {
        "framework": "pytorch",
        "version": v,
        "released": rel["released"],
        "pythons": rel["pythons"],
        "companions": companions,
        "pypi_variant": pypi_name,
        "variants": [{k: e[k] for k in VARIANT_KEYS} for e in variants],
        "source": f"pypi:torch/{rel['wheel']}",
    }


# --------------------------------------------------------------------------- YAML output

class Dumper(yaml.SafeDumper):
    def ignore_aliases(self, data):
        return True


def _str(d, s):
    return d.represent_scalar("tag:yaml.org,2002:str", s, style='"' if _needs_quote(s) else None)


def _needs_quote(s: str) -> bool:
    # Quote every version-looking or otherwise ambiguous string.
    return s[:1].isdigit() or s[:1] in "=<>!~*" or s in ("null", "true", "false", "")


Dumper.add_representer(str, _str)


def flow_lists(d, data):
    flow = all(isinstance(x, (str, int, float)) or x is None for x in data)
    return d.represent_sequence("tag:yaml.org,2002:seq", data, flow_style=flow)


def flow_dicts(d, data):
    flow = bool(data) and all(isinstance(x, (str, int, float)) or x is None for x in data.values()) \
        and not {"name", "framework", "version", "branch"} & set(data)
    return d.represent_mapping("tag:yaml.org,2002:map", data.items(), flow_style=flow or not data)


Dumper.add_representer(list, flow_lists)
Dumper.add_representer(dict, flow_dicts)

HEADER = """\
# GENERATED by tools/refresh_pytorch.py -- do not edit by hand; rerun the script.
# Facts on PyPI (pythons, PyPI's default variant, its nvidia-* pins, companions) are read
# from PyPI's simple index and each release's wheel METADATA (entry `source:`).
# Variants not on PyPI (download.pytorch.org/whl/<variant>) come from
# tools/pytorch_index_variants.yaml, kept by hand from PyTorch's published facts.
# For index variants that bundle cuDNN/NCCL instead of pinning nvidia-* wheels,
# cudnn/nccl give the bundled version and packages is {}.
"""


def dump(doc: dict) -> str:
    parts = [HEADER]
    for section in ("frameworks", "framework_releases", "wheel_sources"):
        parts.append("\n")
        parts.append(yaml.dump({section: doc[section]}, Dumper=Dumper, sort_keys=False,
                               width=200, allow_unicode=True))
    return "".join(parts)


# --------------------------------------------------------------------------- main

def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    ap.add_argument("--refresh", action="store_true", help="refetch simple-index pages")
    ap.add_argument("--jobs", type=int, default=16)
    ap.add_argument("--report", action="store_true", help="print a summary table to stdout")
    args = ap.parse_args(argv)

    table = load_index_variants()
    with cf.ThreadPoolExecutor(3) as ex:
        idx = dict(zip(("torch", "torchvision", "torchaudio"),
                       ex.map(lambda p: simple_index(p, args.refresh),
                              ("torch", "torchvision", "torchaudio"))))
    torch_rels = releases(idx["torch"], FIRST)
    with cf.ThreadPoolExecutor(args.jobs) as ex:
        futs = {ex.submit(torch_release, v, fs): v for v, fs in torch_rels.items()}
        comp_futs = {p: ex.submit(companion_pins, p, idx[p],
                                  Version("0.14.0") if p == "torchvision" else Version("0.13.0"))
                     for p in ("torchvision", "torchaudio")}
        rels = {futs[f]: f.result() for f in cf.as_completed(futs)}
        comp = {p: f.result() for p, f in comp_futs.items()}

    out_rels = [build_release(rels[v], comp, table) for v in sorted(rels)]
    for v in sorted(rels):
        r = rels[v]
        if r["superseded"]:
            warn(f"torch {v}: {r['wheel']} (highest build tag) supersedes {r['superseded']}")
        if r["metadata_via"] == "range":
            warn(f"torch {v}: PyPI serves no PEP 658 metadata for {r['wheel']}; "
                 "METADATA read from the wheel with range requests")
    unknown = set(table["releases"]) - {str(v) for v in rels}
    if unknown:
        warn(f"{VARIANTS_FILE.name} lists releases PyPI does not have: {sorted(unknown, key=Version)}")

    used = sorted({s for r in out_rels for var in r["variants"] for s in var["sources"]} - {"pypi"},
                  key=lambda s: (s == "pytorch-cpu", s))
    doc = {
        "frameworks": [{
            "name": "pytorch", "package": "torch", "companions": ["torchvision", "torchaudio"],
            "smoke": "torch", "source": "https://pytorch.org/get-started/previous-versions/",
        }],
        "framework_releases": out_rels,
        "wheel_sources": [{"name": "pypi", "kind": "pypi", "url": "https://pypi.org/simple",
                           "source": "https://pypi.org/project/torch/"}] + [
            {"name": s, "kind": "index", "url": f"https://download.pytorch.org/whl/{s[len('pytorch-'):]}",
             "source": table["sources"]["wheel_sources"]} for s in used],
    }
    text = dump(doc)
    # Self-check: the text must load back to the same data.
    if yaml.safe_load(text) != json.loads(json.dumps(doc)):
        raise RefreshError("YAML round trip changed the data")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text, "utf-8")
    print(f"wrote {args.out} ({len(out_rels)} releases, {len(used) + 1} wheel sources)", file=sys.stderr)

    for line in UNCONFIRMED:
        warn(f"unconfirmed: {line}")
    if args.report:
        print("| torch | released | PyPI variant | CUDA | cuDNN | NCCL | pythons | torchvision | torchaudio | index variants |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        for r in out_rels:
            pv = next((x for x in r["variants"] if x["name"] == r["pypi_variant"]), {})
            print(f"| {r['version']} | {r['released']} | {r['pypi_variant']} | {pv.get('cuda')} | "
                  f"{pv.get('cudnn')} | {pv.get('nccl')} | {', '.join(r['pythons'])} | "
                  f"{r['companions'].get('torchvision')} | {r['companions'].get('torchaudio')} | "
                  f"{', '.join(x['name'] for x in r['variants'] if x['name'] != r['pypi_variant'])} |")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except RefreshError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(1)
