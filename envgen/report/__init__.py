"""`envgen report`: a static HTML page of every stack on every driver branch. grid.py decides
(through diff's verdicts), page.py formats; the command writes the files."""
from .grid import STATES, build_report, cell, columns
from .page import render_page

__all__ = ["STATES", "build_report", "cell", "columns", "render_page"]
