"""The filtering engine: a YFilter-style shared NFA over the XPath subset of Onyx
profiles, with the operator network for value predicates and nested paths, a lazy
DFA over it, and the runtime driven by the elements of a message. A pure library:
it never imports Spark or Kafka.

>>> from yfilter import Engine
>>> e = Engine()
>>> e.add("q1", "/nitf[head/pubdata/@edition.area='SF']")
>>> e.match(b"<nitf><head><pubdata edition.area='SF'/></head></nitf>")
frozenset({'q1'})

:func:`validate` checks a profile without an engine (what a registration service does
before it stores one): the :class:`ProfileError` an engine would raise, or nothing.

>>> from yfilter import validate
>>> validate("/nitf[head/pubdata/@edition.area='SF']")
>>> validate("/nitf[head/pubdata/@edition.area=]")
Traceback (most recent call last):
...
yfilter.errors.ProfileError: expected an expression, found ']' at column 34
"""

from yfilter.engine import Engine, Matches
from yfilter.errors import MessageError, ProfileError
from yfilter.validation import validate

__all__ = ["Engine", "Matches", "MessageError", "ProfileError", "validate"]
