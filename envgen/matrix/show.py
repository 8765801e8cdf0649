"""Rows for `envgen matrix show SECTION`."""
from __future__ import annotations

from ..core.model import V
from .table import Matrix


def _conf(x) -> str:
    """'inferred' for a fact no source states (why in `--json`), else 'stated'."""
    return "inferred" if x.inferred else "stated"


def section_rows(m: Matrix, section: str) -> tuple[list[list], list[str]]:
    rows, header = _rows(m, section)
    items = _items(m, section)
    if items is not None:
        rows = [[*r, _conf(x), x.why] for r, x in zip(rows, items)]
        header = [*header, "confidence", "why"]
    return rows, header


def _items(m: Matrix, section: str):
    return {"drivers": m.drivers, "cuda": m.cuda, "forward_compat": m.forward_compat,
            "gpus": m.gpus, "gpu_architectures": m.architectures, "libraries": m.libraries,
            "bases": m.bases, "frameworks": m.frameworks}.get(section)


def _rows(m: Matrix, section: str) -> tuple[list[list], list[str]]:
    if section == "gpu_architectures":
        return ([[a.arch, a.min_driver, a.last_branch, a.source] for a in m.architectures],
                ["arch", "min_driver", "last_branch", "source"])
    if section == "drivers":
        return ([[d.branch, d.first, d.latest, d.lts, d.eol, d.source] for d in m.drivers],
                ["branch", "first", "latest", "lts", "eol", "source"])
    if section == "cuda":
        return ([[c.version, c.toolkit_driver, m.cuda_major(c.major).minimum_driver,
                  c.runtime, " ".join(c.compute_capabilities), c.source] for c in m.cuda],
                ["version", "toolkit_driver", "minimum_driver", "runtime",
                 "compute_capabilities", "source"])
    if section == "forward_compat":
        return ([[f.cuda, " ".join(f.branches), " ".join(f.gpu_classes), f.source]
                 for f in m.forward_compat], ["cuda", "branches", "gpu_classes", "source"])
    if section == "gpus":
        return ([[g.name, g.cc, g.arch, g.gpu_class, g.brand,
                  (m.gpu_min_driver(g) or ("",))[0], (m.gpu_last_branch(g) or ("",))[0],
                  g.source] for g in m.gpus],
                ["name", "cc", "arch", "class", "brand", "min_driver", "last_branch", "source"])
    if section == "libraries":
        return ([[x.name, x.version, x.cuda, x.source] for x in m.libraries],
                ["name", "version", "cuda", "source"])
    if section == "releases":
        rows = []
        for r in sorted(m.releases, key=lambda r: (r.framework, V(r.version))):
            rows.append([r.framework, r.version, " ".join(r.pythons), r.pypi_variant,
                         " ".join(v.name for v in r.variants)
                         or " ".join(f"{n}{s}" for n, s in r.requires)])
        return rows, ["framework", "version", "pythons", "pypi_variant", "variants/requires"]
    if section == "bases":
        return ([[b.name, b.kind, b.image, b.python, b.cuda, b.cuda_compat, b.source]
                 for b in m.bases],
                ["name", "kind", "image", "python", "cuda", "cuda_compat", "source"])
    if section == "sources":
        return ([[s.name, s.kind, s.url] for s in m.wheel_sources], ["name", "kind", "url"])
    return ([[f.name, f.package, " ".join(f.companions), f.builds_on, f.smoke, f.source]
             for f in m.frameworks],
            ["name", "package", "companions", "builds_on", "smoke", "source"])
