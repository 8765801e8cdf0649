"""What a command could not clean up: a container the Docker daemon did not remove when
asked (it stopped answering). The command's last words name it instead of claiming that
nothing half-done was kept; the next envgen's reap removes it by its labels."""
from __future__ import annotations

_LEFT: list[str] = []


def note(what: str) -> None:
    if what not in _LEFT:
        _LEFT.append(what)


def taken() -> list[str]:
    """What was noted since the last call, and forget it."""
    out = list(_LEFT)
    _LEFT.clear()
    return out


def sentence(left: list[str]) -> str:
    return (f"left behind: {', '.join(left)} (the Docker daemon did not answer its removal; "
            f"the next envgen run removes it, or `docker rm -f` it)")
