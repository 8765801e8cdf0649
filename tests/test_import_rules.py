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
    assert "envgen.core.errors" in imports(PKG / "matrix" / "load.py")
    assert "envgen.matrix" in imports(PKG / "resolve" / "stack.py")


# ---- the wings ---------------------------------------------------------------------------
# Each folder of envgen/ is a wing along the job's arrows (docs/architecture.md); a module
# left in the hall is a wing of its own. A wing may import only the wings listed here: an
# arrow back up (the renovation removed seven, and two circles) fails this test. Imports
# inside functions count too: they hide an arrow, they do not remove it.
ALLOWED = {
    "core": set(),
    "smoke": set(),
    "matrix": {"core"},
    "resolve": {"core", "matrix"},
    "runtime": {"core", "matrix"},
    "refresh": {"core", "matrix", "resolve"},
    "intake": {"core", "matrix", "resolve"},
    "render": {"core", "matrix", "resolve", "runtime", "smoke"},
    "build": {"core", "matrix", "resolve", "runtime", "render", "smoke"},
    "certs": {"core", "matrix", "runtime"},
    "certify": {"core", "matrix", "resolve", "runtime", "certs", "smoke"},
    "lock": {"core", "matrix", "resolve", "runtime", "render", "build", "certs", "certify"},
    "fleet": {"core", "matrix", "resolve", "runtime", "render", "certs", "certify"},
    "job": {"core", "matrix", "resolve", "runtime", "build", "certs", "certify"},
    "diff": {"core", "matrix", "resolve", "certs"},
    "doctor": {"core", "matrix", "resolve", "runtime", "certs", "diff"},
    "report": {"core", "matrix", "resolve", "render", "certs", "diff"},
    "commands": {"core", "smoke", "matrix", "resolve", "runtime", "refresh", "intake", "render",
                 "build", "certs", "certify", "lock", "fleet", "diff", "doctor", "report",
                 "job"},
    "cli": {"core", "matrix", "resolve", "runtime", "render", "build", "commands"},
    "__main__": {"cli"},
}
HALL_MAX = 12


def wing(module: str) -> str:
    """envgen.certs.store -> certs; envgen.diff -> diff (a module of the hall)."""
    return module.split(".")[1] if module.count(".") else module


def _modules() -> dict[str, Path]:
    out = {}
    for p in PKG.rglob("*.py"):
        parts = list(p.relative_to(PKG.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = p
    return out


MODULES = _modules()


def own_imports(path: Path) -> set[str]:
    """The envgen modules a file imports, each as the module (a name imported from a module
    counts as that module; `from . import x` of a module as x)."""
    found = set()
    for m in imports(path):
        while m and m not in MODULES:
            m = m.rpartition(".")[0]
        if m.startswith("envgen"):
            found.add(m)
    return found


def test_every_folder_and_hall_module_is_a_wing_with_rules():
    wings = {wing(m) for m in MODULES if m != "envgen"}
    assert wings == set(ALLOWED), "a new wing needs its rules here and a row in " \
                                  "docs/architecture.md"


def test_the_hall_holds_few_modules():
    hall = sorted(p.name for p in PKG.glob("*.py"))
    assert len(hall) <= HALL_MAX, hall


@pytest.mark.parametrize("module", sorted(m for m in MODULES if m != "envgen"))
def test_a_wing_imports_only_the_wings_below_it(module):
    mine = wing(module)
    bad = {m for m in own_imports(MODULES[module])
           if m != "envgen" and wing(m) != mine and wing(m) not in ALLOWED[mine]}
    assert not bad, f"{module} ({mine}) imports {sorted(bad)}: an arrow the wing rules " \
                    f"do not allow"


def test_no_import_circle_between_files():
    graph = {m: own_imports(p) - {m, "envgen"} for m, p in MODULES.items()}
    # a package imports what it re-exports from its own modules: that is no circle
    graph = {m: {d for d in deps if not d.startswith(m + ".")} for m, deps in graph.items()}
    seen, stack, on, low, index, circles = {}, [], set(), {}, [0], []

    def visit(v):
        seen[v] = low[v] = index[0]
        index[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in seen:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], seen[w])
        if low[v] == seen[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                circles.append(sorted(comp))
    for v in graph:
        if v not in seen:
            visit(v)
    assert circles == []


DOMAIN = files("core/model.py", "core/errors.py", "core/record.py")


@pytest.mark.parametrize("path", DOMAIN, ids=_ids(DOMAIN))
def test_domain_imports_only_stdlib_and_packaging(path):
    bad = {m for m in imports(path) if top(m) not in STDLIB | {"packaging"}
           and not m.startswith(("envgen.core.model", "envgen.core.errors",
                                 "envgen.core.record"))}
    assert not bad, f"{path.name} imports {bad}"


FACTS = files("matrix/*.py", "resolve/spec.py")


@pytest.mark.parametrize("path", FACTS, ids=_ids(FACTS))
def test_facts_import_no_docker_or_jinja(path):
    bad = {m for m in imports(path) if top(m) in {"docker", "jinja2", "subprocess"}}
    assert not bad, f"{path.name} imports {bad}"


DECISIONS = files("resolve/stack.py", "resolve/over.py", "resolve/compat.py",
                  "resolve/require_cuda.py", "resolve/request.py")


@pytest.mark.parametrize("path", DECISIONS, ids=_ids(DECISIONS))
def test_decisions_import_no_docker_jinja_or_subprocess(path):
    bad = {m for m in imports(path) if top(m) in {"docker", "jinja2", "subprocess"}}
    assert not bad, f"{path.name} imports {bad}"


FORMATTING = files("render/*.py")


@pytest.mark.parametrize("path", FORMATTING, ids=_ids(FORMATTING))
def test_render_imports_no_docker_or_subprocess(path):
    bad = {m for m in imports(path) if top(m) in {"docker"}
           or m.startswith(("envgen.runtime.docker", "envgen.build", "envgen.certify"))}
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
IMPORT_NAMES = {"nemo-toolkit": {"nemo", "omegaconf"},
                # a tf-keras image trains tf-keras's Keras 2 (TF_USE_LEGACY_KERAS=1)
                "tensorflow": {"tf_keras"}}


def test_smoke_payloads_import_only_stdlib_their_framework_and_their_siblings():
    """A payload runs inside the image: the standard library, the framework under test
    (torch for those built over it) and the sibling files that travel with it."""
    from envgen.matrix import load_matrix
    m = load_matrix()
    # jax_smoke and tensorflow_smoke: what flax_smoke, optax_smoke and keras_smoke run
    siblings = {"_harness", "torch_smoke", "torch_habits", "envgen", "jax_smoke",
                "tensorflow_smoke", "keras_fit"}
    for path in files("smoke/*_smoke.py"):
        # keras_torch: Keras's payload over torch's base (the framework's is the first part)
        smoke = path.name.removesuffix("_smoke.py").split("_", 1)[0]
        # the framework whose own payload it is: Flax and Keras stacks borrow jax's and
        # tensorflow's
        fw = min((f for f in m.frameworks if f.smoke == smoke),
                 key=lambda f: f.builds_on is not None)
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
    fit = PKG / "smoke" / "keras_fit.py"   # keras itself is imported inside importer()
    assert {top(x) for x in imports(fit)} <= STDLIB | {"_harness", "envgen", "numpy", "keras"}
