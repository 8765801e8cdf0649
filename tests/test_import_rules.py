"""The layer rule from style.md, read from the source with `ast`: data flows one way, and
only the shell (cli.py) prints or exits, so nothing imports it."""
from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[1] / "envgen"
STDLIB = set(sys.stdlib_module_names)


def imports(path: Path) -> set[str]:
    """Absolute module names a file imports (relative imports resolved against envgen)."""
    rel = path.relative_to(PKG.parent).with_suffix("")
    package = list(rel.parts[:-1])
    out = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[:len(package) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
                if node.module is None:  # from . import x, y
                    out.update(f"{mod}.{a.name}" for a in node.names)
                else:
                    out.add(mod)
            else:
                out.add(node.module)
    return out


def top(name: str) -> str:
    return name.split(".")[0]


def files(*patterns: str) -> list[Path]:
    found = sorted({p for pat in patterns for p in PKG.glob(pat)})
    assert found, patterns
    return found


def _ids(paths):
    return [str(p.relative_to(PKG.parent)) for p in paths]


def test_relative_imports_resolve():
    assert "envgen.errors" in imports(PKG / "matrix" / "load.py")
    assert "envgen.matrix" in imports(PKG / "resolve.py")


DOMAIN = files("model.py", "errors.py", "record.py")   # record: dataclasses, cheaper


@pytest.mark.parametrize("path", DOMAIN, ids=_ids(DOMAIN))
def test_domain_imports_only_stdlib_and_packaging(path):
    bad = {m for m in imports(path) if top(m) not in STDLIB | {"packaging"}
           and not m.startswith(("envgen.model", "envgen.errors", "envgen.record"))}
    assert not bad, f"{path.name} imports {bad}"


FACTS = files("matrix/*.py", "spec.py")


@pytest.mark.parametrize("path", FACTS, ids=_ids(FACTS))
def test_facts_import_no_docker_or_jinja(path):
    bad = {m for m in imports(path) if top(m) in {"docker", "jinja2", "subprocess"}
           or m.startswith(("envgen.render", "envgen.engine", "envgen.build"))}
    assert not bad, f"{path.name} imports {bad}"


DECISIONS = files("resolve.py", "compat.py", "require_cuda.py")


@pytest.mark.parametrize("path", DECISIONS, ids=_ids(DECISIONS))
def test_decisions_import_no_docker_jinja_or_subprocess(path):
    bad = {m for m in imports(path) if top(m) in {"docker", "jinja2", "subprocess"}
           or m.startswith(("envgen.render", "envgen.engine", "envgen.build",
                            "envgen.certify"))}
    assert not bad, f"{path.name} imports {bad}"


FORMATTING = files("render/*.py")


@pytest.mark.parametrize("path", FORMATTING, ids=_ids(FORMATTING))
def test_render_imports_no_docker_or_subprocess(path):
    bad = {m for m in imports(path) if top(m) in {"docker", "subprocess"}
           or m.startswith(("envgen.engine", "envgen.build", "envgen.certify"))}
    assert not bad, f"{path.name} imports {bad}"


ALL = files("**/*.py")
SHELL = PKG / "commands"   # subcommand handlers split out of cli.py: the shell layer too


def _cli_importers() -> set[Path]:
    return {p for p in ALL if p != PKG / "__main__.py"
            and any(m == "envgen.cli" or m.startswith("envgen.cli.") for m in imports(p))}


def test_nothing_below_the_shell_imports_the_cli():
    below = {p for p in _cli_importers() if SHELL not in p.parents}
    assert not below, f"{_ids(sorted(below))} import envgen.cli"


def test_nothing_but_main_imports_the_cli():
    assert _ids(sorted(_cli_importers())) == []


def test_main_module_is_the_cli_entry():
    assert "envgen.cli" in imports(PKG / "__main__.py")


# the modules a distribution is used through, where they are named otherwise: nemo-toolkit's
# is nemo, and its models take their config as an omegaconf DictConfig (a plain dict is
# refused), so its payload builds one
IMPORT_NAMES = {"nemo-toolkit": {"nemo", "omegaconf"}}


def test_smoke_payloads_import_only_stdlib_their_framework_and_their_siblings():
    """A payload runs inside the image: the standard library, the framework under test
    (torch for those built over it) and the sibling files that travel with it."""
    from envgen.matrix import load_matrix
    m = load_matrix()
    siblings = {"_harness", "torch_smoke", "torch_habits", "envgen"}
    for path in files("smoke/*_smoke.py"):
        smoke = path.name.removesuffix("_smoke.py")
        fw = next(f for f in m.frameworks if f.smoke == smoke)
        # the framework, its companions and what its variants pin (jaxlib), torch under the
        # frameworks built over it, numpy (jax's arrays)
        pinned = {n for r in m.releases_of(fw.name) for v in r.variants for n, _ in v.packages}
        # and, for one built over another, what its releases state they need (NeMo's
        # lightning, whose Trainer fits its models)
        needed = {n for r in m.releases_of(fw.name) for n, _ in r.requires}
        allowed = {fw.package, *IMPORT_NAMES.get(fw.package, ()), *fw.companions, *pinned,
                   *needed, "numpy", "torch" if fw.builds_on or fw.package == "torch" else ""}
        if fw.package == "lightning":   # its older distribution name, imported only without it
            allowed.add("pytorch_lightning")
        bad = {x for x in imports(path) if top(x) not in STDLIB | siblings | allowed}
        assert not bad, f"{path.name} imports {bad}: it runs inside the image"
    harness = PKG / "smoke" / "_harness.py"
    assert {top(x) for x in imports(harness)} <= STDLIB
