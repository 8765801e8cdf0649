"""Parse what a user asks for: a stack name (`pytorch-cu121`) or a requirement spec
(`torch==2.3.1`, `torch>=2.4,python=3.11`, `pytorch-cu124,base=debian-trixie`)."""
from __future__ import annotations

import re

from packaging.specifiers import InvalidSpecifier, SpecifierSet

from ..core.errors import InputError, shown
from ..core.record import dataclass
from ..matrix import Matrix

OPTIONS = {"python": r"^3\.[0-9]{1,2}$", "variant": r"^(cu[0-9]{3}|cuda[0-9]{2}|cpu)$",
           "base": r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"}
_NAME = re.compile(r"^([A-Za-z][A-Za-z0-9_.]*?)(?:-(cu[0-9]{3}|cuda[0-9]{2}|cpu))?$")
_REQ = re.compile(r"^([A-Za-z][A-Za-z0-9_.-]*)\s*((?:==|>=|<=|~=|!=|<|>).*)?$")


@dataclass(frozen=True)
class Spec:
    text: str
    framework: str
    specifier: SpecifierSet
    variant: str | None = None
    python: str | None = None
    base: str | None = None
    # other frameworks in the same image, each (framework name, specifier): the base a
    # builds_on framework runs on (`lightning,torch==2.7.1`) or another add-on
    # (`transformers,accelerate`)
    also: tuple[tuple[str, SpecifierSet], ...] = ()

    def describe(self) -> str:
        if self.variant or not str(self.specifier):
            parts = [self.framework + (f"-{self.variant}" if self.variant else "")]
            if str(self.specifier):
                parts.append(str(self.specifier))
        else:
            parts = [f"{self.text.split(',')[0].split('=')[0].split('>')[0].split('<')[0]}"
                     f"{self.specifier}"]
        parts += [f"{name}{spec}" for name, spec in self.also]
        if self.python:
            parts.append(f"python={self.python}")
        if self.base:
            parts.append(f"base={self.base}")
        return " ".join(parts)


def parse_spec(text: str, matrix: Matrix) -> Spec:
    """A Spec, or an InputError naming what is wrong with the text."""
    if not text or len(text) > 200 or any(c.isspace() and c != " " for c in text):
        raise InputError(f"spec {shown(text)} is empty, too long or holds control characters")
    head, *rest = [t.strip() for t in text.split(",")]
    options: dict[str, str] = {}
    clauses: list[str] = []
    also: list[tuple[str, SpecifierSet]] = []
    for token in rest:
        key, eq, value = token.partition("=")
        if eq and key in OPTIONS and not value.startswith("="):
            if not re.fullmatch(OPTIONS[key], value):
                raise InputError(f"spec {shown(text)}: {key}={value!r} is not a valid {key}")
            if key in options and options[key] != value:
                raise InputError(f"spec {shown(text)}: {key} is given twice ({options[key]} and "
                                 f"{value}); keep one")
            options[key] = value
        elif eq and key in OPTIONS:
            raise InputError(f"spec {shown(text)}: {token!r} is not {key}=VALUE")
        elif token and token[0] in "<>=!~":
            clauses.append(token)
        elif (r := _REQ.match(token)) and matrix.framework(r.group(1)):
            also.append((matrix.framework(r.group(1)).name, _specifier(text, r.group(2))))
        else:
            raise InputError(f"spec {shown(text)}: cannot read {token!r} (expected a version "
                             f"clause, another framework, or one of {', '.join(OPTIONS)}=...)")
    variant = None
    m = _NAME.match(head)
    if m and matrix.framework(m.group(1)):
        name, variant = m.group(1), m.group(2)
    else:
        r = _REQ.match(head)
        if not r:
            raise InputError(f"spec {shown(text)}: cannot read {head!r}")
        name = r.group(1)
        if r.group(2):
            clauses.insert(0, r.group(2).strip())
    fw = matrix.framework(name)
    if fw is None:
        known = ", ".join(sorted({f.name for f in matrix.frameworks} |
                                 {f.package for f in matrix.frameworks}))
        if m and m.group(2):   # `tensorflow-cu125`: the framework is what precedes the variant
            name = m.group(1)
        raise InputError(f"spec {shown(text)}: unknown framework {shown(name, 40)} "
                         f"(known: {known})")
    specifier = _specifier(text, ",".join(clauses))
    names = [fw.name] + [n for n, _ in also]
    if len(set(names)) != len(names):
        raise InputError(f"spec {shown(text)}: names a framework twice; give its versions "
                         f"in one clause")
    if "variant" in options:
        if variant and options["variant"] != variant:
            raise InputError(f"spec {shown(text)}: names two variants ({variant} and "
                             f"{options['variant']}); keep one")
        variant = options["variant"]
    return Spec(text=text, framework=fw.name, specifier=specifier, variant=variant,
                python=options.get("python"), base=options.get("base"), also=tuple(also))


def _specifier(text: str, clauses: str | None) -> SpecifierSet:
    try:
        return SpecifierSet((clauses or "").strip())
    except InvalidSpecifier:
        raise InputError(f"spec {shown(text)}: {clauses!r} is not a valid version "
                         f"specifier") from None
