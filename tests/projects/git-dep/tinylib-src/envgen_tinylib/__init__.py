"""A tiny library kept in git: envgen's git-reference test builds it from its archive."""
__version__ = "0.3.1"


def answer() -> int:
    return 42
