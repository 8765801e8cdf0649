"""Record the slice of PyPI that tests/test_matrix_refresh.py replays: the PEP 691 pages of
torch, torchvision and torchaudio cut down to a few releases, the nvidia-* wheels their
variants pin in matrices/pytorch.yaml (whose METADATA gives the variants' licences), the newest
wheel of each project lightning requires, and the METADATA of each kept wheel (read with range
requests, as `envgen matrix refresh` does).

    .venv/bin/python tests/data/refresh/record.py     # rewrites recorded.json beside it
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from packaging.utils import parse_wheel_filename  # noqa: E402

from envgen.refresh.pypi import Index  # noqa: E402

KEEP = {"torch": {"2.4.1", "2.5.1", "2.6.0"}, "torchvision": {"0.19.1", "0.20.1", "0.21.0"},
        "torchaudio": {"2.4.1", "2.5.1", "2.6.0"},
        # a framework built over torch: two patches of one line, the newest of the next
        "lightning": {"2.5.5", "2.5.6", "2.6.6"}}
# every Linux x86_64 CPython wheel (the Python versions are derived from them), and one
# macOS wheel per release (which the refresh must pass over)
TAGS = ("x86_64.whl", "cp311-none-macosx", "py3-none-any.whl")
ROOT = Path(__file__).resolve().parents[3]


def nvidia_pins() -> dict[str, set[str]]:
    """The nvidia-* wheels the kept torch releases' variants pin, as the matrix lists them."""
    out: dict[str, set[str]] = {}
    doc = yaml.safe_load((ROOT / "matrices" / "pytorch.yaml").read_text())
    for r in doc["framework_releases"]:
        if r["version"] in KEEP["torch"]:
            for v in r["variants"]:
                for name, version in v["packages"].items():
                    if name.startswith("nvidia-"):
                        out.setdefault(name, set()).add(version)
    return out
FIELDS = ("filename", "size", "upload-time", "requires-python", "yanked", "hashes")


def dependency_pages(index: Index, out: dict) -> None:
    """The projects the kept lightning wheels require (not torch's own), each cut down to its
    newest wheel inside the requirement: the refresh checks the index can install them."""
    from packaging.utils import canonicalize_name

    from envgen.refresh.pypi import requirements
    wanted: dict[str, list] = {}
    for name, text in out["metadata"].items():
        if name.startswith("lightning-"):
            for r in requirements(text, "3.12", name):
                key = canonicalize_name(r.name)
                if key not in out["projects"]:
                    wanted.setdefault(key, []).append(r.specifier)
    for key, specs in sorted(wanted.items()):
        best = None
        for f in index.project(key)["files"]:
            if not f["filename"].endswith(".whl") or f.get("yanked"):
                continue
            ver = parse_wheel_filename(f["filename"])[1]
            if all(s.contains(ver) for s in specs) and (best is None or ver > best[0]):
                best = (ver, {k: f[k] for k in FIELDS if k in f})
        out["projects"][key] = [best[1]] if best else []


def main() -> int:
    index = Index()
    out = {"source": "https://pypi.org/simple (PEP 691 JSON), recorded by this script",
           "projects": {}, "metadata": {}}
    for project, versions in {**KEEP, **nvidia_pins()}.items():
        page = index.project(project)
        files = []
        for f in page["files"]:
            name = f["filename"]
            if not name.endswith(".whl"):
                continue
            ver = str(parse_wheel_filename(name)[1])
            if ver in versions and any(t in name for t in TAGS):
                files.append({k: f[k] for k in FIELDS if k in f})
                if name.endswith(("x86_64.whl", "-any.whl")):   # headers only: what is parsed
                    text = index.metadata(f)[0]
                    out["metadata"][name] = text.split("\n\n", 1)[0] + "\n\n"
        out["projects"][project] = files
    dependency_pages(index, out)
    path = Path(__file__).with_name("recorded.json")
    path.write_text(json.dumps(out, indent=1, sort_keys=True) + "\n")
    print(f"wrote {path}: {sum(map(len, out['projects'].values()))} wheels")
    return 0


if __name__ == "__main__":
    sys.exit(main())
