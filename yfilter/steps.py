"""Transformation steps: small, named, composable rewrites of projected elements.

A projection in a ``return`` clause may pipe the elements it copies through steps,
with XQuery's arrow: ``{$n/body/body.content => drop("media", "comment()") =>
table_to_list()}``. Each step maps a list of elements to a list of elements:

* ``drop(name, ...)`` removes the elements with these names (and their content; the
  text after a removed element stays), ``"comment()"`` removes comments and
  ``"processing-instruction()"`` processing instructions;
* ``rename(old, new)`` renames every element named ``old`` to ``new`` (unprefixed);
* ``table_to_list()`` turns each ``table`` into a ``ul`` with one ``li`` per row
  (``tr``, including rows in ``thead``/``tbody``/``tfoot``); a row's cells (``td``,
  ``th``) keep their content and are separated by ``" | "``; captions and column
  groups go; nested tables are converted too;
* ``project(path, ...)`` keeps, of each element, only what the relative paths select
  (whole), with the elements on the way as empty shells (attributes kept, no text).

A step's :attr:`Step.key` is its canonical text, so pipelines with a common prefix
of steps can be recognised (:func:`common_prefix`): within one message the engine
computes a shared prefix once per element, and a plan can execute it upstream.

>>> s = make_step("drop", [("media", 1), ("comment()", 10)], {}, 1)
>>> s.key
'drop("media", "comment()")'
>>> from lxml import etree
>>> [etree.tostring(e) for e in s.apply([etree.XML("<b>x<media/>y<!--c--><p/></b>")], None)]
[b'<b>xy<p/></b>']
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence

from lxml import etree

from yfilter import ast
from yfilter.document import TreeDoc
from yfilter.errors import ProfileError
from yfilter.navigate import Nav, Session, select
from yfilter.parser import XML_NS, _NCNAME, _Parser
from yfilter.runtime import Run

CELL_SEPARATOR = " | "

Intern = Callable[[tuple[ast.Step, ...]], tuple]


class Step:
    """One rewrite of a list of elements. ``key`` is its canonical text."""

    key: str

    def apply(self, elements: list, session) -> list:  # pragma: no cover - abstract
        raise NotImplementedError

    def compile(self, intern: Intern) -> None:
        """Bind the paths the step evaluates to an engine's operator network."""

    def release(self, release: Callable[[tuple], None]) -> None:
        """Give back what :meth:`compile` took."""

    def __repr__(self) -> str:
        return f"Step({self.key})"


class Drop(Step):
    def __init__(self, names: frozenset[str], comments: bool, pis: bool, key: str) -> None:
        self.names, self.comments, self.pis, self.key = names, comments, pis, key
        self._kinds = (*sorted(names), *([etree.Comment] if comments else []),
                       *([etree.PI] if pis else []))

    def apply(self, elements, session):
        out = []
        for e in elements:
            if e.tag in self.names:
                continue
            for x in list(e.iter(*self._kinds)):
                if x is not e:
                    remove(x)
            out.append(e)
        return out


class Rename(Step):
    def __init__(self, old: str, new: str, key: str) -> None:
        self.old, self.new, self.key = old, new, key

    def apply(self, elements, session):
        for e in elements:
            for x in list(e.iter(self.old)):
                x.tag = self.new
        return elements


class TableToList(Step):
    def __init__(self) -> None:
        self.key = "table_to_list()"

    def apply(self, elements, session):
        for e in elements:
            for t in list(e.iter("table")):
                _to_list(t)
        return elements


class Project(Step):
    def __init__(self, paths: tuple[ast.RelPath, ...], key: str) -> None:
        self.paths, self.key = paths, key
        self._navs: list = []

    def compile(self, intern):
        self._navs = [Nav(intern(p.steps)) for p in self.paths]

    def release(self, release):
        for nav in self._navs:
            release(nav.steps)
        self._navs = []

    def apply(self, elements, session):
        out = []
        for e in elements:
            sub = Session(Run(TreeDoc(e)))
            keep: set = set()
            for nav in self._navs:
                keep.update(select(sub, nav, e))
            session.ops += sub.operator_executions
            out.append(_pruned(e, keep))
        return out


def _pruned(e, keep: set):
    """``e`` with only the subtrees in ``keep``, and shells of the elements above them.
    Pruned in place: new elements or moves would make lxml reconcile namespace
    declarations, which goes wrong where a document rebinds a prefix."""
    if e in keep:
        return e
    on_way = set()
    for k in keep:
        p = k.getparent()
        while p is not None and p not in on_way:
            on_way.add(p)
            p = p.getparent()

    def prune(x) -> None:
        x.text = None
        for c in list(x):
            c.tail = None
            if c in on_way and c not in keep:
                prune(c)
            elif c not in keep:
                x.remove(c)

    prune(e)
    return e


def _to_list(table) -> None:
    """Turn ``table`` into a list in place (see the module docstring)."""
    rows = [r for r in table.iter("tr") if _nearest_table(r) is table]
    for a in list(table.attrib):
        del table.attrib[a]
    old = list(table)
    table.tag, table.text = "ul", None
    for row in rows:
        li = etree.SubElement(table, "li")
        first = True
        for cell in list(row.iterchildren("td", "th")):
            if not first:
                append_text(li, CELL_SEPARATOR)
            first = False
            if cell.text:
                append_text(li, cell.text)
            for c in list(cell):
                li.append(c)  # moves c with its tail
    for c in old:
        table.remove(c)


def _nearest_table(row):
    p = row.getparent()
    while p is not None and p.tag != "table":
        p = p.getparent()
    return p


def remove(x) -> None:
    """Detach ``x`` from its parent, leaving the text that followed it in place."""
    parent = x.getparent()
    if parent is None:
        return
    if x.tail:
        prev = x.getprevious()
        if prev is None:
            parent.text = (parent.text or "") + x.tail
        else:
            prev.tail = (prev.tail or "") + x.tail
    parent.remove(x)


def append_text(el, text: str) -> None:
    """Append ``text`` as the last content of ``el`` (merging with text already there)."""
    if len(el):
        last = el[-1]
        last.tail = (last.tail or "") + text
    else:
        el.text = (el.text or "") + text


# -- construction from profile text ---------------------------------------------------

def make_step(name: str, args: Sequence[tuple[str, int]], namespaces: Mapping[str, str],
              col: int) -> Step:
    """The step ``name(args)``; ``args`` are the string arguments with the column each
    starts at. Raises :class:`ProfileError` for an unknown step or bad arguments."""
    values = [a for a, _ in args]
    key = f"{name}({', '.join(_quote(a) for a in values)})"
    if name == "drop":
        if not args:
            raise ProfileError("drop() needs at least one name", col)
        names, comments, pis = set(), False, False
        for a, c in args:
            if a == "comment()":
                comments = True
            elif a == "processing-instruction()":
                pis = True
            else:
                names.add(_qname(a, namespaces, c))
        return Drop(frozenset(names), comments, pis, key)
    if name == "rename":
        if len(args) != 2:
            raise ProfileError("rename() takes two names: rename(\"old\", \"new\")", col)
        (old, oc), (new, nc) = args
        if not _is_ncname(new):
            raise ProfileError(f"rename(): the new name must be an unprefixed name, not "
                               f"{new!r}", nc)
        return Rename(_qname(old, namespaces, oc), new, key)
    if name == "table_to_list":
        if args:
            raise ProfileError("table_to_list() takes no arguments", col)
        return TableToList()
    if name == "project":
        if not args:
            raise ProfileError("project() needs at least one path", col)
        return Project(tuple(_relpath(a, namespaces, c) for a, c in args), key)
    raise ProfileError(f"unknown transformation step '{name}()' (drop, rename, "
                       "table_to_list, project)", col)


def common_prefix(pipelines: Sequence[Sequence[Step]]) -> tuple[Step, ...]:
    """The longest run of steps (by key) that all ``pipelines`` start with.

    >>> a = make_step("drop", [("media", 1)], {}, 1)
    >>> b = make_step("drop", [("media", 1)], {}, 1)
    >>> [s.key for s in common_prefix([[a, TableToList()], [b]])]
    ['drop("media")']
    """
    if not pipelines:
        return ()
    first = pipelines[0]
    n = min(len(p) for p in pipelines)
    k = 0
    while k < n and all(p[k].key == first[k].key for p in pipelines):
        k += 1
    return tuple(first[:k])


def _quote(s: str) -> str:
    return '"' + s.replace('"', '""') + '"'


def _is_ncname(s: str) -> bool:
    return re.fullmatch(_NCNAME, s) is not None


def _qname(text: str, namespaces: Mapping[str, str], col: int) -> str:
    prefix, _, local = text.rpartition(":")
    if not _is_ncname(local) or (prefix and not _is_ncname(prefix)):
        raise ProfileError(f"{text!r} is not an element name", col)
    if not prefix:
        return local
    uri = XML_NS if prefix == "xml" else namespaces.get(prefix)
    if uri is None:
        raise ProfileError(f"undeclared namespace prefix '{prefix}'", col)
    return f"{{{uri}}}{local}"


def _relpath(text: str, namespaces: Mapping[str, str], col: int) -> ast.RelPath:
    """A relative element path given as a string literal starting at column ``col``."""
    if text.strip().startswith("/"):
        raise ProfileError("project() paths are relative to the projected element", col)
    try:
        p = _Parser(text, dict(namespaces))
    except ProfileError as e:
        raise ProfileError(str(e).rsplit(" at column ", 1)[0], col + (e.column or 1) - 1) \
            from None
    for t in p.toks:
        t.col += col - 1
    if p.tok.kind == "eof":
        raise ProfileError("empty path in project()", col)
    path = p.relpath()
    if p.tok.kind != "eof":
        raise ProfileError(f"unexpected {p.tok.describe()} in a project() path", p.tok.col)
    if path.tail is not None:
        raise ProfileError("project() keeps elements: a trailing /@a or /text() is not "
                           "allowed", col)
    return path
