"""Records: the part of `dataclasses` that envgen's domain objects use, at a fraction of its
start-up cost. `dataclasses` imports inspect (and with it ast, dis and tokenize) and compiles
five methods per class with exec; for the two dozen classes every command loads that was
about 20 ms of the 80 ms of an `envgen resolve` here. These classes are made with plain
closures instead, and behave as dataclasses do for what envgen asks of them
(tests/test_record.py runs the same checks on both):

- `@dataclass` / `@dataclass(frozen=True)` over annotated class attributes, inherited
  fields first; `field(default=, default_factory=, repr=, compare=, hash=)`;
- `__init__` by position or keyword, `__repr__`, `__eq__` (same class only), `__hash__`
  (frozen: of the compared fields; not frozen: unhashable), assignment refused when frozen
  (FrozenInstanceError, an AttributeError), `__post_init__` when the class has one;
- `replace(obj, **changes)`.

Anything else (order=, slots=, kw_only=, InitVar, ClassVar) is refused when the class is
made, so no one gets a half-dataclass by surprise: use `dataclasses` there."""
from __future__ import annotations

MISSING = object()


class FrozenInstanceError(AttributeError):
    """Assignment to a field of a frozen record."""


class Field:
    __slots__ = ("name", "default", "default_factory", "repr", "compare", "hash")

    def __init__(self, default=MISSING, default_factory=MISSING, repr=True, compare=True,
                 hash=None):
        if default is not MISSING and default_factory is not MISSING:
            raise ValueError("cannot specify both default and default_factory")
        self.name = ""
        self.default, self.default_factory = default, default_factory
        self.repr, self.compare, self.hash = repr, compare, hash


def field(*, default=MISSING, default_factory=MISSING, repr=True, compare=True, hash=None):
    return Field(default, default_factory, repr, compare, hash)


def fields(obj_or_cls) -> tuple[Field, ...]:
    return type.__getattribute__(obj_or_cls if isinstance(obj_or_cls, type)
                                 else type(obj_or_cls), "__record_fields__")


def replace(obj, **changes):
    """A copy of `obj` with `changes`, made through its __init__ as dataclasses.replace."""
    for f in fields(obj):
        if f.name not in changes:
            changes[f.name] = obj.__dict__[f.name]
    return type(obj)(**changes)


def _fields_of(cls) -> tuple[Field, ...]:
    inherited: dict[str, Field] = {}
    for base in reversed(cls.__mro__[1:]):
        for f in base.__dict__.get("__record_fields__", ()):
            inherited[f.name] = f
    own = cls.__dict__.get("__annotations__", {})
    for name, kind in own.items():
        text = kind if isinstance(kind, str) else getattr(kind, "__name__", "")
        if text.split("[")[0].split(".")[-1] in ("ClassVar", "InitVar", "KW_ONLY"):
            raise TypeError(f"{cls.__name__}.{name}: {text} is not supported by "
                            f"envgen.record; use dataclasses")
        value = cls.__dict__.get(name, MISSING)
        f = value if isinstance(value, Field) else Field(default=value)
        f.name = name
        if f.default is MISSING:
            if name in cls.__dict__:
                delattr(cls, name)
        else:
            setattr(cls, name, f.default)   # as dataclasses leaves it: the class's default
        inherited.pop(name, None)
        inherited[name] = f
    result = tuple(inherited.values())
    seen_default = False
    for f in result:
        has = f.default is not MISSING or f.default_factory is not MISSING
        if seen_default and not has:
            raise TypeError(f"non-default argument {f.name!r} follows default argument")
        seen_default = seen_default or has
    return result


def _make_init(cls, flds: tuple[Field, ...]):
    names = tuple(f.name for f in flds)
    known = frozenset(names)
    post_init = getattr(cls, "__post_init__", None)

    def __init__(self, *args, **kwargs):
        if len(args) > len(names):
            raise TypeError(f"{cls.__name__}.__init__() takes {len(names) + 1} positional "
                            f"arguments but {len(args) + 1} were given")
        for k in kwargs:
            if k not in known:
                raise TypeError(f"{cls.__name__}.__init__() got an unexpected keyword "
                                f"argument {k!r}")
        d = self.__dict__
        for i, f in enumerate(flds):
            if i < len(args):
                if f.name in kwargs:
                    raise TypeError(f"{cls.__name__}.__init__() got multiple values for "
                                    f"argument {f.name!r}")
                d[f.name] = args[i]
            elif f.name in kwargs:
                d[f.name] = kwargs[f.name]
            elif f.default is not MISSING:
                d[f.name] = f.default
            elif f.default_factory is not MISSING:
                d[f.name] = f.default_factory()
            else:
                raise TypeError(f"{cls.__name__}.__init__() missing 1 required positional "
                                f"argument: {f.name!r}")
        if post_init is not None:
            self.__post_init__()
    return __init__


def _make_class(cls, frozen: bool):
    flds = _fields_of(cls)
    cls.__record_fields__ = flds
    shown = tuple(f.name for f in flds if f.repr)
    compared = tuple(f.name for f in flds if f.compare)
    hashed = tuple(f.name for f in flds if (f.compare if f.hash is None else f.hash))

    def __repr__(self):
        d = self.__dict__
        return f"{type(self).__qualname__}(" + ", ".join(
            f"{n}={d[n]!r}" for n in shown) + ")"

    def __eq__(self, other):
        if other.__class__ is not self.__class__:
            return NotImplemented
        a, b = self.__dict__, other.__dict__
        return tuple(a[n] for n in compared) == tuple(b[n] for n in compared)

    def __hash__(self):
        d = self.__dict__
        return hash(tuple(d[n] for n in hashed))

    def __setattr__(self, name, value):
        raise FrozenInstanceError(f"cannot assign to field {name!r}")

    def __delattr__(self, name):
        raise FrozenInstanceError(f"cannot delete field {name!r}")

    own = cls.__dict__
    if "__init__" not in own:
        cls.__init__ = _make_init(cls, flds)
    if "__repr__" not in own:
        cls.__repr__ = __repr__
    if "__eq__" not in own:
        cls.__eq__ = __eq__
    if frozen:
        if "__setattr__" in own or "__delattr__" in own:
            raise TypeError(f"cannot overwrite __setattr__ or __delattr__ of frozen "
                            f"{cls.__name__}")
        cls.__setattr__, cls.__delattr__ = __setattr__, __delattr__
        if "__hash__" not in own or own["__hash__"] is None:
            cls.__hash__ = __hash__
    elif "__hash__" not in own:
        cls.__hash__ = None   # eq without frozen: unhashable, as dataclasses makes it
    return cls


def dataclass(cls=None, /, *, frozen: bool = False, **options):
    """`@dataclass` or `@dataclass(frozen=True)`; any other option is refused."""
    if options:
        raise TypeError(f"envgen.record does not support {', '.join(sorted(options))}; "
                        f"use dataclasses")

    def wrap(c):
        return _make_class(c, frozen)
    return wrap if cls is None else wrap(cls)
