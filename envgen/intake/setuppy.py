"""setup.py read with `ast`, never run, and setup.cfg read with configparser:
`install_requires` and `extras_require` (chosen with --extra). A literal, or a name bound
once to a literal at module level, is read; anything computed is said, with its line, and
install_requires computed is refused (envgen cannot know it without running the file)."""
from __future__ import annotations

import ast
import configparser
from pathlib import Path

from packaging.utils import canonicalize_name

from .line import parse
from .model import Intake, bad, show
from .text import line_of, read


def _literal(node, names: dict):
    if isinstance(node, ast.Name) and node.id in names:
        return _literal(names[node.id], {})
    return ast.literal_eval(node)


_MUTATORS = frozenset({"append", "extend", "insert", "update", "pop", "remove", "clear",
                       "setdefault", "__setitem__", "__iadd__", "sort", "reverse"})


def _changed(tree: ast.AST, key: str) -> bool:
    """Whether `key` is changed anywhere but its one module-level binding: a method that
    changes it in place, an augmented assignment, an item assigned, or a binding inside a
    block (`if sys.platform != "win32": install_requires.append(...)`)."""
    top = {id(n) for n in getattr(tree, "body", ())}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                isinstance(node.func.value, ast.Name) and node.func.value.id == key and \
                node.func.attr in _MUTATORS:
            return True
        if isinstance(node, ast.AugAssign) and isinstance(node.target, (ast.Name, ast.Subscript)):
            t = node.target.value if isinstance(node.target, ast.Subscript) else node.target
            if isinstance(t, ast.Name) and t.id == key:
                return True
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and id(node) not in top:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                for n in ast.walk(t):
                    if isinstance(n, ast.Name) and n.id == key:
                        return True
        if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name)
                and t.value.id == key for t in node.targets):
            return True
    return False


def read_setup_py(path: Path, extras=()) -> Intake:
    file = str(path)
    text = read(path, "setup.py")
    try:
        tree = ast.parse(text, file)
    except (SyntaxError, ValueError) as e:
        raise bad(f"is not a setup.py envgen can read: not Python ({getattr(e, 'msg', e)})",
                  file, getattr(e, "lineno", None)) from None
    except (RecursionError, MemoryError):   # Python's parser builds one node per operand
        raise bad("is not a setup.py envgen can read: an expression in it is too deep for "
                  "Python's parser (thousands of operands in one line?)", file) from None
    names: dict[str, ast.AST] = {}
    for node in tree.body:   # module-level NAME = literal, bound once
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and \
                isinstance(node.targets[0], ast.Name):
            key = node.targets[0].id
            names[key] = node.value if key not in names else ast.Constant(None)
    for key in list(names):   # changed anywhere after (append, +=, a rebinding in an if):
        if _changed(tree, key):   # computed, not the literal it was bound to
            names[key] = ast.Name(id=key, ctx=ast.Load())
    call = next((n for n in ast.walk(tree) if isinstance(n, ast.Call) and (
        getattr(n.func, "id", None) == "setup" or getattr(n.func, "attr", None) == "setup")),
        None)
    if call is None:
        raise bad("is not a setup.py envgen can read: it calls no setup(...)", file)
    if any(isinstance(k, ast.keyword) and k.arg is None for k in call.keywords):
        raise bad("setup(**...) passes computed arguments; envgen reads setup.py without "
                  "running it: write install_requires as a list in setup(), setup.cfg or "
                  "pyproject.toml", file, call.lineno)
    kw = {k.arg: k for k in call.keywords}
    notes, reqs = [], []
    computed = []
    for k in call.keywords:
        try:
            _literal(k.value, names)
        except (ValueError, TypeError, SyntaxError, RecursionError):
            computed.append(f"{k.arg} (line {k.value.lineno})")
    if computed:
        notes.append(f"{file}: computed, not read: {', '.join(computed)}")

    def items(k: ast.keyword, what: str) -> list:
        try:
            value = _literal(k.value, names)
        except (ValueError, TypeError, SyntaxError, RecursionError):
            raise bad(f"{what} is computed ({ast.unparse(k.value)[:60]}); envgen reads "
                      f"setup.py without running it: write it as a list of strings, or give "
                      f"envgen the requirements file it reads", file, k.value.lineno) from None
        return value

    if "install_requires" in kw:
        k = kw["install_requires"]
        value = items(k, "install_requires")
        if isinstance(value, str):
            value = value.splitlines()
        if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
            raise bad("install_requires must be a list of strings", file, k.value.lineno)
        for v in value:
            if v.strip() and not v.strip().startswith("#"):
                reqs.append(parse(v, file, _line(text, v, k.value.lineno)))
    if extras:
        k = kw.get("extras_require")
        table = items(k, "extras_require") if k is not None else {}
        if not isinstance(table, dict):
            raise bad("extras_require must be a mapping", file, k.value.lineno)
        for e in extras:
            e = next((key for key in table if isinstance(key, str)
                      and canonicalize_name(key) == canonicalize_name(e)), e)   # PEP 685
            if e not in table:
                raise bad(f"--extra {show(e)}: extras_require has "
                          f"{', '.join(sorted(str(k)[:40] for k in table)) or 'none'}", file,
                          k.value.lineno if k is not None else call.lineno)
            value = table[e]
            if isinstance(value, str):   # setuptools reads a string as one line each
                value = value.splitlines()
            if not isinstance(value, (list, tuple)) or not all(isinstance(v, str)
                                                               for v in value):
                raise bad(f"extras_require[{show(e)}] must be a list of strings", file,
                          k.value.lineno)
            for v in value:
                if v.strip() and not v.strip().startswith("#"):
                    reqs.append(parse(v, file, _line(text, v, k.value.lineno)))
    return Intake(path=file, kind="setup.py (read, not run)", requirements=tuple(reqs),
                  notes=tuple(notes))


def _line(text: str, value: str, near: int) -> int:
    n = line_of(text, value)
    return n if n >= near or n == 1 and value not in text else near if n == 1 else n


def read_setup_cfg(path: Path, extras=()) -> Intake:
    file = str(path)
    text = read(path, "setup.cfg")
    cfg = configparser.ConfigParser(interpolation=None)
    try:
        cfg.read_string(text, file)
    except configparser.Error as e:
        raise bad(f"is not a setup.cfg: {str(e).splitlines()[0][:160]}", file,
                  getattr(e, "lineno", None)) from None
    if not cfg.has_section("options") and not cfg.has_section("metadata"):
        raise bad("is not a setup.cfg envgen can read: it has no [options]", file)
    reqs = []

    def take(value: str, start: str):
        at = text.find(start)
        for v in value.splitlines():
            v = v.split(" #")[0].strip()
            if v and not v.startswith("#"):
                reqs.append(parse(v, file, line_of(text, v, max(at, 0))))

    take(cfg.get("options", "install_requires", fallback=""), "install_requires")
    for e in extras:
        if cfg.has_section("options.extras_require"):   # PEP 685: Foo_Bar is foo-bar
            e = next((key for key in cfg.options("options.extras_require")
                      if canonicalize_name(key) == canonicalize_name(e)), e)
        if not cfg.has_option("options.extras_require", e):
            have = cfg.options("options.extras_require") if cfg.has_section(
                "options.extras_require") else []
            raise bad(f"--extra {show(e)}: [options.extras_require] has "
                      f"{', '.join(have) or 'none'}", file, line_of(text, "extras_require"))
        take(cfg.get("options.extras_require", e), "[options.extras_require]")
    return Intake(path=file, kind="setup.cfg", requirements=tuple(reqs))
