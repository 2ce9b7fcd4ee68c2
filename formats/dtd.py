"""The names a DTD's ``<!ELEMENT>`` and ``<!ATTLIST>`` declarations declare, read in
time linear in the text's length, whatever the text.

Why: a source's schema is untrusted (``POST /sources`` needs no token) and is read
again at every start of the registration service. The regular expressions that read
it before backtracked: a 6 KB ``<!ATTLIST`` with a long name and no ``>`` cost 0.4 s
of CPU with the GIL held (the whole service stalled), 1 MB would cost hours. This
reader finds exactly what they found -- the same names, in the same order, on every
text, valid or not, so no source's dictionary changes (``bench.schema`` keeps them as
the reference; tests/formats/test_schema.py compares the two) -- but reads each stretch
of the text a bounded number of times (1 MB: at most 0.2 s, ``bench.schema``).

What is read, the old expressions' meaning (also where a DTD is not well-formed):

* an element name: ``<!ELEMENT``, white space, then the characters up to white
  space, ``>``, ``(`` or ``)`` (anywhere: comments and literals are not skipped);
* an attribute list's body: after ``<!ATTLIST``, white space and a name (up to white
  space or ``>``), everything up to the first ``>`` outside quoted literals; a list
  without such a ``>`` is skipped, unless a quote inside its name opens a literal that
  makes one (the longest name for which the body closes is taken);
* in a body, each attribute definition's name: a name, white space, a type (``CDATA``,
  ``ID``, ``IDREF(S)``, ``ENTITY``, ``ENTITIES``, ``NMTOKEN(S)``, ``NOTATION (...)`` or
  an enumeration ``(...)``), white space and a default (``#REQUIRED``, ``#IMPLIED`` or a
  literal, after ``#FIXED`` or not); a name is any run of characters but white space,
  ``%``, ``(``, ``)`` and ``|``, searched for left to right after the previous definition.

>>> dtd = b"<!ELEMENT nitf (head)> <!ATTLIST nitf id ID #REQUIRED x (a|b) 'a>b' %more;>"
>>> element_names(dtd)
[b'nitf']
>>> [attribute_names(body) for body in attlist_bodies(dtd)]
[[b'id', b'x']]
"""

from __future__ import annotations

import re
from collections.abc import Iterator

# Linear as it stands: the white space and the name cannot take the same character,
# so a declaration that fails costs its own white space once.
_ELEMENT = re.compile(rb"<!ELEMENT\s+([^\s>()]+)")
_ATTLIST = re.compile(rb"<!ATTLIST\s+([^\s>]+)")
_STOP = re.compile(rb"[>\"']")
"""What a body's walk stops at: its end, or a literal to skip."""
_ATTDEF_NAME = re.compile(rb"[^\s%()|]+")
_ATTDEF_TYPE = re.compile(
    rb"\s+(?:(?:CDATA|IDREFS|IDREF|ID|ENTITY|ENTITIES|NMTOKENS|NMTOKEN)(?=\s)|NOTATION\s*\(|\()"
)
_ATTDEF_DEFAULT = re.compile(rb"\s+(?:#REQUIRED|#IMPLIED|(?:#FIXED\s+)?([\"']))")
_CLOSE_PAREN = re.compile(rb"\)")


def element_names(data: bytes) -> list[bytes]:
    """The names after each ``<!ELEMENT``, in order (see the module's docstring)."""
    return _ELEMENT.findall(data)


class _NextMatch:
    """The first position at or after ``i`` where a one-character pattern matches (the
    text's length if none), remembering the last answer: asked at increasing positions,
    as the readers here ask, no stretch of the text is searched twice."""

    def __init__(self, data: bytes, pattern: re.Pattern[bytes]) -> None:
        self.data, self.search = data, pattern.search
        self.asked, self.found = 1, 0  # an empty stretch: nothing known yet

    def __call__(self, i: int) -> int:
        if not self.asked <= i <= self.found:
            m = self.search(self.data, i)
            self.asked, self.found = i, m.start() if m else len(self.data)
        return self.found


class _Bodies:
    """Where a body read from a given position ends. Walks that reach the same ``>`` or
    quote outside literals go on the same way from there, and a walk that ends ends an
    attribute list: no later walk starts before that end. So a stop that an earlier walk
    reached means a body that never ends, and each stop is walked from once: walks from
    many unterminated ``<!ATTLIST`` (the attack) share their tails instead of each reading
    to the end of the text, for one byte of memory per byte of text."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.first_stop = _NextMatch(data, _STOP)
        self.reached = bytearray(len(data) + 1)
        self.reached[len(data)] = 1  # the end of the text: no '>' there

    def end(self, stop: int) -> int:
        """The position of the ``>`` that ends a body reaching ``stop`` (a ``>`` or a
        quote, or the text's length) outside literals, or -1 if the body never ends."""
        data, reached = self.data, self.reached
        while not reached[stop]:
            reached[stop] = 1
            if data[stop] == 0x3E:  # '>'
                return stop
            closing = data.find(data[stop:stop + 1], stop + 1)
            if closing < 0:
                return -1
            m = _STOP.search(data, closing + 1)
            stop = m.start() if m else len(data)
        return -1


def attlist_bodies(data: bytes) -> Iterator[bytes]:
    """The text between each ``<!ATTLIST``'s name and its closing ``>``, in order (see
    the module's docstring)."""
    bodies = _Bodies(data)
    pos = 0
    while (head := _ATTLIST.search(data, pos)) is not None:
        start, end = head.span(1)
        close = bodies.end(bodies.first_stop(end))
        begin = end
        if close < 0:
            # The old expression then tried the name at every shorter length, longest
            # first. A body read from inside the name crosses the rest of it and goes
            # on as the whole name's did, unless it enters a literal the name does not
            # close: one opened by the name's last quote of either kind. So only those
            # two places can start another body, the one further right first.
            quotes = (data.rfind(b'"', start + 1, end), data.rfind(b"'", start + 1, end))
            for begin in sorted(quotes, reverse=True):
                close = bodies.end(begin) if begin >= 0 else -1
                if close >= 0:
                    break
        if close >= 0:
            yield data[begin:close]
            pos = close + 1
        else:
            pos = head.start() + 1


def attribute_names(body: bytes) -> list[bytes]:
    """The names of the attribute definitions in an attribute list's body, in order
    (see the module's docstring)."""
    # Linear: a name is searched for once (a failed definition skips it), the white
    # space after it is its own, and both the ')' of enumerations and the places where
    # types end are met at increasing positions (definitions are tried left to right;
    # one that fails in an enumeration resumes inside it): the ')' is searched for once
    # per stretch, and what follows a type is read once per place a type ends (many
    # enumerations may end at one ')').
    names = []
    close_paren = _NextMatch(body, _CLOSE_PAREN)
    type_end = default_end = -1
    pos = 0
    while (name := _ATTDEF_NAME.search(body, pos)) is not None:
        typed = _type_end(body, name.end(), close_paren)
        if typed >= 0 and typed != type_end:
            type_end, default_end = typed, _default_end(body, typed)
        end = default_end if typed >= 0 else -1
        if end < 0:
            pos = name.end()  # from any later character of the name it ends the same way
        else:
            names.append(name.group())
            pos = end
    return names


def _type_end(body: bytes, i: int, close_paren: _NextMatch) -> int:
    """Where the white space and type after a name ending at ``i`` end, or -1."""
    m = _ATTDEF_TYPE.match(body, i)
    if m is None:
        return -1
    if body[m.end() - 1] != 0x28:  # '(': an enumeration, up to the next ')'
        return m.end()
    close = close_paren(m.end())
    return close + 1 if close < len(body) else -1


def _default_end(body: bytes, i: int) -> int:
    """Where the white space and default value starting at ``i`` end, or -1."""
    m = _ATTDEF_DEFAULT.match(body, i)
    if m is None:
        return -1
    if m.group(1) is None:
        return m.end()
    closing = body.find(m.group(1), m.end())
    return closing + 1 if closing >= 0 else -1
