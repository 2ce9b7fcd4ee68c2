"""The concept of a query: the element path it selects (``/nitf``,
``/nitf/head/pubdata``, ``//painting``), the thesis' concept (section 4.2: regions are
kept per concept). A concept is an absolute path of the profile language without
predicates, attribute or text steps and namespaced names; it is kept in yfilter's
canonical spelling, so that ``$msg/nitf`` and ``/nitf`` share their regions.

>>> concept_path("$msg/nitf/head/pubdata")
'/nitf/head/pubdata'
>>> concept_path("/nitf[@x]")
Traceback (most recent call last):
...
cache.errors.ConceptError: a concept is an element path without predicates: '/nitf[@x]'
"""

from __future__ import annotations

from yfilter.errors import ProfileError
from yfilter.parser import parse

from cache.errors import ConceptError


def concept_path(concept: str) -> str:
    """The canonical text of ``concept``, or :class:`ConceptError`."""
    if not isinstance(concept, str):
        raise ConceptError(f"a concept is an element path, not {type(concept).__name__}")
    try:
        path = parse(concept)
    except ProfileError as exc:
        raise ConceptError(f"a concept is an element path: {exc}") from None
    if path.tail is not None or any(step.preds for step in path.steps):
        raise ConceptError(f"a concept is an element path without predicates: {concept!r}")
    if any(step.test.startswith("{") for step in path.steps):
        raise ConceptError(f"a concept has no namespaced names: {concept!r}")
    return str(path)
