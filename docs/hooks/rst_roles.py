"""A griffe extension for the API pages: the docstrings' reStructuredText roles as Markdown.

The node's docstrings name other objects the Sphinx way (``:func:`name```,
``:class:`~pkg.Name```) and end a paragraph that introduces a literal block with ``::``.
mkdocstrings renders docstrings as Markdown, where both would show as written. This
extension rewrites them, on the docstrings only (never the source), to inline code:
``:func:`pkg.mod.f``` becomes ```pkg.mod.f```, and ``:class:`~pkg.mod.Name``` (the
tilde asks for the last part only) becomes ```Name```. A literal block's ``::`` becomes
``:``; the indented block after it is already a Markdown code block.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

_ROLE = re.compile(r":(?:mod|func|class|meth|attr|data|obj|exc):`(~?)([^`]+)`")
_LITERAL = re.compile(r"\s*::$", re.MULTILINE)


def _role(match: re.Match[str]) -> str:
    tilde, target = match.groups()
    # ``starling.node.samplers.ec_sghmc.\n centralised.SGHMC`` may be cut over two lines.
    target = re.sub(r"\s+", "", target)
    return f"`{target.rsplit('.', 1)[-1] if tilde else target}`"


def markdown(text: str) -> str:
    """``text`` with its roles as inline code and its ``::`` as ``:``."""
    return _LITERAL.sub(":", _ROLE.sub(_role, text))


class RstRoles(griffe.Extension):
    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = markdown(obj.docstring.value)
