"""MkDocs hook: show the engine's Sphinx-style cross-reference roles as code.

The docstrings use reStructuredText roles (``:class:`Panel```, ``:func:`~causaltrace.x.y```),
which mkdocstrings renders literally as ``:class:<code>Panel</code>``. This hook keeps the code
span and drops the role (and a leading ``~``, which in Sphinx means "show the last name only").
"""

from __future__ import annotations

import re

_ROLE = re.compile(
    r":(?:py:)?(?:class|func|meth|mod|data|attr|exc|obj|const):<code>(~?)([^<]*)</code>"
)


def _name(match: re.Match[str]) -> str:
    tilde, target = match.groups()
    return f"<code>{target.rsplit('.', 1)[-1] if tilde else target}</code>"


def on_page_content(html: str, **kwargs: object) -> str:
    return _ROLE.sub(_name, html)
