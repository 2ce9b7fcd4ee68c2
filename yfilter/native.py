"""The native runtime of profiles with predicates: their compiled steps and guards
turned into the tables of the C matcher (``yfilter/csrc``), which checks a parsed
message against all of them at once.

Per message the C side reads lxml's tree (or a decoded :class:`formats.Message`'s
columns, :meth:`NativeIndex.match_message`) into flat tables, marks the values the
message holds, and checks only the profiles filed under one of those values whose
whole need the message holds (the necessary test of :mod:`yfilter.keyed`, with the
names of the profile's own steps added). Each candidate's path is checked bottom
up on the message's tables, from one run of words holding everything the check
reads (so a check costs about one cache miss at 100k profiles); nested paths are
memoised per element, so profiles that share one share the work (see
``yfilter/csrc/matcher.c``). The semantics are those of
:mod:`yfilter.operators`, which stays the reference: the engine's differential tests
run both runtimes against lxml.

The tables only grow: a profile that goes is dropped from the results at once and
from the tables at the next rebuild, which runs when the discarded ones outnumber
the live ones (so its cost is amortised over the removals). Adding never rebuilds:
the C side files the profiles again by what the messages hold, after 64 messages
and whenever more than a quarter of them were added or removed since (which also
drops the removed ones from what a message scans).

>>> from lxml import etree
>>> from yfilter.compiler import Registry, compile_path
>>> from yfilter.nfa import Rarity
>>> from yfilter.parser import parse
>>> index = NativeIndex(Rarity())
>>> steps = compile_path(parse("/a[@x = '1']/b"), Registry(), {})
>>> ids = {"p1"}
>>> index.add(steps, ids)
>>> sorted(index.match(etree.fromstring(b"<a x='1'><b/></a>")))
['p1']
>>> index.match(etree.fromstring(b"<a x='2'><b/></a>"))
frozenset()
>>> ids.add("p2")
>>> index.update(ids)
>>> sorted(index.match(etree.fromstring(b"<a x='1'><b/></a>")))
['p1', 'p2']
"""

from __future__ import annotations

from lxml import etree

from formats.message import Message
from yfilter._matcher import CODES, Matcher
from yfilter.keyed import choose_key
from yfilter.nfa import Rarity, Step
from yfilter.operators import (Always, AndP, AttrTest, Comparison, Func, Guard, Nested, NotP,
                               OrP, PosTest, Pred, RelPath, SelfTest, StrArg, TextTest,
                               attr_atom)
from yfilter.values import RELATIONS, number

# Opcodes and operands: defined once, by yfilter/csrc/matcher.c's enums, which the C
# module hands out as CODES (tests/yfilter/test_one_definition.py checks that every
# kind of predicate the compiler makes has one).
_OP, _CMP = CODES["op"], CODES["cmp"]
(OP_ALWAYS, OP_ATTR, OP_TEXT, OP_SELF, OP_POS, OP_NESTED, OP_FUNC, OP_NOT, OP_AND,
 OP_OR) = (_OP[k] for k in ("ALWAYS", "ATTR", "TEXT", "SELF", "POS", "NESTED", "FUNC",
                            "NOT", "AND", "OR"))
CMP_EXISTS, CMP_SEQ, CMP_SNE, CMP_NUM = (_CMP[k] for k in ("EXISTS", "SEQ", "SNE", "NUM"))
FUNCTIONS = dict(CODES["fn"])
AXES = dict(CODES["axis"])
KEY_TABLES = {None: CODES["key"]["none"], "base": CODES["key"]["base"],
              "self": CODES["key"]["self"]}
TAILS = {"self": 0, "attr": 1, "text": 2}  # str_arg's tail (0 string-value, 1 attribute, 2 text)
_ANY = -1  # the '*' name test


GRAM = "\x02"  # trigram values: no message holds U+0002 (see mark_grams in matcher.c)
MAX_GRAMS = 6
# Filing contains / starts-with under trigrams is off: measured on the corpus
# workloads (bench.yfilter, issue 28) the per-message scan of the text cost more than
# the candidates it saved (c-contains 10k 0.23 -> 0.30 ms, c-mixed 100k 0.93 -> 1.26
# ms of C time); the mechanism stays, tested, for workloads with longer literals.
FILE_TRIGRAMS = False


def trigrams(guard: Guard) -> set[str]:
    """Character trigrams a message must hold for ``guard`` to hold on one of its
    elements: those of the literal of each ``contains(x, 'lit')`` /
    ``starts-with(x, 'lit')`` conjunct (x a path: its string() is a stretch of the
    message's text or an attribute value, whose trigrams the C side marks), at most
    ``MAX_GRAMS`` of them, spread over the literal.

    >>> from yfilter.compiler import Registry, compile_path
    >>> from yfilter.parser import parse
    >>> (_, _, g), = compile_path(parse("/a[contains(@x, 'abcd') and not(@y)]"), Registry(), {})
    >>> sorted(t[1:] for t in trigrams(g))
    ['abc', 'bcd']
    """
    out: set[str] = set()
    for p in guard.preds:
        for c in p.conjuncts():
            if not isinstance(c, Func):
                continue
            a, b = c.args
            lit = b.literal
            if a.literal is not None or lit is None or len(lit) < 3:
                continue
            grams = sorted({lit[i:i + 3] for i in range(len(lit) - 2)})
            step = max(1, len(grams) // MAX_GRAMS)
            out.update(GRAM + g for g in grams[::step][:MAX_GRAMS])
    return out


class NativeIndex:
    """Profiles with predicates, compiled for the C matcher. ``add`` takes a
    profile's compiled steps and the set of ids registered with it (what the matcher
    reports when it matches; :meth:`update` after changing it); ``match`` takes a
    parsed message."""

    def __init__(self, rarity: Rarity | None = None) -> None:
        """``rarity``: how often registered guards compare each value; by default
        the index's own, counted from the profiles it holds."""
        self._rarity = rarity if rarity is not None else Rarity()
        self._counts = rarity is None
        # by id(ids): the profile's alternatives (compiled steps each) and its ids
        self._profiles: dict[int, tuple[list[tuple[Step, ...]], set[str]]] = {}
        self._live = 0  # alternatives of the profiles held (kept, not summed: a discard costs O(1))
        self._build()

    def _build(self) -> None:
        self._m = Matcher(etree._Element)
        self._values: dict[str, int] = {}
        self._guards: dict[str, int] = {}
        self._rels: dict[str, int] = {}
        self._numbers: dict[float, int] = {}
        self._qids: dict[int, list[int]] = {}
        self._filed = 0  # queries filed since the last build
        for alts, ids in self._profiles.values():
            self._file_all(alts, ids)

    def __len__(self) -> int:
        return len(self._profiles)

    def add(self, steps: tuple[Step, ...] | list[tuple[Step, ...]], ids: set[str]) -> None:
        """File a profile (``ids`` stays the caller's: it names the profile here):
        its compiled steps, or a list of alternatives (see
        :func:`yfilter.compiler.alternatives`), each filed by what it needs and
        reporting ``ids`` when it matches."""
        alts = list(steps) if isinstance(steps, list) else [steps]
        self._profiles[id(ids)] = (alts, ids)
        self._live += len(alts)
        self._count(alts, 1)
        self._file_all(alts, ids)

    def update(self, ids: set[str]) -> None:
        """Report the profile added with ``ids`` under its current members."""
        members = tuple(ids)
        for q in self._qids[id(ids)]:
            self._m.set_ids(q, members)

    def discard(self, ids: set[str]) -> None:
        """Forget the profile added with ``ids``."""
        alts, _ = self._profiles.pop(id(ids))
        self._live -= len(alts)
        self._count(alts, -1)
        for q in self._qids.pop(id(ids)):
            self._m.discard(q)
        live = self._live
        if live and self._filed - live > max(live, 1024):
            self._build()

    def queries(self) -> int:
        """Queries filed in the C matcher (one per alternative of each profile)."""
        return sum(len(q) for q in self._qids.values())

    def match(self, root: etree._Element) -> frozenset[str] | None:
        """Ids of the matching profiles, or None when the message holds a node the C
        reader does not model (an entity reference, say): read its columns instead
        (:meth:`match_message`, as the engine does)."""
        return self._m.match(root)

    def match_message(self, msg: Message) -> frozenset[str] | None:
        """:meth:`match` on a decoded message's columns (no tree is built); None also
        when they describe no tree (a corrupted decode)."""
        return self._m.match_table(msg.tags, msg.depths, msg.texts, msg.tails, msg.attr_counts,
                                   msg.attr_names, msg.attr_values)

    def stats(self) -> dict[str, int]:
        return self._m.stats()

    # -- compiling --------------------------------------------------------------
    def _count(self, alts: list[tuple[Step, ...]], by: int) -> None:
        if self._counts:
            for steps in alts:
                for _, _, g in steps:
                    if g is not None:
                        self._rarity.count(g, by)

    def _file_all(self, alts: list[tuple[Step, ...]], ids: set[str]) -> None:
        self._qids[id(ids)] = [self._file(steps, ids) for steps in alts]

    def _file(self, steps: tuple[Step, ...], ids: set[str]) -> int:
        base: set[str] = set()
        selves: set[str] = set()
        grams: set[str] = set()
        for _, test, guard in steps:
            if test != "*":
                base.add(test)
            if guard is not None:
                base |= guard.need.base
                selves |= guard.need.selves
                if FILE_TRIGRAMS:
                    grams |= trigrams(guard)
        words = self._steps(steps)
        table, key = choose_key(frozenset(base), frozenset(selves), self._rarity)
        if grams and (key is None or self._rarity.of(key) == 0):
            table, key = "base", min(grams)  # rarer than a name; the C side rekeys by use
        base |= grams
        self._filed += 1
        return self._m.add_query(
            words, [self._value(v) for v in base], [self._value(v) for v in selves],
            KEY_TABLES[table], -1 if key is None else self._value(key), tuple(ids))

    def _value(self, s: str) -> int:
        v = self._values.get(s)
        if v is None:
            v = self._values[s] = self._m.intern(s)
        return v

    def _name(self, test: str) -> int:
        return _ANY if test == "*" else self._value(test)

    def _number(self, x: float) -> int:
        n = self._numbers.get(x)
        if n is None:
            n = self._m.add_number(x)
            if x == x:  # NaN is never equal to itself: one slot per use
                self._numbers[x] = n
        return n

    def _guard(self, g: Guard | None) -> int:
        if g is None:
            return -1
        gid = self._guards.get(g.key)
        if gid is None:
            offsets = [self._pred(p) for p in g.preds]
            gid = self._guards[g.key] = self._m.add_guard(
                self._name(g.test), offsets, [int(p.positional) for p in g.preds])
        return gid

    def _rel(self, rel: RelPath) -> int:
        rid = self._rels.get(rel.key)
        if rid is None:
            rid = self._rels[rel.key] = self._m.add_rel(self._steps(rel.steps))
        return rid

    def _steps(self, steps: tuple[Step, ...]) -> list[int]:
        """Location steps as (axis, name, guard) words."""
        words: list[int] = []
        for axis, test, guard in steps:
            words += (AXES[axis], self._name(test), self._guard(guard))
        return words

    def _compare(self, cmp: Comparison | None) -> list[int]:
        """A comparison as three words (see :func:`yfilter.values.compare_string`:
        ``=`` and ``!=`` with a string compare strings, the rest numbers)."""
        if cmp is None:
            return [CMP_EXISTS, 0, 0]
        op, value = cmp
        if isinstance(value, str) and op in ("=", "!="):
            return [CMP_SEQ if op == "=" else CMP_SNE, self._value(value), 0]
        x = number(value) if isinstance(value, str) else float(value)
        return [CMP_NUM, RELATIONS[op], self._number(x)]

    def _arg(self, a: StrArg) -> list[int]:
        if a.literal is not None:
            return [0, self._value(a.literal), 0, 0]
        kind, name = a.tail
        return [1, -1 if a.rel is None else self._rel(a.rel), TAILS[kind],
                -1 if name is None else self._value(name)]

    def _pred(self, p: Pred) -> int:
        """Emit ``p``'s code (its parts first) and return its offset."""
        emit = self._m.emit
        if isinstance(p, AttrTest):
            words = self._compare(p.cmp)
            if words[0] in (CMP_SEQ, CMP_SNE):  # compared as one id: name NUL value
                words[2] = self._value(attr_atom(p.name, p.cmp[1]))
            return emit([OP_ATTR, self._value(p.name), *words])
        if isinstance(p, TextTest):
            return emit([OP_TEXT, *self._compare(p.cmp)])
        if isinstance(p, SelfTest):
            return emit([OP_SELF, *self._compare(p.cmp)])
        if isinstance(p, Always):
            return emit([OP_ALWAYS])
        if isinstance(p, PosTest):
            return emit([OP_POS, RELATIONS[p.relation], self._number(p.value)])
        if isinstance(p, Nested):
            return emit([OP_NESTED, self._rel(p.rel)])
        if isinstance(p, Func):
            fn = FUNCTIONS["contains" if p.fn is str.__contains__ else "starts-with"]
            return emit([OP_FUNC, fn, *self._arg(p.args[0]), *self._arg(p.args[1])])
        if isinstance(p, NotP):
            return emit([OP_NOT, self._pred(p.item)])
        if isinstance(p, (AndP, OrP)):
            items = [self._pred(i) for i in p.items]
            return emit([OP_AND if isinstance(p, AndP) else OP_OR, len(items), *items])
        raise TypeError(f"no native code for {type(p).__name__}")  # a new Pred kind

