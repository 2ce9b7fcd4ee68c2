"""A hand-written recursive-descent parser for MDV's rule language (paper section 2.3), with a
tokenizer that keeps positions, so every error names where and what (:class:`RuleError`).

Grammar (keywords case-insensitive; strings in ``'...'`` or ``"..."``, a quote doubled inside)::

    rule       := 'search' binding (',' binding)* 'register' NAME ['where' disjunction]
    binding    := (NAME | 'rule' '(' INTEGER ')') NAME
    disjunction:= conjunction ('or' conjunction)*
    conjunction:= atom ('and' atom)*
    atom       := '(' disjunction ')' | operand OP operand
    operand    := path | STRING | NUMBER
    path       := NAME ('.' NAME ['?'])*
    OP         := '=' | '!=' | '<' | '<=' | '>' | '>=' | 'contains'

>>> r = parse("search CycleProvider c register c where c.serverHost contains 'uni-passau.de'")
>>> r.bindings, r.where.op, r.where.right
((Binding(extension='CycleProvider', var='c', pos=7),), 'contains', Const(value='uni-passau.de', pos=62))
>>> parse("search CycleProvider c register c where c.memory >")
Traceback (most recent call last):
...
catalog.errors.RuleError: expected a path, a string or a number, found the end of the rule (operand at position 50)
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from catalog import defaults
from catalog.errors import RuleError
from catalog.syntax import OPERATORS, And, Binding, Comparison, Const, Or, Path, Rule, Step

KEYWORDS = ("search", "register", "where", "and", "or", "contains")

_TOKEN = re.compile(r"""
    (?P<space>\s+)
  | (?P<number>[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?(?![A-Za-z_]))
  | (?P<name>[A-Za-z_][A-Za-z0-9_\-]*)
  | (?P<string>'(?:[^']|'')*'|"(?:[^"]|"")*")
  | (?P<op><=|>=|!=|=|<|>)
  | (?P<punct>[.,()?])
""", re.VERBOSE)


@dataclass(frozen=True)
class Token:
    kind: str     # name, keyword, number, string, op, punct, end
    text: str
    pos: int


def tokenize(text: str) -> list[Token]:
    """The tokens of ``text``, ending with an ``end`` token."""
    tokens, pos = [], 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            if text[pos] in "'\"":
                raise RuleError("string not closed", pos, "string")
            raise RuleError(f"unexpected character {text[pos]!r}", pos, "character")
        kind, value = m.lastgroup, m.group()
        if kind == "name" and value.lower() in KEYWORDS:
            kind, value = ("op" if value.lower() == "contains" else "keyword"), value.lower()
        if kind != "space":
            tokens.append(Token(kind, value, pos))
        pos = m.end()
    tokens.append(Token("end", "", len(text)))
    return tokens


def _describe(tok: Token) -> str:
    return "the end of the rule" if tok.kind == "end" else repr(tok.text)


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens = tokenize(text)
        self.i = 0

    @property
    def tok(self) -> Token:
        return self.tokens[self.i]

    def take(self) -> Token:
        tok = self.tokens[self.i]
        self.i += 1
        return tok

    def expect(self, kind: str, text: str | None, what: str, construct: str) -> Token:
        tok = self.tok
        if tok.kind != kind or (text is not None and tok.text != text):
            raise RuleError(f"expected {what}, found {_describe(tok)}", tok.pos, construct)
        return self.take()

    def rule(self) -> Rule:
        self.expect("keyword", "search", "'search'", "search clause")
        bindings = [self.binding()]
        while self.tok.text == "," and self.tok.kind == "punct":
            self.take()
            bindings.append(self.binding())
        self.expect("keyword", "register", "',' or 'register'", "register clause")
        reg = self.expect("name", None, "the variable to register", "register clause")
        where = None
        if self.tok.kind == "keyword" and self.tok.text == "where":
            self.take()
            where = self.disjunction()
        if self.tok.kind != "end":
            raise RuleError(f"expected 'and', 'or' or the end of the rule, found {_describe(self.tok)}",
                            self.tok.pos, "syntax")
        return Rule(tuple(bindings), reg.text, reg.pos, where, self.text)

    def binding(self) -> Binding:
        ext = self.expect("name", None, "a class or rule(N)", "extension")
        extension: str | int = ext.text
        if ext.text == "rule" and self.tok.text == "(":
            self.take()
            num = self.expect("number", None, "a rule id", "extension")
            if not re.fullmatch(r"\d+", num.text):
                raise RuleError(f"a rule id is a whole number, not {num.text}", num.pos, "extension")
            extension = int(num.text)
            self.expect("punct", ")", "')'", "extension")
        var = self.expect("name", None, "a variable name", "variable")
        return Binding(extension, var.text, ext.pos)

    def disjunction(self):
        items = [self.conjunction()]
        while self.tok.kind == "keyword" and self.tok.text == "or":
            self.take()
            items.append(self.conjunction())
        return items[0] if len(items) == 1 else Or(tuple(items))

    def conjunction(self):
        items = [self.atom()]
        while self.tok.kind == "keyword" and self.tok.text == "and":
            self.take()
            items.append(self.atom())
        return items[0] if len(items) == 1 else And(tuple(items))

    def atom(self):
        if self.tok.kind == "punct" and self.tok.text == "(":
            self.take()
            inner = self.disjunction()
            self.expect("punct", ")", "')'", "parenthesis")
            return inner
        left = self.operand()
        if self.tok.kind != "op":
            raise RuleError(f"expected a comparison operator ({', '.join(OPERATORS)}), found {_describe(self.tok)}",
                            self.tok.pos, "comparison")
        op = self.take().text
        right = self.operand()
        return Comparison(left, op, right, left.pos)

    def operand(self) -> Path | Const:
        tok = self.tok
        if tok.kind == "string":
            self.take()
            return Const(tok.text[1:-1].replace(tok.text[0] * 2, tok.text[0]), tok.pos)
        if tok.kind == "number":
            self.take()
            return Const(float(tok.text), tok.pos)
        if tok.kind == "name":
            self.take()
            steps = []
            while self.tok.kind == "punct" and self.tok.text == ".":
                self.take()
                name = self.expect("name", None, "a property name", "path")
                star = self.tok.kind == "punct" and self.tok.text == "?"
                if star:
                    self.take()
                steps.append(Step(name.text, star, name.pos))
            return Path(tok.text, tuple(steps), tok.pos)
        raise RuleError(f"expected a path, a string or a number, found {_describe(tok)}", tok.pos, "operand")


def parse(text: str) -> Rule:
    """The syntax tree of one rule; :class:`RuleError` if ``text`` is not in the language."""
    if len(text) > defaults.MAX_RULE_CHARS:
        raise RuleError(f"rule longer than {defaults.MAX_RULE_CHARS} characters", defaults.MAX_RULE_CHARS, "rule")
    return _Parser(text).rule()
