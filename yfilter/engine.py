"""The public engine: register profiles, match messages against all of them at once.

>>> e = Engine()
>>> e.add("sf", "/nitf[head/pubdata/@edition.area='SF']")
>>> e.add("any-hl", "//hl1")
>>> sorted(e.match(b"<nitf><head><pubdata edition.area='SF'/></head><hl1>x</hl1></nitf>"))
['any-hl', 'sf']
>>> e.remove("sf")
>>> sorted(e.match(b"<nitf><head><pubdata edition.area='SF'/></head></nitf>"))
[]

Not thread-safe: a broker serialises ``add``/``remove`` with ``match`` (they may
interleave freely between messages; a change is visible from the next message on).

One runtime answers, chosen when the engine is made and never changed by a call:

* ``runtime="native"`` (the default): each distinct profile is compiled and filed
  once, either in the lazy DFA over the profiles' shapes (profiles without
  predicates: a path's states report them) or in the C matcher
  (:mod:`yfilter.native`, profiles with predicates, a profile with ``or`` once per
  branch). The C matcher reads XML text parsed by lxml, and a decoded
  :class:`formats.Message` (what a broker holds) straight from its columns. A
  session (:meth:`start`) only shares the parsed document and, for transformations
  and plans, the memo of navigation; matching with one is the same C matcher.
* ``runtime="python"``: every profile in the NFA with its guards, checked by the
  Python runtime (:mod:`yfilter.runtime`): the reference the differential tests hold
  the native runtime to, next to lxml. ``native=False`` is the old spelling.
"""

from __future__ import annotations

import gc
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from formats.message import Message
from yfilter import ast
from yfilter.compiler import Registry, alternatives, compile_path, path_key
from yfilter.dfa import DEFAULT_BUDGET, DState, LazyDFA
from yfilter.document import TableDoc, TreeDoc, parse_xml
from yfilter.errors import MessageError, ProfileError
from yfilter.native import NativeIndex
from yfilter.flwr import Flwr, is_flwr, parse_flwr
from yfilter.navigate import Session
from yfilter.nfa import NFA, State, Step
from yfilter.parser import parse
from yfilter.runtime import Run, walk
from yfilter.transform import Transform

MessageLike = bytes | bytearray | memoryview | str | Message

# add_many runs a full collection after this many profiles or more (fewer are young
# objects whose later passes are short, while a full pass costs the whole heap).
COLLECT_AFTER = 1000


@dataclass(eq=False)
class _Query:
    """One distinct profile (by canonical key) and the ids registered with it."""

    key: str
    steps: tuple[Step, ...]
    state: State | None  # its NFA state; None when the C matcher holds it
    path: ast.Path | None = None  # as parsed (the native matcher files its alternatives)
    ids: set[str] = field(default_factory=set)


class Matches:
    """The outcome of matching one message, turned into ids by :meth:`ids` (kept
    apart so a benchmark can time matching and reporting): the accepting DFA states
    reached, each caching the ids of the guard-free profiles it accepts, and the id
    sets of the other matching profiles. Reporting is a union of those sets."""

    __slots__ = ("dstates", "found", "dfa")

    def __init__(self, dstates: set[DState], found: list, dfa: LazyDFA) -> None:
        self.dstates, self.found, self.dfa = dstates, found, dfa

    def ids(self) -> frozenset[str]:
        sets = [d.ids(self.dfa) for d in self.dstates]
        sets.extend(self.found)
        if len(sets) == 1 and isinstance(sets[0], frozenset):
            return sets[0]
        if not sets:
            return frozenset()
        # The largest first: it is copied whole (no probing), the rest are merged in.
        sets.sort(key=len, reverse=True)
        return frozenset(sets[0]).union(*sets[1:])


class Engine:
    """Shared filtering of many XPath profiles (DESIGN.md sections 3-4).

    ``namespaces`` binds the prefixes profiles may use (``xml`` is always bound);
    ``dfa_budget`` bounds the lazy DFA cache (see :mod:`yfilter.dfa`); ``runtime``
    is ``"native"`` or ``"python"`` (see the module docstring; ``native=False`` is
    ``runtime="python"``).
    """

    RUNTIMES = ("native", "python")

    def __init__(self, namespaces: Mapping[str, str] | None = None, *,
                 dfa_budget: int = DEFAULT_BUDGET, runtime: str = "native",
                 native: bool | None = None) -> None:
        if native is not None:
            runtime = "native" if native else "python"
        if runtime not in self.RUNTIMES:
            raise ValueError(f"runtime must be one of {self.RUNTIMES}, not {runtime!r}")
        self.runtime = runtime
        self._namespaces = dict(namespaces or {})
        self._nfa = NFA()
        self._reg = Registry()
        self._dfa = LazyDFA(self._nfa, dfa_budget)
        self._queries: dict[str, _Query] = {}
        self._by_id: dict[str, _Query] = {}
        self._texts: dict[str, str] = {}
        self._transforms: dict[str, Transform] = {}  # transformation profiles (FLWR)
        self._native = NativeIndex() if runtime == "native" else None
        self._plain = 0  # distinct profiles without predicates

    # -- registration ---------------------------------------------------------
    def add(self, profile_id: str, text: str) -> None:
        """Register (or replace) profile ``profile_id``: a filter or a transformation
        profile (``for ... return``, see :mod:`yfilter.flwr`). Raises ProfileError, in
        which case nothing changes (a replaced profile stays as it was)."""
        if not isinstance(profile_id, str):
            raise TypeError(f"profile id must be str, not {type(profile_id).__name__}")
        flwr = parse_flwr(text, self._namespaces) if is_flwr(text) else None
        # for/where is a filtering path: shared NFA and operators, matches = bindings
        path = flwr.filter_path() if flwr is not None else parse(text, self._namespaces)
        txn: dict = {}
        steps = compile_path(path, self._reg, txn)
        key = path_key(steps)
        old = self._by_id.get(profile_id)
        if old is not None and old.key == key:
            self._texts[profile_id] = text
            self._set_transform(profile_id, flwr, old.steps)
            return
        q = self._queries.get(key)
        if q is None:
            state = None
            if self._native is None or not _guarded(steps):  # else the C matcher's alone
                for _, _, g in steps:
                    if g is not None:
                        self._reg.ref_guard(g)
                state = self._nfa.insert(steps)
            q = self._queries[key] = _Query(key, steps, state, path)
            if state is not None:
                self._nfa.set_accept(state, q.ids)
            q.ids.add(profile_id)
            self._index(q, True)
        else:
            q.ids.add(profile_id)
            self._index(q, None)
        self._changed()  # DFA states cache the ids they accept
        self._by_id[profile_id] = q
        self._texts[profile_id] = text
        self._set_transform(profile_id, flwr, q.steps)
        if old is not None:
            self._drop(old, profile_id)

    def add_many(self, profiles: Mapping[str, str] | Iterable[tuple[str, str]]) -> None:
        """:meth:`add` each ``(profile_id, text)`` in turn (a mapping gives its items),
        with Python's cyclic garbage collector paused meanwhile. What the engine builds
        lives as long as its profiles, so the collector's passes over it while loading
        are wasted: at 100k profiles with predicates they took about half of the time of
        adding them one by one, each a pause of up to 1.6 s. When the profiles added
        are at least ``COLLECT_AFTER`` and more than a quarter of those already there,
        one full collection follows (the one Python would soon start anyway): the new
        objects then count as long-lived, rather than being passed over three times
        (young, middle, old generation) at random moments later, while messages are
        matched. Stops at the first bad profile with a ProfileError that names its id;
        the ones before it stay registered. A collector the caller paused stays paused
        and is left alone.

        >>> e = Engine()
        >>> e.add_many({"a": "//a", "b": "//b"})
        >>> sorted(e.match(b"<a><b/></a>"))
        ['a', 'b']
        >>> e.add_many([("c", "//c"), ("bad", "/a/parent::b")])
        Traceback (most recent call last):
        ...
        yfilter.errors.ProfileError: profile 'bad': unsupported axis 'parent::' at column 4
        >>> sorted(e.match(b"<c/>"))
        ['c']
        """
        items = profiles.items() if isinstance(profiles, Mapping) else profiles
        was_enabled = gc.isenabled()
        before, added = len(self), 0
        gc.disable()
        try:
            for profile_id, text in items:
                try:
                    self.add(profile_id, text)
                except ProfileError as err:
                    named = ProfileError(f"profile {profile_id!r}: {err}")
                    named.column = err.column
                    raise named from err
                added += 1
            if was_enabled and added >= COLLECT_AFTER and added > before // 4:
                gc.collect()
        finally:
            if was_enabled:
                gc.enable()

    def remove(self, profile_id: str) -> None:
        """Unregister a profile; ``KeyError`` if it is not registered."""
        q = self._by_id.pop(profile_id)
        del self._texts[profile_id]
        self._set_transform(profile_id, None, ())
        self._drop(q, profile_id)

    def _set_transform(self, profile_id: str, flwr: Flwr | None, steps: tuple) -> None:
        old = self._transforms.pop(profile_id, None)
        if flwr is not None:  # compiled before the old one lets go of shared operators
            self._transforms[profile_id] = Transform(flwr, steps, self.intern_steps)
        if old is not None:
            old.release(self.release_steps)

    def _drop(self, q: _Query, profile_id: str) -> None:
        q.ids.discard(profile_id)
        self._changed()
        if q.ids:
            self._index(q, None)
            return
        del self._queries[q.key]
        self._index(q, False)
        if q.state is None:
            return
        self._nfa.set_accept(q.state, None)
        self._nfa.delete(q.steps)
        for _, _, g in q.steps:
            if g is not None:
                self._reg.unref_guard(g)

    def _index(self, q: _Query, add: bool | None) -> None:
        """File a new distinct profile with the runtime that matches it (``add``),
        drop it (False) or show the runtime its changed ids (None)."""
        if not _guarded(q.steps):
            if add is not None:
                self._plain += 1 if add else -1
        elif self._native is not None:
            if add:
                alts = alternatives(q.path) if q.path is not None else [q.path]
                if len(alts) > 1:  # compiled apart, not made live in the registry
                    self._native.add([compile_path(a, self._reg, {}) for a in alts], q.ids)
                else:
                    self._native.add(q.steps, q.ids)
            elif add is None:
                self._native.update(q.ids)
            else:
                self._native.discard(q.ids)

    def _changed(self) -> None:
        # Cached state sets and indexes would not see the new or removed states.
        if len(self._dfa):
            self._dfa.flush()

    def __len__(self) -> int:
        return len(self._by_id)

    def __contains__(self, profile_id: object) -> bool:
        return profile_id in self._by_id

    def profile(self, profile_id: str) -> str:
        """The text a profile was registered with."""
        return self._texts[profile_id]

    def ids(self) -> list[str]:
        return list(self._by_id)

    # -- per-message hooks for transformations and navigation (routing.matcher, routing.incremental)
    def start(self, message: MessageLike) -> Session:
        """The evaluation state of one message (its document and the memo of operator
        results), to pass as ``session`` to :meth:`evaluate`, :meth:`match`,
        :meth:`run` and to :func:`yfilter.navigate.select` over steps from
        :meth:`intern_steps`: the message is read once, and an operator evaluated
        once on it (navigation; matching too in the Python runtime) is not evaluated
        again, whoever needs it next. It never changes which runtime matches.
        Raises :class:`MessageError`."""
        return Session(Run(_document(message)))

    def intern_steps(self, steps: tuple[ast.Step, ...]) -> tuple[Step, ...]:
        """Compile location steps into this engine's operator network (sharing the
        guards of every profile with the same steps) and keep them live until
        :meth:`release_steps`. They are not added to the automaton: they are for
        navigation (:mod:`yfilter.navigate`), e.g. the paths of a return clause."""
        compiled = compile_path(ast.Path(tuple(steps)), self._reg, {})
        for _, _, g in compiled:
            if g is not None:
                self._reg.ref_guard(g)
        return compiled

    def release_steps(self, steps: tuple[Step, ...]) -> None:
        """Give back steps from :meth:`intern_steps`."""
        for _, _, g in steps:
            if g is not None:
                self._reg.unref_guard(g)

    # -- matching -------------------------------------------------------------
    def evaluate(self, message: MessageLike, session: Session | None = None) -> Matches:
        """Match without building the id set yet (see :class:`Matches`); ``session``
        (from :meth:`start` on the same message) gives the document already read and,
        in the Python runtime, shares its operator memo. The same runtime answers
        with or without it."""
        if self._native is None:
            run = session.run if session is not None else Run(_document(message))
            return Matches(*walk(self._dfa, run), self._dfa)
        doc = session.run.doc if session is not None else _document(message)
        found = self._native_match(doc) if len(self._native) else frozenset()
        run = session.run if session is not None else Run(doc)
        accepted = walk(self._dfa, run, checks=False)[0] if self._plain else set()
        return Matches(accepted, [found], self._dfa)

    def _native_match(self, doc: TableDoc | TreeDoc) -> frozenset[str]:
        if isinstance(doc, TreeDoc):
            found = self._native.match(doc.root)
            if found is None:
                # A node the C reader does not model on lxml's tree (an entity
                # reference lxml expands in an attribute): the same matcher reads the
                # message's columns, built from what lxml shows of the tree.
                found = self._native.match_message(Message.from_element(doc.root))
            if found is None:
                raise MessageError("the message holds a node the matcher does not model")
            return found
        found = self._native.match_message(doc.msg)
        if found is None:
            raise MessageError("the decoded message's columns describe no tree of elements")
        return found

    def match(self, message: MessageLike, session: Session | None = None) -> frozenset[str]:
        """Ids of all profiles matching ``message`` (XML text or a decoded
        :class:`formats.Message`), each once: filters, and transformation profiles
        whose for/where has a binding. Raises :class:`MessageError`."""
        return self.evaluate(message, session).ids()

    def run(self, message: MessageLike, session: Session | None = None, xml: bytes | None = None,
            *, done: tuple[str, tuple[str, ...]] | None = None) -> dict[str, list[bytes]]:
        """Results per matching profile id: for a filter, the message itself (as XML
        text: ``xml`` when the caller has it, e.g. the bytes a decoded message was read
        from, else serialized once); for a transformation profile, one document per
        binding of its for variable that satisfies where, in document order.

        ``done`` is ``None`` or ``(binding, keys)``: the elements the for path whose
        text is ``binding`` (``str(flwr.path)``) selects in ``message`` already hold the
        result of the transformation steps with these keys (a host upstream applied
        them). A profile with that for path whose return is a top-level copy
        (``copy $c := $n modify (...) return $c``) and whose steps' keys
        (:func:`yfilter.flwr.binding_steps`) start with ``keys`` then applies only the
        rest of its steps to each binding; every other profile runs as usual.

        >>> e = Engine()
        >>> e.add("q", 'for $n in $msg/r/a return copy $c := $n '
        ...            'modify (delete node $c/b, rename node $c/d as "e") return $c')
        >>> e.run(b"<r><a><b/><d/></a></r>")["q"]
        [b'<a><e/></a>']
        >>> e.run(b"<r><a><d/></a></r>", done=("/r/a", ("delete node ./b",)))["q"]
        [b'<a><e/></a>']
        """
        matched = self.match(message, session)
        if not matched:
            return {}
        out: dict[str, list[bytes]] = {}
        for pid in matched:
            t = self._transforms.get(pid)
            if t is not None:
                if session is None:  # only once a transformation matched: navigation needs one
                    session = self.start(message)
                if done is not None and t.keys and t.binding == done[0] \
                        and t.keys[:len(done[1])] == tuple(done[1]):
                    out[pid] = t.results(session, len(done[1]))
                else:
                    out[pid] = t.results(session)
                continue
            if xml is None:
                xml = _xml(message)
            out[pid] = [xml]
        return out

    def stats(self) -> dict[str, int]:
        """Sizes: profiles, distinct profiles, NFA states (on profiles' paths, and
        with those only their shapes use), guards, nested paths, final nodes filed by
        key (:mod:`yfilter.keyed`), and the lazy DFA cache (states, units, flushes);
        in the native runtime also the distinct profiles the C matcher holds, the
        alternatives they are filed as, and the C matcher's own counts."""
        return {
            "profiles": len(self._by_id),
            "distinct_profiles": len(self._queries),
            "nfa_states": self._nfa.size,
            "nfa_states_total": self._nfa.total,
            "guards": len(self._reg.guards),
            "nested_paths": len(self._reg.rels),
            "keyed_nodes": len(self._nfa.keyed),
            "dfa_states": len(self._dfa),
            "dfa_units": self._dfa.units,
            "dfa_flushes": self._dfa.flushes,
            **({"native_profiles": len(self._native),
                "native_alternatives": self._native.queries(),
                **{f"native_{k}": v for k, v in self._native.stats().items()}}
               if self._native is not None else {}),
        }


def _guarded(steps: tuple[Step, ...]) -> bool:
    return any(g is not None for _, _, g in steps)


def _xml(message: MessageLike) -> bytes:
    if isinstance(message, Message):
        return message.to_xml()
    if isinstance(message, str):
        return message.encode("utf-8")
    return bytes(message)


def _document(message: MessageLike) -> TableDoc | TreeDoc:
    if isinstance(message, Message):
        if not message.tags:
            raise MessageError("empty message has no root element")
        return TableDoc(message)
    if isinstance(message, (bytes, bytearray, memoryview, str)):
        return TreeDoc(parse_xml(message))
    raise TypeError(f"cannot match a {type(message).__name__}; give XML text or a "
                    "formats.Message")
