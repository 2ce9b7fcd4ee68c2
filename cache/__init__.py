"""The semantic cache of query regions (the YACOB mediator's, thesis ``002``): ad-hoc
queries over recent messages answered from the regions earlier queries fetched, with only
the remainder sent to the source. Regions are per concept (an element path), each one
conjunction of constant selections with its result items, pairwise disjoint; match-type,
cache-lookup and the staged remainder follow the thesis, on XPath's semantics. A pure
library: it never imports Spark, Kafka or ``broker``.

>>> from cache import Condition, match_type
>>> match_type(Condition.parse("contains(@A, 'van Gogh')"), Condition.parse("contains(@A, 'Gogh')"))
'containing'
"""

from cache.condition import Condition, match_type
from cache.errors import CacheError
from cache.query_text import split_query
from cache.regions import RegionInfo
from cache.semantic_cache import Lookup, QueryResult, SemanticCache
from cache.window import Window

__all__ = ["Condition", "SemanticCache", "match_type", "CacheError", "Lookup", "QueryResult", "RegionInfo", "Window",
           "split_query"]
