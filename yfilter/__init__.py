"""The filtering engine: a YFilter-style shared NFA over the XPath subset of Onyx
profiles, with the operator network for value predicates and nested paths, a lazy
DFA over it, and the runtime driven by the elements of a message. A pure library:
it never imports Spark or Kafka.

>>> from yfilter import Engine
>>> e = Engine()
>>> e.add("q1", "/nitf[head/pubdata/@edition.area='SF']")
>>> e.match(b"<nitf><head><pubdata edition.area='SF'/></head></nitf>")
frozenset({'q1'})
"""

from yfilter.engine import Engine, Matches
from yfilter.errors import MessageError, ProfileError

__all__ = ["Engine", "Matches", "MessageError", "ProfileError"]
