"""Checking a profile without an engine: :func:`validate` (``yfilter.validate``).

A registration service must refuse, with the position of the problem, every text an
engine would refuse, before anything is stored. :meth:`yfilter.Engine.add` refuses a
profile while parsing it (the filter parser of :mod:`yfilter.parser`, or the FLWR parser
of :mod:`yfilter.flwr`, whose transformation steps are built as they are parsed) and
compiles what it accepts without further checks; :func:`validate` does the same parsing
and compiling into a throwaway operator registry, so it refuses the same texts, and
costs about a quarter of adding to a fresh ``Engine`` (no automaton, no lazy DFA, no C
tables, no operators made live).

>>> validate("/nitf[head/pubdata/@edition.area = 'SF']")
>>> validate("for $n in $msg/nitf return <r>{$n/body => drop('media')}</r>")
>>> validate("/nitf/head/parent::x")
Traceback (most recent call last):
...
yfilter.errors.ProfileError: unsupported axis 'parent::' at column 12
"""

from __future__ import annotations

from collections.abc import Mapping

from yfilter.compiler import Registry, compile_path
from yfilter.errors import ProfileError
from yfilter.flwr import is_flwr, parse_flwr
from yfilter.parser import parse


def validate(text: str, namespaces: Mapping[str, str] | None = None) -> None:
    """Raise :class:`ProfileError` (with the 1-based column of the offending construct
    where there is one) unless :meth:`yfilter.Engine.add` with these ``namespaces``
    accepts ``text``."""
    try:
        path = parse_flwr(text, namespaces).filter_path() if is_flwr(text) else parse(text, namespaces)
        compile_path(path, Registry(), {})
    except RecursionError:  # not expected: the parsers bound nesting (yfilter.parser.MAX_NESTING)
        raise ProfileError("the profile is nested too deeply") from None
