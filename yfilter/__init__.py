"""The filtering engine: a YFilter-style shared NFA over the XPath/XQuery subset of
Onyx profiles, with the operator network for value predicates and nested paths,
the runtime driven by element events, the holistic plan scheduler and the
transformation of messages. A pure library: it never imports Spark or Kafka.
"""
