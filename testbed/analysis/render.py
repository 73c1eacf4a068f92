"""HTML pages from the jinja2 templates in ``testbed/analysis/templates`` (autoescaped)."""
from __future__ import annotations

import os
from functools import lru_cache

TEMPLATES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "templates")


@lru_cache(maxsize=1)
def _environment():
    from jinja2 import Environment, FileSystemLoader, StrictUndefined
    return Environment(loader=FileSystemLoader(TEMPLATES), autoescape=True,
                       undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True)


def render(template: str, **context) -> str:
    """The template file ``template`` rendered with ``context``."""
    return _environment().get_template(template).render(**context)
