"""Names: the catalog knows classes and properties by their local names (the part of a URI after
``#``, else after the last ``/``), one namespace for all registered schemas, as MDV's rules write
them (``c.serverInformation.memory``).

>>> local_name("urn:onyx:og#CycleProvider"), local_name("http://example.org/terms/memory")
('CycleProvider', 'memory')
>>> is_name("serverHost"), is_name("edition.area")
(True, False)
"""

from __future__ import annotations

import re

NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_\-]*")
"""What a class, property or variable name may be: the rule language separates steps with ``.``."""


def local_name(uri: str) -> str:
    """The name a class or property URI is known by."""
    for sep in ("#", "/"):
        if sep in uri:
            return uri.rsplit(sep, 1)[1]
    return uri


def is_name(text: str) -> bool:
    """Whether ``text`` can be used as a name in rules."""
    return NAME.fullmatch(text) is not None
