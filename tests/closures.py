"""Closures for tests that render stacks whose wheels come from an index this machine
cannot reach (download.pytorch.org): made from the stack's own pins, each with a stated
reason instead of a hash. Formatting tests only; the real resolver has its own tests."""
from __future__ import annotations

from envgen.core.model import Closure, Pin
from envgen.resolve import closure as closure_mod

CREATED = "2026-12-01T00:00:00Z"


def fake_closure(stack) -> Closure:
    inputs = closure_mod.inputs_for(stack)
    pins = [Pin(name=n, version=v, note="test closure: not resolved")
            for n, v in sorted(stack.pip_packages.items()) if v[:1] not in "<>=!~"]
    return Closure(key=closure_mod.key_of(inputs), inputs=inputs, pins=tuple(pins),
                   resolver="test", created=CREATED, stack=stack.stack)


def use_fake_resolver(monkeypatch, tmp_path) -> None:
    """Stored closures stay real; anything that would be resolved gets a fake one, and the
    cache lives in tmp_path."""
    monkeypatch.setenv("ENVGEN_HOME", str(tmp_path / "envgen-home"))
    monkeypatch.setattr(closure_mod, "resolve_closure", lambda stack, **_kw: fake_closure(stack))
