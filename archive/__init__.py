"""The time-travel archive: the temporal index structures of the MVBT/RI-tree thesis
(``../shared/seeds/004``) on a page store with an LRU buffer that counts page accesses: a
variable-length B+-tree, the variable-length multiversion B-tree (transaction time) and the
relational interval tree (valid time, over B+-trees or SQL tables), plus the Onyx archive
model built on them (messages as temporal triples, profile lifetimes, replay). A pure
library: it never imports Spark or Kafka (the archive writer, ``archive.writer``, is the
Spark edge).
"""

from archive.bptree import BPlusTree
from archive.errors import ArchiveError
from archive.mvbt import MVBT
from archive.pages import PageStore
from archive.ritree import RITree

__all__ = ["MVBT", "RITree", "BPlusTree", "PageStore", "ArchiveError"]
