"""The one error tree. Each class carries the exit code the CLI returns (docs/contract.md)."""
from __future__ import annotations


def shown(value: object, limit: int = 60) -> str:
    """A value from the user, quoted and cut short, for a message (never a 10,000-character
    echo; newlines and control characters stay visible)."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 4] + "...'"


def named(name: str) -> str:
    """A file's name as written, quoted (shown) only when it holds a line break or a control
    character: printed raw, such a name could start a line of its own."""
    return name if name.isprintable() else shown(name, 200)


class EnvgenError(Exception):
    """Base of every error envgen reports to a user: one sentence, an exit code, a place."""

    exit_code = 2

    def __init__(self, message: str, *, file: str | None = None, line: int | None = None,
                 hints: tuple[str, ...] | list[str] = (), output: object = None):
        super().__init__(message)
        self.output = output   # a result printed (as JSON on stdout) before the error
        self.message = message
        self.file = file
        self.line = line
        self.hints = tuple(hints)

    @property
    def location(self) -> str | None:
        if self.file is None:
            return None
        file = named(self.file)
        return f"{file}:{self.line}" if self.line else file

    def __str__(self) -> str:
        loc = self.location
        return f"{loc}: {self.message}" if loc else self.message

    def to_json(self) -> dict:
        return {"error": type(self).__name__, "message": self.message, "file": self.file,
                "line": self.line, "exit_code": self.exit_code, "hints": list(self.hints)}


class InputError(EnvgenError):
    """Bad input: a flag, a spec, a matrix, a lock file."""

    exit_code = 2


class MatrixError(InputError):
    """A matrix file is unreadable or breaks the schema; carries every problem found."""

    def __init__(self, problems: list["MatrixError"] | None = None, message: str = "",
                 **kw):
        self.problems = list(problems or [])
        if self.problems and not message:
            first = self.problems[0]
            kw.setdefault("file", first.file)
            kw.setdefault("line", first.line)
            message = first.message
            if len(self.problems) > 1:
                message += f" (and {len(self.problems) - 1} more problem(s))"
        super().__init__(message, **kw)

    def to_json(self) -> dict:
        out = super().to_json()
        if self.problems:
            out["problems"] = [{"file": p.file, "line": p.line, "message": p.message}
                               for p in self.problems]
        return out


class Unsatisfiable(InputError):
    """No stack satisfies the spec and host constraints; hints name the nearest ones that do."""

    exit_code = 2


class CheckFailed(EnvgenError):
    """The thing checked is false: certification failed, verify found drift."""

    exit_code = 1


class EnvironmentMissing(EnvgenError):
    """The host lacks something: no Docker daemon, no GPU where one is required."""

    exit_code = 3


class InternalError(EnvgenError):
    """A bug in envgen: one sentence and where to report it (`--debug` shows the traceback)."""

    exit_code = 4


class BuildFailed(EnvgenError):
    """An image build failed; the message names the step and the log's path."""

    exit_code = 1
