"""Onyx's catalog on MDV (issue 32, paper ``001``): the overlay's metadata — brokers, the links
of every broadcast tree, sources with their schemas and dictionaries, profiles — as RDF
resources of :mod:`broker.metadata.onyx_schema`, held by a Metadata Provider in the
registration service (:class:`~broker.metadata.provider.MetadataProvider`, replicated through
the compacted ``onyx.metadata`` log) and delivered by rules to a Local Metadata Repository at
every broker (:mod:`broker.metadata.broker_lmr`) and to users' metadata subscriptions.
"""
