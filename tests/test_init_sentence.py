"""When uv finds no closure for a team's file, `init --from` names the team's line that uv's
reason names first, not a line whose name only appears elsewhere in uv's output."""
from __future__ import annotations

from envgen.commands.init import _sentence
from envgen.core.errors import EnvironmentMissing
from envgen.intake.model import Intake, Wanted
from envgen.matrix import load_matrix
from envgen.resolve.spec import parse_spec
from envgen.resolve.stack import Host, resolve

M = load_matrix()
STACK = resolve(M, parse_spec("pytorch-cu121", M), Host())
INTAKE = Intake(path="requirements.txt", kind="requirements", requirements=(
    Wanted("torch==2.4.1", "torch", "requirements.txt", 1),
    Wanted("setuptools<70", "setuptools", "requirements.txt", 2)))


def test_the_line_the_reason_names_is_told_not_the_first_the_output_names():
    e = EnvironmentMissing("uv could not resolve torch==2.4.1, setuptools<70: Because you "
                           "require setuptools<70 and setuptools==84.2.1, we can conclude "
                           "that your requirements are unsatisfiable.")
    s = _sentence(e, INTAKE, STACK, verbose=False)
    assert (s.file, s.line) == ("requirements.txt", 2)
    assert s.message.startswith("setuptools<70 cannot be installed over torch 2.4.1")
    assert "Because you require setuptools<70 and setuptools==84.2.1" in s.message


def test_a_reason_naming_no_line_falls_back_to_the_output_then_to_the_file():
    e = EnvironmentMissing("uv could not resolve torch==2.4.1: Because nothing fits, we can "
                           "conclude that your requirements are unsatisfiable.")
    s = _sentence(e, INTAKE, STACK, verbose=False)
    assert (s.file, s.line) == ("requirements.txt", 1)
    s = _sentence(EnvironmentMissing("no: Because nothing fits."), INTAKE, STACK, False)
    assert (s.file, s.line) == ("requirements.txt", None)
    assert s.message.startswith("the requirements cannot be installed over pytorch-cu121")
