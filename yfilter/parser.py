"""Recursive-descent parser for the filtering subset of XPath 1.0 (DESIGN.md s.3).

>>> p = parse("$msg//tobject.subject[@tobject.subject.type = 'Stock'][2]")
>>> p.steps[0].axis, p.steps[0].test, len(p.steps[0].preds)
('//', 'tobject.subject', 2)
>>> parse("/a/b[", {})
Traceback (most recent call last):
...
yfilter.errors.ProfileError: expected an expression, found end of profile at column 6

Prefixed names resolve through ``namespaces`` (prefix -> URI; ``xml`` is always
bound); an unprefixed name never matches a namespaced element, as in XPath 1.0.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import lru_cache

from yfilter import ast
from yfilter.errors import ProfileError
from yfilter.values import number

XML_NS = "http://www.w3.org/XML/1998/namespace"

_NAME_START = (r"A-Za-z_\u00C0-\u02FF\u0370-\u037D\u037F-\u1FFF\u200C-\u200D\u2070-\u218F"
               r"\u2C00-\u2FEF\u3001-\uD7FF\uF900-\uFDCF\uFDF0-\uFFFD")
_NCNAME = rf"[{_NAME_START}][\w.\-\u00B7\u0300-\u036F\u203F-\u2040\u00C0-\uFFFD]*"
_TOKEN = re.compile(
    rf"""(?P<ws>[\ \t\r\n]+)  # XPath's whitespace only (\s also takes \x1c, \xa0, ...)
      | (?P<name>{_NCNAME}(?::{_NCNAME})?)
      | (?P<num>\d+(?:\.\d*)?|\.\d+)
      | (?P<str>"[^"]*"|'[^']*')
      | (?P<var>\$(?:{_NCNAME})?)
      | (?P<op>//|/|::|\.\.|\.|\[|\]|\(|\)|@|,|!=|<=|>=|=|<|>|\*|\||-|\+)""",
    re.VERBOSE,
)
_AXES = {"ancestor", "ancestor-or-self", "attribute", "child", "descendant",
         "descendant-or-self", "following", "following-sibling", "namespace",
         "parent", "preceding", "preceding-sibling", "self"}
_NODE_TYPES = {"node", "comment", "processing-instruction"}
_FUNCTIONS = {"contains", "starts-with"}
_CMP = {"=", "!=", "<", "<=", ">", ">="}
_SURROGATE = re.compile("[\ud800-\udfff]")
MAX_NESTING = 32
"""Conditions nest at most this deep (predicates, parentheses and ``not()`` inside one
another): deeper ones are refused with their position, rather than exhausting Python's
stack here or, later, in whatever else walks a profile (a broker's routing query)."""


class _Tok:
    __slots__ = ("kind", "text", "col")

    def __init__(self, kind: str, text: str, col: int) -> None:
        self.kind, self.text, self.col = kind, text, col

    def describe(self) -> str:
        return "end of profile" if self.kind == "eof" else repr(self.text)


def _tokenize(text: str) -> list[_Tok]:
    out: list[_Tok] = []
    pos = 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            ch = text[pos]
            if ch in "\"'":
                raise ProfileError("unterminated string literal", pos + 1)
            raise ProfileError(f"unexpected character {ch!r}", pos + 1)
        kind = m.lastgroup
        if kind != "ws":
            out.append(_Tok(kind, m.group(), pos + 1))
        pos = m.end()
    out.append(_Tok("eof", "", len(text) + 1))
    return out


def parse(text: str, namespaces: Mapping[str, str] | None = None) -> ast.Path:
    """Parse a filtering profile into an :class:`ast.Path`; raise
    :class:`ProfileError` naming the column and construct of the first problem."""
    if not isinstance(text, str):
        raise ProfileError(f"a profile is text, not {type(text).__name__}")
    return _parse_recent(text, tuple(sorted((namespaces or {}).items())))


@lru_cache(maxsize=1024)
def _parse_recent(text: str, namespaces: tuple[tuple[str, str], ...]) -> ast.Path:
    # A broker hosting a profile parses its text several times in a row (its routing
    # query, its local engine, what it reads of a message); the tree is immutable, so
    # the recent ones are kept. A text that fails raises each time (nothing is kept).
    check_unicode(text)
    return _Parser(text, dict(namespaces)).profile()


def check_unicode(text: str) -> None:
    """Refuse a text holding a lone surrogate (a ``str`` can, e.g. from a JSON
    ``"\\ud800"`` escape): it is no Unicode character, so no message holds it, and it
    has no UTF-8 form for the C matcher's tables.

    >>> check_unicode("/a[@x = '\\udcf5']")
    Traceback (most recent call last):
    ...
    yfilter.errors.ProfileError: lone surrogate '\\udcf5' is not a character at column 10
    """
    m = _SURROGATE.search(text)
    if m is not None:
        raise ProfileError(f"lone surrogate {ascii(m.group())} is not a character", m.start() + 1)


class _Parser:
    nesting = 0  # conditions open around the current token (see MAX_NESTING)

    def __init__(self, text: str, namespaces: dict[str, str]) -> None:
        self.toks = _tokenize(text)
        self.i = 0
        self.ns = namespaces

    # -- token helpers -------------------------------------------------------
    @property
    def tok(self) -> _Tok:
        return self.toks[self.i]

    def peek(self, k: int = 1) -> _Tok:
        return self.toks[min(self.i + k, len(self.toks) - 1)]

    def at(self, text: str) -> bool:
        return self.tok.kind == "op" and self.tok.text == text

    def take(self, text: str) -> bool:
        if self.at(text):
            self.i += 1
            return True
        return False

    def expect(self, text: str, what: str | None = None) -> _Tok:
        t = self.tok
        if not self.at(text):
            raise ProfileError(f"expected {what or repr(text)}, found {t.describe()}", t.col)
        self.i += 1
        return t

    def at_word(self, word: str) -> bool:
        return self.tok.kind == "name" and self.tok.text == word

    # -- grammar -------------------------------------------------------------
    def profile(self) -> ast.Path:
        t = self.tok
        if t.kind == "var":
            if t.text != "$msg":
                raise ProfileError(f"unknown variable {t.text!r} (only $msg)", t.col)
            self.i += 1
            if not (self.at("/") or self.at("//")):
                raise ProfileError(f"expected '/' or '//' after $msg, found {self.tok.describe()}",
                                   self.tok.col)
        elif t.kind == "name" and t.text == "for" and self.peek().kind == "var":
            raise ProfileError("a transformation profile (for ... return) is not a path: "
                               "parse it with yfilter.flwr.parse_flwr", t.col)
        elif t.kind == "eof":
            raise ProfileError("empty profile", t.col)
        elif not (self.at("/") or self.at("//")):
            raise ProfileError(f"a profile is an absolute path starting with '/', '//' or "
                               f"'$msg', found {t.describe()}", t.col)
        steps, tail = self.steps_and_tail(absolute=True)
        if self.tok.kind != "eof":
            t = self.tok
            if t.kind == "op" and t.text == "|":
                raise ProfileError("unsupported operator '|' (union)", t.col)
            raise ProfileError(f"unexpected {t.describe()} after the path", t.col)
        if not steps:
            raise ProfileError("a profile needs at least one element step", t.col)
        return ast.Path(tuple(steps), tail)

    def steps_and_tail(self, absolute: bool) -> tuple[list[ast.Step], ast.Tail]:
        """Parse ``(/|//) step ...`` up to an optional final ``@a`` / ``text()``.
        For relative paths the caller has consumed the first step's separator."""
        steps: list[ast.Step] = []
        tail: ast.Tail = None
        while self.at("/") or self.at("//"):
            sep = self.tok
            axis = ast.CHILD if sep.text == "/" else ast.DESCENDANT
            self.i += 1
            if absolute and not steps and sep.text == "/" and self.tok.kind == "eof":
                raise ProfileError("the root node '/' alone selects no element", sep.col)
            if self.at("@") or self.at_text():
                if axis == ast.DESCENDANT:
                    raise ProfileError(f"unsupported step '//{self.tok.text}' (use //*/@a or "
                                       "//*/text())", sep.col)
                if not steps and absolute:
                    raise ProfileError("an attribute or text() needs an element step before it",
                                       self.tok.col)
                tail = self.tail()
                break
            steps.append(self.step(axis))
        return steps, tail

    def at_text(self) -> bool:
        return self.at_word("text") and self.peek().kind == "op" and self.peek().text == "("

    def tail(self) -> ast.Tail:
        if self.take("@"):
            return ast.AttrTail(self.qname(attribute=True))
        self.i += 1  # 'text'
        self.expect("(")
        self.expect(")")
        return ast.TextTail()

    def step(self, axis: str) -> ast.Step:
        t = self.tok
        if t.kind == "op" and t.text in (".", ".."):
            raise ProfileError(f"unsupported step {t.text!r} inside a path", t.col)
        if t.kind == "name" and self.peek().kind == "op" and self.peek().text == "::":
            if t.text != "child":
                what = "axis" if t.text in _AXES else "axis name"
                raise ProfileError(f"unsupported {what} '{t.text}::'", t.col)
            self.i += 2
            t = self.tok
        if t.kind == "op" and t.text == "*":
            self.i += 1
            test = "*"
        elif t.kind == "name":
            if self.peek().kind == "op" and self.peek().text == "(":
                raise ProfileError(f"unsupported node test '{t.text}()'", t.col)
            test = self.qname(attribute=False)
        else:
            raise ProfileError(f"expected an element name or '*', found {t.describe()}", t.col)
        preds = []
        while self.at("["):
            preds.append(self.predicate())
        return ast.Step(axis, test, tuple(preds))

    def qname(self, attribute: bool) -> str:
        t = self.tok
        if t.kind == "op" and t.text == "*":
            raise ProfileError("unsupported attribute wildcard '@*'", t.col)
        if t.kind != "name":
            raise ProfileError(f"expected a name, found {t.describe()}", t.col)
        self.i += 1
        if ":" not in t.text:
            return t.text
        prefix, local = t.text.split(":", 1)
        uri = XML_NS if prefix == "xml" else self.ns.get(prefix)
        if uri is None:
            raise ProfileError(f"undeclared namespace prefix '{prefix}'", t.col)
        return f"{{{uri}}}{local}"

    def predicate(self) -> ast.Expr:
        open_tok = self.expect("[")
        if self.at("]"):
            raise ProfileError("empty predicate '[]'", open_tok.col)
        expr = self.expr(whole_predicate=True)
        self.expect("]", "']' closing the predicate")
        return expr

    def expr(self, whole_predicate: bool = False) -> ast.Expr:
        if self.nesting >= MAX_NESTING:
            raise ProfileError(f"conditions nested more than {MAX_NESTING} deep (predicates, parentheses, "
                               "not()) are not supported", self.tok.col)
        self.nesting += 1
        try:
            items = [self._operand_of("or", self.and_expr, whole_predicate)]
            while self.at_word("or"):
                self.i += 1
                items.append(self._operand_of("or", self.and_expr, False))
        finally:
            self.nesting -= 1
        return ast.Or(tuple(items)) if len(items) > 1 else items[0]

    def and_expr(self, whole_predicate: bool) -> ast.Expr:
        items = [self._operand_of("and", self.comparison, whole_predicate)]
        while self.at_word("and"):
            self.i += 1
            items.append(self._operand_of("and", self.comparison, False))
        return ast.And(tuple(items)) if len(items) > 1 else items[0]

    def _operand_of(self, word: str, parse_item, whole_predicate: bool) -> ast.Expr:
        # XPath reads a predicate as position() = n only when the whole predicate is a
        # number; anywhere else a number would mean boolean(n), which is never what a
        # subscriber meant, so it is refused.
        start = self.tok
        item = parse_item(whole_predicate) if parse_item == self.and_expr else parse_item()
        if isinstance(item, ast.Number) and not (whole_predicate and self.at("]")):
            raise ProfileError("a number is only a condition as a whole predicate ([n])",
                               start.col)
        return item

    def comparison(self) -> ast.Expr:
        start = self.tok
        left = self.operand()
        t = self.tok
        if t.kind == "op" and t.text in _CMP:
            self.i += 1
            right_tok = self.tok
            right = self.operand()
            if isinstance(right, _BOOLEAN):
                raise ProfileError("a condition cannot be compared", right_tok.col)
            if isinstance(left, _BOOLEAN):
                raise ProfileError("a condition cannot be compared", start.col)
            return self._compare(t.text, left, right, start.col)
        if t.kind == "op" and t.text in ("+", "-", "*", "|"):
            raise ProfileError(f"unsupported operator {t.text!r}", t.col)
        if t.kind == "name" and t.text in ("div", "mod"):
            raise ProfileError(f"unsupported operator {t.text!r}", t.col)
        if isinstance(left, ast.Literal):
            raise ProfileError("a string literal is not a condition", start.col)
        if isinstance(left, ast.Position):
            raise ProfileError("position() alone is not a condition (compare it)", start.col)
        return left

    def _compare(self, op: str, left, right, col: int) -> ast.Compare:
        paths = (ast.RelPath, ast.Position)
        if isinstance(left, ast.Call) or isinstance(right, ast.Call):
            raise ProfileError("the result of a function cannot be compared", col)
        if isinstance(left, paths) and isinstance(right, paths):
            raise ProfileError("comparing two paths (or position()) is not supported", col)
        if not isinstance(left, paths) and not isinstance(right, paths):
            raise ProfileError("a comparison needs a path or position() on one side", col)
        return ast.Compare(op, left, right)

    def operand(self):
        t = self.tok
        if t.kind == "str":
            self.i += 1
            return ast.Literal(t.text[1:-1])
        if t.kind == "num" or (t.kind == "op" and t.text == "-" and self.peek().kind == "num"):
            neg = self.take("-")
            n = self.tok
            self.i += 1
            if self.tok.kind == "name" and self.tok.col == n.col + len(n.text):
                raise ProfileError(f"malformed number {n.text + self.tok.text!r}", n.col)
            value = number(n.text)
            return ast.Number(-value if neg else value)
        if t.kind == "op" and t.text == "(":
            self.i += 1
            inner = self.expr()
            self.expect(")", "')' closing the group")
            return _Group(inner)
        if t.kind == "var":
            raise ProfileError(f"variable {t.text!r} is not allowed inside a predicate", t.col)
        if t.kind == "name" and self.peek().kind == "op" and self.peek().text == "(":
            return self.call()
        if t.kind == "op" and t.text in ("/", "//"):
            raise ProfileError("absolute paths are not allowed inside predicates", t.col)
        if (t.kind == "name" or (t.kind == "op" and t.text in (".", "..", "@", "*"))):
            return self.relpath()
        raise ProfileError(f"expected an expression, found {t.describe()}", t.col)

    def call(self):
        t = self.tok
        name = t.text
        if name == "not":
            self.i += 2
            inner = self.expr()
            self.expect(")", "')' closing not(")
            return ast.Not(inner)
        if name == "position":
            self.i += 1
            self.expect("(")
            self.expect(")", "')' (position() takes no arguments)")
            return ast.Position()
        if name == "text":
            return self.relpath()
        if name in _FUNCTIONS:
            self.i += 2
            args = [self.func_arg(name)]
            self.expect(",", f"',' ({name}() takes two arguments)")
            args.append(self.func_arg(name))
            self.expect(")", f"')' ({name}() takes two arguments)")
            return ast.Call(name, tuple(args))
        if name in _NODE_TYPES:
            raise ProfileError(f"unsupported node test '{name}()'", t.col)
        raise ProfileError(f"unsupported function '{name}()'", t.col)

    def func_arg(self, fname: str):
        t = self.tok
        arg = self.operand()
        if isinstance(arg, ast.RelPath):
            if arg.steps and isinstance(arg.tail, ast.TextTail):
                raise ProfileError(f"in {fname}(), text() is only supported on the context "
                                   "element (text())", t.col)
            return arg
        if isinstance(arg, ast.Literal):
            return arg
        raise ProfileError(f"{fname}() arguments must be paths or string literals", t.col)

    def relpath(self) -> ast.RelPath:
        t = self.tok
        if t.kind == "op" and t.text == "..":
            raise ProfileError("unsupported step '..' (parent axis)", t.col)
        if self.take("."):
            if self.at("/") or self.at("//"):
                steps, tail = self.steps_and_tail(absolute=False)
                if not steps and tail is None:
                    raise ProfileError("expected a step after '.'", self.tok.col)
                return ast.RelPath(tuple(steps), tail)
            return ast.RelPath((), None)
        if self.at("@") or self.at_text():
            return ast.RelPath((), self.tail())
        first = self.step(ast.CHILD)
        steps, tail = self.steps_and_tail(absolute=False)
        return ast.RelPath((first, *steps), tail)


class _Group:
    """A parenthesised condition; only valid where a condition is expected."""

    def __new__(cls, inner):
        return inner


_BOOLEAN = (ast.Or, ast.And, ast.Not, ast.Compare)  # conditions: (a = 1) = b is refused
