"""Onyx's metadata catalog: MDV's publish & subscribe architecture for distributed metadata
(Keidl, Kreutz, Kemper, Kossmann, ``../shared/seeds/001``; German version ``000``). Metadata is
RDF documents (RDF/XML, RDF Schema with strong and weak references) registered at a backbone
of Metadata Providers (:class:`Backbone`); Local Metadata Repositories (:class:`LocalRepository`)
subscribe by rules of MDV's language (``search C c register c where ...``) and hold what the
rules select, kept up to date by a filter that decomposes rules into triggering and join rules
and evaluates them in SQL (SQLite, or PostgreSQL by URL). A pure library: it never imports
Spark, Kafka or :mod:`broker`; deltas to repositories are plain objects with a JSON form.
"""

from catalog.backbone import Backbone
from catalog.delta import Delta
from catalog.errors import CatalogError, DocumentError, RuleError, SchemaError, SubscriptionError
from catalog.lmr import LocalRepository

__all__ = ["Backbone", "LocalRepository", "Delta", "CatalogError", "RuleError", "SchemaError", "DocumentError",
           "SubscriptionError"]
