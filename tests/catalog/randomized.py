"""Random schemas, documents and rules of every kind for the catalog's differential tests."""

from __future__ import annotations

import random
from dataclasses import dataclass

from catalog.values import quote

RDF = "http://www.w3.org/1999/02/22-rdf-syntax-ns#"
NS = "urn:onyx:random#"
CLASSES = ["Alpha", "Beta", "Bravo"]          # two initials alike: canonical variable names must cope
STRINGS = ["x", "xy", "yx", "5", "05", "a b"]
NUMBERS = ["0", "1", "2", "2.0", "3", "-1"]


@dataclass
class Prop:
    name: str
    domain: str | None
    range: str | None          # class name: a reference
    strong: bool
    set_valued: bool


def random_schema(rnd: random.Random) -> list[Prop]:
    props = []
    for cls in CLASSES:
        low = cls.lower()
        props.append(Prop(f"{low}N", cls, None, False, False))
        props.append(Prop(f"{low}S", cls, None, False, rnd.random() < 0.3))
    props.append(Prop("label", None, None, False, False))   # no domain: any class has it
    for i in range(4):
        src, dst = rnd.choice(CLASSES), rnd.choice(CLASSES)
        props.append(Prop(f"ref{i}", src, dst, rnd.random() < 0.6, rnd.random() < 0.3))
    return props


def schema_xml(props: list[Prop]) -> str:
    body = "".join(f'<rdfs:Class rdf:ID="{c}"/>' for c in CLASSES)
    for p in props:
        body += f'<rdf:Property rdf:ID="{p.name}">'
        if p.domain:
            body += f'<rdfs:domain rdf:resource="#{p.domain}"/>'
        if p.range:
            body += (f'<rdfs:range rdf:resource="#{p.range}"/>'
                     f'<mdv:reference>{"strong" if p.strong else "weak"}</mdv:reference>')
        if p.set_valued:
            body += "<mdv:setValued>true</mdv:setValued>"
        body += "</rdf:Property>"
    return (f'<rdf:RDF xmlns:rdf="{RDF}" xmlns:rdfs="http://www.w3.org/2000/01/rdf-schema#" '
            f'xmlns:mdv="urn:onyx:mdv#" xml:base="urn:onyx:random">{body}</rdf:RDF>')


class World:
    """Documents ``d0..d{docs-1}`` with resources ``r0..r2`` each, referring to each other."""

    def __init__(self, rnd: random.Random, props: list[Prop], docs: int = 6) -> None:
        self.rnd, self.props, self.docs = rnd, props, docs
        self.uris = [f"d{d}.rdf#r{r}" for d in range(docs) for r in range(3)]

    def props_of(self, cls: str) -> list[Prop]:
        return [p for p in self.props if p.domain in (cls, None)]

    def document(self, doc: int) -> str:
        rnd = self.rnd
        body = ""
        for r in rnd.sample(range(3), rnd.randint(1, 3)):
            cls = rnd.choice(CLASSES)
            inner = ""
            for p in self.props_of(cls):
                if rnd.random() < 0.35:
                    continue
                for _ in range(rnd.randint(1, 3) if p.set_valued else 1):
                    if p.range:
                        inner += f'<{p.name} rdf:resource="{self._ref(doc)}"/>'
                    else:
                        value = rnd.choice(NUMBERS if p.name.endswith("N") and rnd.random() < 0.8 else STRINGS)
                        inner += f"<{p.name}>{value}</{p.name}>"
            body += f'<{cls} rdf:ID="r{r}">{inner}</{cls}>'
        return f'<rdf:RDF xmlns:rdf="{RDF}" xmlns="{NS}">{body}</rdf:RDF>'

    def _ref(self, doc: int) -> str:
        target = self.rnd.choice(self.uris)
        return target if not target.startswith(f"d{doc}.rdf#") else "#" + target.split("#")[1]


class Rules:
    """Random rule texts of every kind over a schema."""

    def __init__(self, rnd: random.Random, world: World) -> None:
        self.rnd, self.world = rnd, world

    def _const(self, prop: Prop, op: str) -> str:
        rnd = self.rnd
        if op in ("<", "<=", ">", ">="):
            return rnd.choice(NUMBERS)
        if op == "contains":
            return quote(rnd.choice(["x", "y", "5", " "]))
        if rnd.random() < 0.5 and prop.name.endswith("N"):
            return rnd.choice(NUMBERS)
        return quote(rnd.choice(STRINGS + NUMBERS))

    def _step(self, p: Prop) -> str:
        return p.name + ("?" if p.set_valued else "")

    def selection(self, var: str, cls: str, depth: int = 0) -> str:
        rnd = self.rnd
        props = self.world.props_of(cls)
        kind = rnd.random()
        if kind < 0.1:
            return f"{var} {rnd.choice(['=', '!='])} {quote(rnd.choice(self.world.uris))}"
        refs = [p for p in props if p.range]
        if kind < 0.35 and refs and depth < 2:
            p = rnd.choice(refs)
            if rnd.random() < 0.3:
                return f"{var}.{self._step(p)} = {quote(rnd.choice(self.world.uris))}"
            return self.selection(f"{var}.{self._step(p)}", p.range, depth + 1)
        p = rnd.choice([p for p in props if not p.range])
        op = rnd.choice(["=", "!=", "<", "<=", ">", ">=", "contains"])
        return f"{var}.{self._step(p)} {op} {self._const(p, op)}"

    def rule(self, subs: dict[int, str], types: dict[int, str]) -> str:
        rnd = self.rnd
        kind = rnd.random()
        if kind < 0.12 and subs:
            n = rnd.choice(sorted(subs))
            preds = [self.selection("r", types[n]) for _ in range(rnd.randint(0, 1))]
            return f"search rule({n}) r register r" + (f" where {preds[0]}" if preds else "")
        cls = rnd.choice(CLASSES)
        if kind < 0.35:
            # a join between two variables: by a reference, or by two literals
            other = rnd.choice(CLASSES)
            refs = [p for p in self.world.props_of(cls) if p.range == other]
            if refs and rnd.random() < 0.6:
                link = f"c.{self._step(rnd.choice(refs))} = d"
            else:
                a = rnd.choice([p for p in self.world.props_of(cls) if not p.range])
                b = rnd.choice([p for p in self.world.props_of(other) if not p.range])
                link = f"c.{self._step(a)} {rnd.choice(['=', '!=', '<', '>=', 'contains'])} d.{self._step(b)}"
            preds = [link] + [self.selection("d", other) for _ in range(rnd.randint(0, 1))]
            if rnd.random() < 0.5:
                preds.append(self.selection("c", cls))
            return f"search {cls} c, {other} d register c where " + " and ".join(preds)
        preds = [self.selection("c", cls) for _ in range(rnd.randint(0, 3))]
        if len(preds) >= 2 and rnd.random() < 0.3:
            where = f"({preds[0]} or {preds[1]})" + "".join(f" and {p}" for p in preds[2:])
        else:
            where = " and ".join(preds)
        return f"search {cls} c register c" + (f" where {where}" if where else "")
