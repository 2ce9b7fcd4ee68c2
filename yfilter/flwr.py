"""The XQuery FLWR subset of transformation profiles (DESIGN.md section 3): parser and AST.

::

    for $n in $msg/nitf
    where $n/head/pubdata/@edition.area = "SF" and $n//tobject.subject
    return <stock_news id="{$n/head/docdata/doc-id/@id-string}">
             {$n/body/body.head/hedline}
             <text>{$n/body/body.content => drop("media")}</text>
           </stock_news>

* ``for`` binds one variable to the elements an absolute path selects (the filtering
  subset of XPath; no trailing ``/@a`` or ``/text()``: a binding is an element).
* ``where`` (optional) is a condition in the predicate language whose paths start at
  the variable: ``$n/a/@b = 'v'``, ``$n//c``, ``$n = 'v'``, ``contains($n/@a, 'x')``,
  with ``and``, ``or``, ``not(...)`` and parentheses.
* ``return`` is one direct element constructor: literal tags and attributes, literal
  text, nested constructors and enclosed expressions ``{...}``. An enclosed expression
  is a comma-separated list of *projections* ``$n``, ``$n/rel/path`` (elements, copied
  whole), ``$n/rel/@a`` (attributes of the constructed element; they come before the
  rest of its content, as XQuery requires) or ``$n/rel/text()`` (text nodes). An element
  projection may pipe its elements through transformation steps with XQuery's arrow,
  ``{$n/body => drop("media", "comment()") => rename("hl1", "title")}`` (see
  :mod:`yfilter.steps`). Attribute values may hold enclosed projections too
  (``id="{$n/@id}"``: the string values, joined by single spaces).
* Transformation steps may also be written as XQuery Update's transform expression,
  ``copy $c := $n/body modify (delete node $c//media, rename node $c//table as "list")
  return $c``: inside an enclosed expression (the copied path is any element path from
  the variable) or as the whole return clause (``return copy $c := $n modify ...
  return $c``: the binding itself, one result per binding). The modify clause is one
  update or a parenthesized list of them; their targets are paths from the copy
  variable (child and ``//`` steps, name tests and ``*``, predicates), elements or with
  a trailing ``/@a`` attributes:

  * ``delete node $c/path`` (or ``nodes``): removes the elements (the text after each
    stays) or attributes;
  * ``rename node $c/path as "name"``: an unprefixed name, for elements or attributes
    (``$c`` itself may be renamed);
  * ``replace value of node $c/path with "text"``: an element's content becomes that
    one text node, an attribute's value that text.

  They compile to the same steps as the arrow (:class:`yfilter.steps.Delete`,
  :class:`~yfilter.steps.RenameNode`, :class:`~yfilter.steps.ReplaceValue`), keyed
  without the variable (``delete node .//media``). Insertions, ``replace node``,
  computed names and values, other variables and absolute paths are refused.
  Departures from XQuery Update (docs/departures.md): the updates apply **in order**,
  each on the result of the one before (XQuery applies a pending update list at once),
  so that the first few can run upstream; a list where a later target could select or
  read differently because of an earlier update is refused, at the later update
  (:func:`yfilter.steps.independent`), so that results are XQuery's wherever XQuery
  defines them. Rename and replace value apply to **every** node the target selects
  (XQuery requires exactly one), and an enclosed ``copy $c := $n/path`` copies and
  modifies each element the path selects (XQuery requires one node).

The where clause is folded into the for path as one more predicate of its last step,
so ``for``/``where`` is an ordinary filtering path (:meth:`Flwr.filter_path`): it is
matched by the shared automaton like any filter, and its matches *are* the bindings.

>>> q = parse_flwr("for $n in $msg/nitf where $n/head/@x = 'SF' return <r>{$n/body}</r>")
>>> str(q.filter_path())
"/nitf[head/@x = 'SF']"
>>> q = parse_flwr('for $n in $msg/nitf return copy $c := $n modify (delete node $c//media, '
...                'replace value of node $c/head/title with "T") return $c')
>>> [s.key for s in q.ret.steps]
['delete node .//media', 'replace value of node ./head/title with "T"']
>>> parse_flwr('for $n in $msg/nitf return copy $c := $n modify (rename node $c//table '
...            'as "list", delete node $c//list) return $c')
Traceback (most recent call last):
...
yfilter.errors.ProfileError: 'delete node $c//list' could select or read other nodes after 'rename node $c//table as "list"' (Onyx applies the updates in order, XQuery Update all at once: here the two could differ) at column 83
>>> parse_flwr("for $n in $msg/nitf return <r>{$m/body}</r>")
Traceback (most recent call last):
...
yfilter.errors.ProfileError: unknown variable '$m' (the for clause binds $n) at column 32

String literals are XQuery's (``'it''s'``, ``"a &amp; b"``); comparisons follow the
profile language, i.e. XPath 1.0 (``$n/@a < 'x'`` compares numbers, never strings).
Constructor names are unprefixed (no namespace declarations in constructors); an XQuery
comment, ``let``, ``order by`` and other clauses are refused with their position.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Union

from yfilter import ast
from yfilter.errors import ProfileError
from yfilter.parser import _NCNAME, _TOKEN, MAX_NESTING, _Parser, _Tok, check_unicode
from yfilter.steps import Delete, RenameNode, ReplaceValue, Step, Update, independent, make_step

_FOR = re.compile(r"[ \t\r\n]*for[ \t\r\n]*\$")  # XQuery's whitespace only, as _WS
_NAME = re.compile(_NCNAME)
_WS = " \t\r\n"
_ENTITIES = {"lt": "<", "gt": ">", "amp": "&", "quot": '"', "apos": "'"}
_CLAUSES = {"let", "order", "stable", "group", "count", "window", "some", "every"}
_COPY = re.compile(r"copy[ \t\r\n]*\$")


def is_flwr(text: str) -> bool:
    """Does ``text`` look like a transformation profile (``for $var ...``)? A filtering
    profile always starts with ``/`` or ``$msg``, so the two cannot be confused."""
    return isinstance(text, str) and _FOR.match(text) is not None


# -- AST ---------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Projection:
    """``$var`` followed by a relative path; ``kind`` follows its tail: ``'element'``,
    ``'attribute'`` (``/@a``) or ``'text'`` (``/text()``). ``steps`` apply to elements."""

    var: str
    path: ast.RelPath
    steps: tuple[Step, ...] = ()

    @property
    def kind(self) -> str:
        tail = self.path.tail
        return ("attribute" if isinstance(tail, ast.AttrTail)
                else "text" if isinstance(tail, ast.TextTail) else "element")

    def __str__(self) -> str:
        rel = str(self.path)
        body = "" if rel == "." else rel[1:] if rel.startswith(".//") else "/" + rel
        if self.steps and all(isinstance(s, Update) for s in self.steps):
            updates = ", ".join(s.text("$c") for s in self.steps)
            return f"copy $c := {self.var}{body} modify ({updates}) return $c"
        return self.var + body + "".join(f" => {s.key}" for s in self.steps)


@dataclass(frozen=True, slots=True)
class Enclosed:
    """``{p1, p2, ...}``: the projections' results, in this order."""

    items: tuple[Projection, ...]


@dataclass(frozen=True, slots=True)
class AttrTemplate:
    """A literal attribute: ``parts`` are literal strings and enclosed expressions."""

    name: str
    parts: tuple[Union[str, Enclosed], ...]


@dataclass(frozen=True, slots=True)
class Constructor:
    """A direct element constructor; ``content`` holds literal text (boundary
    whitespace already dropped), nested constructors and enclosed expressions."""

    name: str
    attrs: tuple[AttrTemplate, ...]
    content: tuple[Union[str, "Constructor", Enclosed], ...]


@dataclass(frozen=True, slots=True)
class Flwr:
    """A parsed transformation profile."""

    var: str
    path: ast.Path
    where: ast.Expr | None
    ret: Constructor | Projection
    """The return clause: an element constructor, or a ``copy`` of the binding itself
    (a :class:`Projection` of ``var`` with no path, its steps the modify clause's
    updates)."""
    span: tuple[int, int] = field(default=(0, 0), compare=False)
    """Where the for path is in the profile's text (``text[start:end]``, trailing
    blanks included), for rewriting a profile around its binding."""

    def filter_path(self) -> ast.Path:
        """``for`` and ``where`` as one filtering path: the where condition becomes the
        last predicate of the last step, so the path selects exactly the bindings."""
        if self.where is None:
            return self.path
        *init, last = self.path.steps
        return ast.Path((*init, ast.Step(last.axis, last.test, (*last.preds, self.where))))


def binding_steps(flwr: Flwr) -> tuple[Step, ...]:
    """The steps a transformation profile applies to each binding as a whole: the
    updates of a top-level ``copy $c := $n modify (...) return $c``; none for a
    constructor return. A host that applied a prefix of them upstream can have the
    engine skip it (:meth:`yfilter.Engine.run`, ``done=``).

    >>> q = parse_flwr('for $n in $msg/nitf return copy $c := $n '
    ...                'modify (delete node $c//media, rename node $c/body as "text") return $c')
    >>> [s.key for s in binding_steps(q)]
    ['delete node .//media', 'rename node ./body as "text"']
    >>> binding_steps(parse_flwr("for $n in $msg/nitf return <r>{$n/body}</r>"))
    ()
    """
    return flwr.ret.steps if isinstance(flwr.ret, Projection) else ()


# -- parsing -----------------------------------------------------------------------

def parse_flwr(text: str, namespaces: Mapping[str, str] | None = None) -> Flwr:
    """Parse a transformation profile; :class:`ProfileError` names the column and the
    construct of the first problem."""
    if not isinstance(text, str):
        raise ProfileError(f"a profile is text, not {type(text).__name__}")
    return _parse_recent(text, tuple(sorted((namespaces or {}).items())))


@lru_cache(maxsize=1024)
def _parse_recent(text: str, namespaces: tuple[tuple[str, str], ...]) -> Flwr:
    # Parsed several times in a row where a broker hosts the profile (see
    # yfilter.parser.parse); the result is immutable, so the recent ones are kept.
    check_unicode(text)
    ns = dict(namespaces)
    tokens, ret_at = _lex(text, 0, stop_word="return")
    head = _ClauseParser(tokens, ns, var=None)
    var, path, where, span = head.head()
    if ret_at is None:
        raise ProfileError("expected 'return' after the for/where clauses", len(text) + 1)
    ret = _ReturnParser(text, ret_at + len("return"), ns, var).parse()
    return Flwr(var, path, where, ret, span)


class _StopTok(_Tok):
    """The end of a token run: end of text or the word or character that ends it."""

    __slots__ = ()

    def describe(self) -> str:
        return "end of profile" if not self.text else repr(self.text)


def _lex(text: str, pos: int, stop_word: str | None = None,
         stop_char: str | None = None) -> tuple[list[_Tok], int | None]:
    """XPath tokens from ``pos`` up to ``stop_word`` (a name token not following ``/``,
    ``//``, ``@`` or ``::``) or ``stop_char``; returns the tokens (closed by a stop token)
    and where the stop is (None at the end of the text)."""
    out: list[_Tok] = []
    while pos < len(text):
        ch = text[pos]
        if ch == stop_char:
            out.append(_StopTok("eof", ch, pos + 1))
            return out, pos
        if text.startswith("(:", pos):
            raise ProfileError("XQuery comments '(: :)' are not supported", pos + 1)
        if ch in "\"'":
            tok, pos = _string(text, pos)
            out.append(tok)
            continue
        if (text.startswith(":=", pos) and len(out) >= 2 and out[-1].kind == "var"
                and out[-2].kind == "name" and out[-2].text == "copy"):
            out.append(_Tok("op", ":=", pos + 1))
            pos += 2
            continue
        m = _TOKEN.match(text, pos)
        if m is None:
            for t in out:  # 'let $x := ...' fails here, at ':'; name the clause instead
                if t.kind == "name" and t.text in _CLAUSES:
                    raise ProfileError(f"unsupported clause '{t.text}'", t.col)
            raise ProfileError(f"unexpected character {ch!r}", pos + 1)
        kind = m.lastgroup
        if kind != "ws":
            tok = _Tok(kind, m.group(), pos + 1)
            prev = out[-1] if out else None
            if (kind == "name" and tok.text == stop_word
                    and not (prev is not None and prev.kind == "op"
                             and prev.text in ("/", "//", "@", "::"))):
                out.append(_StopTok("eof", stop_word, pos + 1))
                return out, pos
            out.append(tok)
        pos = m.end()
    out.append(_StopTok("eof", "", len(text) + 1))
    return out, None


def _string(text: str, pos: int) -> tuple[_Tok, int]:
    """An XQuery string literal at ``pos``: a doubled quote stands for the quote, and
    predefined entity and character references are expanded. The token's text is the
    value between quotes (the parser reads only what is between the first and the
    last character)."""
    q = text[pos]
    parts: list[str] = []
    j = pos + 1
    while True:
        k = text.find(q, j)
        if k < 0:
            raise ProfileError("unterminated string literal", pos + 1)
        parts.append(_references(text, j, k))
        if text.startswith(q, k + 1):
            parts.append(q)
            j = k + 2
            continue
        return _Tok("str", q + "".join(parts) + q, pos + 1), k + 1


def _references(text: str, start: int, end: int) -> str:
    """``text[start:end]`` with its entity and character references expanded."""
    out: list[str] = []
    i = start
    while True:
        amp = text.find("&", i, end)
        if amp < 0:
            out.append(text[i:end])
            return "".join(out)
        out.append(text[i:amp])
        ch, i = _reference(text, amp, end)
        out.append(ch)


def _reference(text: str, at: int, end: int | None = None) -> tuple[str, int]:
    """The character a reference ``&...;`` at ``at`` stands for, and where it ends."""
    semi = text.find(";", at, len(text) if end is None else end)
    if semi < 0:
        raise ProfileError("'&' starts a reference (&amp; &lt; &gt; &quot; &apos; &#n;) "
                           "and needs a ';'", at + 1)
    body = text[at + 1:semi]
    if body in _ENTITIES:
        return _ENTITIES[body], semi + 1
    if not body.startswith("#"):
        raise ProfileError(f"unknown entity '&{body};' (only the predefined entities and "
                           "character references)", at + 1)
    try:
        code = int(body[2:], 16) if body.startswith("#x") else int(body[1:], 10)
    except ValueError:
        raise ProfileError(f"bad character reference '&{body};'", at + 1) from None
    if not _xml_char(code):
        raise ProfileError(f"character reference '&{body};' is not an XML character", at + 1)
    return chr(code), semi + 1


class _ClauseParser(_Parser):
    """The filtering parser, with paths that start at the bound variable outside step
    predicates (where clauses and projections)."""

    def __init__(self, toks: list[_Tok], namespaces: dict[str, str], var: str | None) -> None:
        self.toks, self.i, self.ns = toks, 0, namespaces
        self.var = var
        self.depth = 0  # > 0 inside a step predicate, where plain XPath applies

    # -- for / where ---------------------------------------------------------------
    def head(self) -> tuple[str, ast.Path, ast.Expr | None, tuple[int, int]]:
        self.word("for")
        t = self.tok
        if t.kind != "var" or t.text == "$":
            raise ProfileError(f"expected a variable after 'for', found {t.describe()}", t.col)
        if t.text == "$msg":
            raise ProfileError("$msg is the message; bind another variable", t.col)
        self.var = t.text
        self.i += 1
        self.word("in")
        start = self.tok.col - 1
        path = self.for_path()
        span = (start, self.tok.col - 1)  # up to the next clause (or the end of the text)
        if self.at(","):
            raise ProfileError("only one for clause (one variable) is supported", self.tok.col)
        where = None
        if self.at_word("where"):
            self.i += 1
            if self.tok.kind == "eof":
                raise ProfileError(f"expected a condition after 'where', found "
                                   f"{self.tok.describe()}", self.tok.col)
            where = self.expr()
        t = self.tok
        if t.kind != "eof" or not t.text:
            if t.kind == "name" and t.text in _CLAUSES:
                raise ProfileError(f"unsupported clause '{t.text}'", t.col)
            if t.kind == "name" and t.text in ("for", "where"):
                raise ProfileError(f"unexpected second '{t.text}' clause", t.col)
            if t.kind == "eof":
                raise ProfileError("expected 'return' after the for/where clauses", t.col)
            raise ProfileError(f"unexpected {t.describe()} (expected 'where' or 'return')", t.col)
        return self.var, path, where, span

    def word(self, w: str) -> None:
        t = self.tok
        if not self.at_word(w):
            raise ProfileError(f"expected '{w}', found {t.describe()}", t.col)
        self.i += 1

    def for_path(self) -> ast.Path:
        t = self.tok
        if t.kind == "var":
            if t.text != "$msg":
                raise ProfileError(f"the for path starts at $msg, not {t.text!r}", t.col)
            self.i += 1
            if not (self.at("/") or self.at("//")):
                raise ProfileError(f"expected '/' or '//' after $msg, found "
                                   f"{self.tok.describe()}", self.tok.col)
        elif not (self.at("/") or self.at("//")):
            raise ProfileError(f"the for path is an absolute path ($msg/..., / or //), "
                               f"found {t.describe()}", t.col)
        steps, tail = self.steps_and_tail(absolute=True)
        if tail is not None:
            raise ProfileError("for binds elements: a trailing /@a or /text() is not allowed",
                               t.col)
        if not steps:
            raise ProfileError("the for path needs at least one element step", t.col)
        return ast.Path(tuple(steps))

    # -- paths from the variable ---------------------------------------------------
    def predicate(self) -> ast.Expr:
        self.depth += 1
        try:
            return super().predicate()
        finally:
            self.depth -= 1

    def operand(self):
        if self.depth:
            return super().operand()
        t = self.tok
        if t.kind == "var":
            return self.var_path()
        is_call = t.kind == "name" and self.peek().kind == "op" and self.peek().text == "("
        if t.kind == "op" and t.text in ("/", "//"):
            raise ProfileError(f"absolute paths are not allowed here; start the path at "
                               f"{self.var}", t.col)
        if is_call and t.text == "position":
            raise ProfileError("position() has no context here (use it in a step predicate)",
                               t.col)
        if (t.kind == "name" and (not is_call or t.text == "text")) or (
                t.kind == "op" and t.text in (".", "..", "@", "*")):
            raise ProfileError(f"a path here starts at {self.var} (e.g. {self.var}/"
                               f"{t.text if t.kind == 'name' else 'a'})", t.col)
        return super().operand()

    def var_path(self) -> ast.RelPath:
        t = self.tok
        if t.text == "$msg":
            raise ProfileError(f"absolute paths ($msg) are not allowed here; start the path "
                               f"at {self.var}", t.col)
        if t.text != self.var:
            raise ProfileError(f"unknown variable {t.text!r} (the for clause binds "
                               f"{self.var})", t.col)
        self.i += 1
        if self.at("["):
            raise ProfileError(f"predicates on {self.var} itself are not supported "
                               f"(move them to the for path)", self.tok.col)
        if not (self.at("/") or self.at("//")):
            return ast.RelPath((), None)
        steps, tail = self.steps_and_tail(absolute=False)
        return ast.RelPath(tuple(steps), tail)

    # -- enclosed expressions of the return clause ------------------------------------
    def enclosed(self) -> Enclosed:
        items = [self.projection()]
        while self.take(","):
            items.append(self.projection())
        t = self.tok
        if t.kind != "eof":
            raise ProfileError(f"unexpected {t.describe()} in an enclosed expression", t.col)
        return Enclosed(tuple(items))

    def projection(self) -> Projection:
        t = self.tok
        if t.kind == "name" and t.text == "copy" and self.peek().kind == "var":
            return self.copy_expr(top=False)
        if t.kind != "var":
            if t.kind == "op" and t.text in ("/", "//"):
                raise ProfileError("absolute paths are not allowed inside return; start "
                                   f"the path at {self.var}", t.col)
            raise ProfileError(f"expected a path starting at {self.var}, found "
                               f"{t.describe()}", t.col)
        path = self.var_path()
        steps: list[Step] = []
        while self.at("=") and self.peek().kind == "op" and self.peek().text == ">" \
                and self.peek().col == self.tok.col + 1:
            arrow = self.tok
            self.i += 2
            steps.append(self.step_call(arrow.col))
        if steps and path.tail is not None:
            raise ProfileError("transformation steps apply to elements, not to "
                               f"'{path.tail}'", t.col)
        return Projection(self.var, path, tuple(steps))

    # -- copy $c := ... modify (...) return $c ------------------------------------------
    def keyword(self, word: str, what: str) -> _Tok:
        t = self.tok
        if not (t.kind == "name" and t.text == word):
            raise ProfileError(f"expected {what}, found {t.describe()}", t.col)
        self.i += 1
        return t

    def copy_expr(self, top: bool) -> Projection:
        """``copy $c := $n[/path] modify U return $c``, the ``copy`` word current. At the
        top of return (``top``) the copied node is the binding itself."""
        self.i += 1
        v = self.tok
        if v.text in ("$", "$msg") or v.text == self.var:
            raise ProfileError(f"the copy needs a variable of its own, not {v.text!r}", v.col)
        cv = v.text
        self.i += 1
        self.expect(":=", "':=' after the copy variable")
        s = self.tok
        if s.kind != "var":
            raise ProfileError(f"copy takes a path starting at {self.var}, found "
                               f"{s.describe()}", s.col)
        path = self.var_path()
        if path.tail is not None:
            raise ProfileError(f"copy copies elements, not '{path.tail}'", s.col)
        if top and path.steps:
            raise ProfileError(f"at the top of return, copy takes the binding {self.var} "
                               "itself (XQuery copies one node); copy a path inside a "
                               f"constructor: <r>{{copy $c := {self.var}/... modify ... "
                               "return $c}</r>", s.col)
        self.keyword("modify", "'modify' after the copied path")
        updates: list[tuple[Update, int]] = []
        if self.take("("):
            updates.append(self.update(cv))
            while self.take(","):
                updates.append(self.update(cv))
            self.expect(")", "',' or ')' in the modify list")
        else:
            updates.append(self.update(cv))
        self.keyword("return", "'return' after the modify clause")
        r = self.tok
        if r.kind != "var" or r.text != cv:
            raise ProfileError(f"copy ... modify ... returns the copy: write 'return {cv}', "
                               f"found {r.describe()}", r.col)
        self.i += 1
        if self.at("/") or self.at("//") or self.at("[") or self.at("="):
            raise ProfileError(f"the copy is returned whole: write 'return {cv}' alone",
                               self.tok.col)
        for j, (later, col) in enumerate(updates):
            for earlier, _ in updates[:j]:
                if not independent(earlier, later.target):
                    raise ProfileError(
                        f"'{later.text(cv)}' could select or read other nodes after "
                        f"'{earlier.text(cv)}' (Onyx applies the updates in order, XQuery "
                        "Update all at once: here the two could differ)", col)
        return Projection(self.var, path, tuple(u for u, _ in updates))

    def update(self, cv: str) -> tuple[Update, int]:
        """One update of the modify clause and the column it starts at."""
        t = self.tok
        word = t.text if t.kind == "name" else None
        if word == "delete":
            self.i += 1
            n = self.tok
            if not (n.kind == "name" and n.text in ("node", "nodes")):
                raise ProfileError(f"expected 'node' or 'nodes' after delete, found "
                                   f"{n.describe()}", n.col)
            self.i += 1
            target, col = self.target(cv)
            if not target.steps and target.tail is None:
                raise ProfileError(f"deleting the copy {cv} itself does nothing (it has no "
                                   "parent); delete nodes inside it", col)
            return Delete(target), t.col
        if word == "rename":
            self.i += 1
            self.keyword("node", "'node' after rename")
            target, _ = self.target(cv)
            self.keyword("as", "'as' and the new name")
            name = self.literal("the new name")
            if not _NAME.fullmatch(name[0]):
                raise ProfileError(f"the new name must be an unprefixed name, not "
                                   f"{name[0]!r}", name[1])
            return RenameNode(target, name[0]), t.col
        if word == "replace":
            self.i += 1
            if self.tok.kind == "name" and self.tok.text == "node":
                raise ProfileError("'replace node' is not supported (only 'replace value "
                                   "of node')", self.tok.col)
            self.keyword("value", "'value of node' after replace")
            self.keyword("of", "'of node' after replace value")
            self.keyword("node", "'node' after replace value of")
            target, _ = self.target(cv)
            self.keyword("with", "'with' and the new value")
            value = self.literal("the new value")
            for k, ch in enumerate(value[0]):
                if not _xml_char(ord(ch)):
                    raise ProfileError(f"character {ch!r} is not allowed in XML", value[1] + k)
            return ReplaceValue(target, value[0]), t.col
        if word in ("insert", "copy", "transform"):
            raise ProfileError(f"'{word}' is not supported in a modify clause (delete, rename "
                               "and replace value of)", t.col)
        raise ProfileError(f"expected an update (delete node, rename node, replace value of "
                           f"node), found {t.describe()}", t.col)

    def literal(self, what: str) -> tuple[str, int]:
        t = self.tok
        if t.kind != "str":
            raise ProfileError(f"{what} must be a string literal, found {t.describe()}", t.col)
        self.i += 1
        return t.text[1:-1], t.col + 1

    def target(self, cv: str) -> tuple[ast.RelPath, int]:
        """A path from the copy variable: elements, or attributes with ``/@a``."""
        t = self.tok
        if t.kind != "var":
            if t.kind == "op" and t.text in ("/", "//"):
                raise ProfileError(f"absolute paths are not allowed here; start the path at "
                                   f"{cv}", t.col)
            raise ProfileError(f"expected a path starting at {cv}, found {t.describe()}",
                               t.col)
        if t.text != cv:
            raise ProfileError(f"an update changes the copy: start the path at {cv}, not "
                               f"{t.text}", t.col)
        self.i += 1
        if self.at("["):
            raise ProfileError(f"predicates on {cv} itself are not supported", self.tok.col)
        if not (self.at("/") or self.at("//")):
            return ast.RelPath((), None), t.col
        steps, tail = self.steps_and_tail(absolute=False)
        if isinstance(tail, ast.TextTail):
            raise ProfileError("text() targets are not supported (elements and attributes)",
                               t.col)
        return ast.RelPath(tuple(steps), tail), t.col

    def step_call(self, arrow_col: int) -> Step:
        t = self.tok
        if t.kind != "name" or not (self.peek().kind == "op" and self.peek().text == "("):
            raise ProfileError(f"expected a step call after '=>', found {t.describe()}",
                               t.col)
        self.i += 2
        args: list[tuple[str, int]] = []
        if not self.at(")"):
            while True:
                a = self.tok
                if a.kind != "str":
                    raise ProfileError(f"step arguments are string literals, found "
                                       f"{a.describe()}", a.col)
                args.append((a.text[1:-1], a.col + 1))
                self.i += 1
                if not self.take(","):
                    break
        self.expect(")", f"')' closing {t.text}(")
        return make_step(t.text, args, self.ns, t.col)


class _ReturnParser:
    """Character-level parser of the direct element constructor after ``return``."""

    nesting = 0  # constructors open around the current one (see MAX_NESTING)

    def __init__(self, text: str, pos: int, namespaces: dict[str, str], var: str) -> None:
        self.text, self.pos, self.ns, self.var = text, pos, namespaces, var

    def parse(self) -> Constructor | Projection:
        self.skip_ws()
        if self.pos >= len(self.text):
            raise ProfileError("expected an element constructor after 'return', found end "
                               "of profile", self.pos + 1)
        if _COPY.match(self.text, self.pos):
            tokens, _ = _lex(self.text, self.pos)
            p = _ClauseParser(tokens, self.ns, self.var)
            proj = p.copy_expr(top=True)
            if p.tok.kind != "eof":
                raise ProfileError(f"unexpected {p.tok.describe()} after the copy expression",
                                   p.tok.col)
            return proj
        if self.text[self.pos] != "<":
            raise ProfileError("return builds one element: write an element constructor "
                               "such as <r>{" + self.var + "/...}</r>", self.pos + 1)
        el = self.element()
        self.skip_ws()
        if self.pos < len(self.text):
            raise ProfileError(f"unexpected {self.text[self.pos]!r} after the returned "
                               "element (return builds one element)", self.pos + 1)
        return el

    def skip_ws(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos] in _WS:
            self.pos += 1

    def name(self, what: str) -> str:
        m = _NAME.match(self.text, self.pos)
        if m is None:
            raise ProfileError(f"expected {what}", self.pos + 1)
        end = m.end()
        if self.text.startswith(":", end) and _NAME.match(self.text, end + 1):
            raise ProfileError("namespace prefixes are not supported in constructors",
                               self.pos + 1)
        self.pos = end
        return m.group()

    def element(self) -> Constructor:
        start = self.pos
        self.pos += 1  # '<'
        if self.text.startswith("!--", self.pos):
            raise ProfileError("comments are not supported in constructors", start + 1)
        if self.text.startswith("![CDATA[", self.pos):
            raise ProfileError("CDATA sections are not supported in constructors", start + 1)
        tag = self.name("an element name after '<'")
        attrs: list[AttrTemplate] = []
        seen: set[str] = set()  # their names: one lookup per attribute (a scan of attrs was quadratic)
        while True:
            had_ws = self.pos < len(self.text) and self.text[self.pos] in _WS
            self.skip_ws()
            if self.text.startswith("/>", self.pos):
                self.pos += 2
                return Constructor(tag, tuple(attrs), ())
            if self.text.startswith(">", self.pos):
                self.pos += 1
                break
            if self.pos >= len(self.text):
                raise ProfileError(f"unterminated start tag <{tag}>", start + 1)
            if not had_ws:
                raise ProfileError(f"expected whitespace, '>' or '/>' in <{tag}>",
                                   self.pos + 1)
            attrs.append(self.attribute(tag, seen))
        content = self.content(tag, start)
        return self.checked(Constructor(tag, tuple(attrs), content), start)

    def attribute(self, tag: str, seen: set[str]) -> AttrTemplate:
        at = self.pos
        name = self.name(f"an attribute name in <{tag}>")
        if name == "xmlns":
            raise ProfileError("namespace declarations are not supported in constructors", at + 1)
        if name in seen:
            raise ProfileError(f"duplicate attribute '{name}'", at + 1)
        seen.add(name)
        self.skip_ws()
        if not self.text.startswith("=", self.pos):
            raise ProfileError(f"expected '=' after attribute '{name}'", self.pos + 1)
        self.pos += 1
        self.skip_ws()
        q = self.text[self.pos:self.pos + 1]
        if q not in ("'", '"'):
            raise ProfileError(f"expected a quoted value for attribute '{name}'", self.pos + 1)
        self.pos += 1
        parts: list[str | Enclosed] = []
        buf: list[str] = []
        while True:
            if self.pos >= len(self.text):
                raise ProfileError(f"unterminated value of attribute '{name}'", at + 1)
            ch = self.text[self.pos]
            if ch == q:
                if self.text.startswith(q + q, self.pos):
                    buf.append(q)
                    self.pos += 2
                    continue
                self.pos += 1
                break
            if ch == "<":
                raise ProfileError("'<' is not allowed in an attribute value", self.pos + 1)
            if ch in "{}":
                if self.text.startswith(ch * 2, self.pos):
                    buf.append(ch)
                    self.pos += 2
                    continue
                if ch == "}":
                    raise ProfileError("unmatched '}' (write '}}' for a brace)", self.pos + 1)
                if buf:
                    parts.append("".join(buf))
                    buf = []
                enc = self.enclosed()
                for p in enc.items:
                    if p.steps:
                        raise ProfileError("transformation steps are not allowed in "
                                           "attribute values", self.pos)
                parts.append(enc)
                continue
            if ch == "&":
                buf.append(self.reference())
                continue
            buf.append(" " if self.char() in _WS else ch)  # attribute-value normalisation
        if buf:
            parts.append("".join(buf))
        return AttrTemplate(name, tuple(parts))

    def reference(self) -> str:
        ch, self.pos = _reference(self.text, self.pos)
        return ch

    def char(self) -> str:
        """The literal character at ``pos`` (and move past it): one XML allows, or
        the results built with it could not be written (as a reference would be)."""
        ch = self.text[self.pos]
        if not _xml_char(ord(ch)):
            raise ProfileError(f"character {ch!r} is not allowed in XML", self.pos + 1)
        self.pos += 1
        return ch

    def enclosed(self) -> Enclosed:
        open_at = self.pos
        tokens, stop = _lex(self.text, self.pos + 1, stop_char="}")
        if stop is None:
            raise ProfileError("unterminated enclosed expression '{'", open_at + 1)
        if len(tokens) == 1:
            raise ProfileError("empty enclosed expression '{}'", open_at + 1)
        enc = _ClauseParser(tokens, self.ns, self.var).enclosed()
        self.pos = stop + 1
        return enc

    def content(self, tag: str, start: int) -> tuple:
        out: list = []
        buf: list[str] = []
        boundary = True  # the text so far is literal whitespace only

        def flush() -> None:
            nonlocal buf, boundary
            if buf and not boundary:
                text = "".join(buf)
                if out and isinstance(out[-1], str):
                    out[-1] += text
                else:
                    out.append(text)
            buf, boundary = [], True

        while True:
            if self.pos >= len(self.text):
                raise ProfileError(f"element <{tag}> is not closed", start + 1)
            ch = self.text[self.pos]
            if ch == "<":
                if self.text.startswith("</", self.pos):
                    flush()
                    at = self.pos
                    self.pos += 2
                    end = self.name("an element name after '</'")
                    if end != tag:
                        raise ProfileError(f"end tag </{end}> does not match <{tag}>", at + 1)
                    self.skip_ws()
                    if not self.text.startswith(">", self.pos):
                        raise ProfileError(f"expected '>' closing </{end}", self.pos + 1)
                    self.pos += 1
                    return tuple(out)
                flush()
                if self.nesting >= MAX_NESTING:
                    raise ProfileError(f"constructors nested more than {MAX_NESTING} deep are not supported",
                                       self.pos + 1)
                self.nesting += 1
                out.append(self.element())
                self.nesting -= 1
            elif ch in "{}":
                if self.text.startswith(ch * 2, self.pos):
                    buf.append(ch)
                    boundary = False
                    self.pos += 2
                elif ch == "}":
                    raise ProfileError("unmatched '}' (write '}}' for a brace)", self.pos + 1)
                else:
                    flush()
                    out.append(self.enclosed())
            elif ch == "&":
                buf.append(self.reference())
                boundary = False
            else:
                buf.append(self.char())
                boundary = boundary and ch in _WS

    @staticmethod
    def checked(el: Constructor, start: int) -> Constructor:
        """XQuery's static rules on attributes: attribute projections come before the
        rest of the content, and no attribute name can be given twice."""
        names = {a.name for a in el.attrs}
        other = False
        for item in el.content:
            projections = item.items if isinstance(item, Enclosed) else ()
            if not projections:
                other = True
            for p in projections:
                if p.kind != "attribute":
                    other = True
                    continue
                if other:
                    raise ProfileError(f"in <{el.name}>, the attribute projection {p} comes "
                                       "after other content (attributes come first)", start + 1)
                name = p.path.tail.name
                if name in names:
                    raise ProfileError(f"in <{el.name}>, attribute '{name}' could be set "
                                       "twice", start + 1)
                names.add(name)
        return el


def _xml_char(c: int) -> bool:
    return (c in (0x9, 0xA, 0xD) or 0x20 <= c <= 0xD7FF or 0xE000 <= c <= 0xFFFD
            or 0x10000 <= c <= 0x10FFFF)
