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
from collections.abc import Mapping, Sequence

from lxml import etree

from yfilter import ast
from yfilter.compiler import Registry, compile_path
from yfilter.document import TreeDoc
from yfilter.errors import ProfileError
from yfilter.navigate import Nav, Session, select
from yfilter.parser import XML_NS, _NCNAME, _Parser
from yfilter.runtime import Run

CELL_SEPARATOR = " | "


class Step:
    """One rewrite of a list of elements. ``key`` is its canonical text."""

    key: str

    def apply(self, elements: list, session) -> list:  # pragma: no cover - abstract
        raise NotImplementedError

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
        # Compiled apart from any engine, as an update's target is: the paths run in a
        # session of their own per element, and one step object serves every profile
        # parsed from the same text (compiled into an engine, removing one profile took
        # the paths from the others: regression test in tests/yfilter/test_steps.py).
        self._navs = [Nav(compile_path(ast.Path(p.steps), Registry(), {})) for p in paths]

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


# -- XQuery Update: the steps of a modify clause -----------------------------------------

class Update(Step):
    """One update of an XQuery Update ``modify`` clause (``copy $c := ... modify (...)
    return $c``, see :mod:`yfilter.flwr`), as a step: it applies to every element it
    is given, changing the nodes :attr:`target` selects from that element (elements,
    or with a trailing ``/@a`` attributes). The target is a relative path of the
    filtering subset with its predicates, evaluated by the engine's operators on the
    element as it is when the step runs: updates apply in order, each on the result of
    the one before (a departure from XQuery Update, whose pending update list applies
    at once; :func:`independent` is what keeps the two equal). The copy variable is
    not part of the step: :attr:`key` reads ``.`` for it, so equal updates written with
    different variables share their key."""

    verb = ""
    target: ast.RelPath

    def __init__(self, target: ast.RelPath) -> None:
        self.target = target
        self._attr = target.tail.name if isinstance(target.tail, ast.AttrTail) else None
        # Compiled apart from any engine: the target is evaluated on the rewritten copy
        # in a session of its own, so sharing an engine's memo would gain nothing, and
        # a step is shared by every engine that parses the same profile text.
        self._nav = Nav(compile_path(ast.Path(target.steps), Registry(), {})
                        if target.steps else ())

    def text(self, var: str) -> str:
        """The update as profile text, the target's path starting at ``var``.

        >>> Delete(ast.RelPath((ast.Step("//", "media"),))).text("$c")
        'delete node $c//media'
        """
        return self.render(var + target_text(self.target)[1:])

    def render(self, target: str) -> str:  # pragma: no cover - abstract
        raise NotImplementedError

    def nodes(self, element, session=None) -> list:
        """The elements the target's steps select from ``element`` (with an attribute
        target, the elements that would hold the attribute), in document order."""
        if not self._nav.steps:
            return [element]
        sub = Session(Run(TreeDoc(element)))
        found = select(sub, self._nav, element)
        if session is not None:
            session.ops += sub.operator_executions
        return found

    def apply(self, elements, session):
        for e in elements:
            if self._attr is None:
                for n in self.nodes(e, session):
                    self.element(n)
            else:
                for n in self.nodes(e, session):
                    if self._attr in n.attrib:
                        self.attribute(n, self._attr)
        return elements

    def element(self, node) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def attribute(self, node, name: str) -> None:  # pragma: no cover - abstract
        raise NotImplementedError


class Delete(Update):
    """``delete node $c/path``: removes each selected element with its content (the
    text after it stays, as :func:`remove` does) or each selected attribute."""

    verb = "delete"

    def __init__(self, target: ast.RelPath) -> None:
        super().__init__(target)
        self.key = self.render(target_text(target))

    def render(self, target: str) -> str:
        return f"delete node {target}"

    def element(self, node) -> None:
        remove(node)

    def attribute(self, node, name: str) -> None:
        del node.attrib[name]


class RenameNode(Update):
    """``rename node $c/path as "name"``: every selected element or attribute gets the
    unprefixed name ``name`` (an attribute keeps its place; one of the new name
    already on the element is replaced, where XQuery Update raises XUDY0021)."""

    verb = "rename"

    def __init__(self, target: ast.RelPath, name: str) -> None:
        super().__init__(target)
        self.name = name
        self.key = self.render(target_text(target))

    def render(self, target: str) -> str:
        return f"rename node {target} as {_quote(self.name)}"

    def element(self, node) -> None:
        node.tag = self.name

    def attribute(self, node, name: str) -> None:
        items = [(self.name if k == name else k, v) for k, v in node.attrib.items()
                 if k != self.name or k == name]
        node.attrib.clear()
        for k, v in items:
            node.set(k, v)


class ReplaceValue(Update):
    """``replace value of node $c/path with "text"``: a selected element's content (all
    its children: elements, text, comments, processing instructions) becomes that one
    text node (none for ``""``); a selected attribute's value becomes the text."""

    verb = "replace"

    def __init__(self, target: ast.RelPath, value: str) -> None:
        super().__init__(target)
        self.value = value
        self.key = self.render(target_text(target))

    def render(self, target: str) -> str:
        return f"replace value of node {target} with {_quote(self.value)}"

    def element(self, node) -> None:
        for c in list(node):
            node.remove(c)  # with its tail
        node.text = self.value or None

    def attribute(self, node, name: str) -> None:
        node.set(name, self.value)


def target_text(path: ast.RelPath) -> str:
    """A target path as the canonical text keys use: from ``.``, names in Clark form.

    >>> from yfilter.parser import _Parser
    >>> [target_text(_Parser(t, {}).relpath()) for t in (".", "head/title", ".//media", "@id")]
    ['.', './head/title', './/media', './@id']
    """
    text = str(path)
    return text if text == "." or text.startswith(".//") else "./" + text


# -- independence of updates -------------------------------------------------------------

class _Reads:
    """What a relative path tests, found by :func:`_reads`: element names (spine and
    predicates), attribute names, and the constructs that reach nodes without naming
    them (see :func:`independent`)."""

    __slots__ = ("names", "attrs", "star", "deep", "values")

    def __init__(self) -> None:
        self.names: set[str] = set()  # element name tests other than '*'
        self.attrs: set[str] = set()  # attribute names, tail and predicates
        self.star = False  # a '*' test in a predicate, or on a spine step with predicates
        self.deep = False  # a '//' step inside a predicate
        self.values = False  # an element's string value or text nodes are read


def _reads(path: ast.RelPath) -> _Reads:
    r = _Reads()
    _rel_reads(path, r, spine=True, value=False)
    return r


def _rel_reads(p: ast.RelPath, r: _Reads, spine: bool, value: bool) -> None:
    for s in p.steps:
        if s.test == "*":
            if not spine or s.preds:
                r.star = True
        else:
            r.names.add(s.test)
        if not spine and s.axis == ast.DESCENDANT:
            r.deep = True
        for e in s.preds:
            _expr_reads(e, r)
    if isinstance(p.tail, ast.AttrTail):
        r.attrs.add(p.tail.name)
    elif isinstance(p.tail, ast.TextTail) or value:
        r.values = True


def _expr_reads(e, r: _Reads) -> None:
    if isinstance(e, (ast.And, ast.Or)):
        for i in e.items:
            _expr_reads(i, r)
    elif isinstance(e, ast.Not):
        _expr_reads(e.item, r)
    elif isinstance(e, ast.RelPath):
        _rel_reads(e, r, spine=False, value=False)  # an existence test
    elif isinstance(e, (ast.Compare, ast.Call)):
        for o in (e.left, e.right) if isinstance(e, ast.Compare) else e.args:
            _operand_reads(o, r)


def _operand_reads(o, r: _Reads) -> None:
    if isinstance(o, ast.RelPath):
        _rel_reads(o, r, spine=False, value=True)
    elif isinstance(o, ast.Call):
        for a in o.args:
            _operand_reads(a, r)


def independent(step: Step, path: ast.RelPath) -> bool:
    """Does applying ``step`` to an element leave what the relative ``path`` (from the
    same element, predicates included) selects and reads unchanged, apart from nodes
    the step removed? Conservative: True only where names alone make it certain, for
    every element; False says "maybe not".

    The modify clause of a ``copy`` expression is accepted only where every update's
    target is independent of each update before it: then applying the updates in order
    (Onyx) and at once on a snapshot (XQuery Update) give the same result. The rules,
    by what the step changes (``L`` its target's last name test, ``N`` a new name):

    * renaming the element itself (target ``.``) changes nothing a relative path can
      test; renaming elements named ``L`` to ``N`` is independent of a path that tests
      neither ``L`` nor ``N`` (``*`` tests are unaffected by names); with ``L = *``, of
      a path that tests no names at all;
    * deleting, or replacing the content of, elements named ``L`` removes their
      subtrees (and with replace, changes their value): independent of a path that
      never tests ``L`` (so it never selects, counts or tests one), reads no element's
      string value or text nodes, and reaches nodes only through named child steps in
      its predicates (no ``//`` or ``*`` there, no ``*`` with predicates on its
      spine): then every node it tests lies in a removed subtree only if the node its
      spine is at does too. ``L = *`` is independent only of ``.`` and ``./@a``; so is
      the content of the element itself (target ``.``), which removes everything else;
    * renaming, deleting or replacing the value of attributes named ``A`` (and ``N``)
      is independent of a path that names neither.

    Arrow steps: ``drop`` counts as deleting each name it lists (and comments and
    processing instructions as a value change), ``rename`` as renaming ``.//old``;
    any other step is never independent.

    >>> from yfilter.parser import _Parser
    >>> rel = lambda t: _Parser(t, {}).relpath()
    >>> independent(Delete(rel(".//media")), rel("head/title"))
    True
    >>> independent(Delete(rel(".//media")), rel("body[.//media]"))
    False
    >>> independent(RenameNode(rel(".//table"), "list"), rel(".//list/li"))
    False
    >>> independent(ReplaceValue(rel("head/@id"), "x"), rel("body/p[@class = 'a']"))
    True
    """
    r = _reads(path)
    if isinstance(step, Drop):
        return (not ((step.comments or step.pis) and r.values)
                and all(_removal_independent(n, r, path) for n in step.names))
    if isinstance(step, Rename):
        return step.old not in r.names and step.new not in r.names
    if not isinstance(step, Update):
        return False
    target = step.target
    if isinstance(target.tail, ast.AttrTail):
        names = {target.tail.name}
        if isinstance(step, RenameNode):
            names.add(step.name)
        return not (names & r.attrs)
    if not target.steps:  # the element itself
        if isinstance(step, RenameNode):
            return True
        # replace value of . (delete of . is refused): everything below is removed
        return not (path.steps == () and isinstance(path.tail, ast.TextTail))
    last = target.steps[-1].test
    if isinstance(step, RenameNode):
        if last == "*":
            return not r.names
        return last not in r.names and step.name not in r.names
    return _removal_independent(last, r, path)


def _removal_independent(last: str, r: _Reads, path: ast.RelPath) -> bool:
    """Is ``path`` independent of removing the subtrees (or the content) of elements
    named ``last``? (see :func:`independent`)"""
    if last == "*":
        return not path.steps and not isinstance(path.tail, ast.TextTail)
    return last not in r.names and not (r.star or r.deep or r.values)
