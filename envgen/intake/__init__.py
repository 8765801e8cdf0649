"""A team's own dependency file read as requirements, each with its file:line: one reader
per kind of file (requirements files, pyproject.toml, setup.cfg and setup.py read
statically, conda's environment.yml, uv.lock and pylock.toml), and a folder's file picked
as repo2docker picks it. `read(path)` is the front door; nothing here runs the team's
code or reaches the network."""
from __future__ import annotations

from .model import Intake, Wanted
from .pick import read

__all__ = ["Intake", "Wanted", "read"]
