"""The report's page: build_report's dict → the text of index.html, through
templates/report.html.j2. Autoescape is on: stack names, reasons, host names and
certificate fields are untrusted text."""
from __future__ import annotations

from functools import lru_cache

import jinja2

from ..render import environment

TEMPLATE = "report.html.j2"


@lru_cache(maxsize=1)
def _html() -> jinja2.Environment:
    # the one environment (loader, StrictUndefined, filters), with HTML escaping on, and
    # without its bytecode cache: the cache keys code by template, not by autoescape, so
    # code compiled by the plain environment would render this page unescaped
    return environment().overlay(autoescape=True, bytecode_cache=None)


def render_page(report: dict) -> str:
    return _html().get_template(TEMPLATE).render(**report)
