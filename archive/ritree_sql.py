"""The RI-tree's indexes as SQL tables through SQLAlchemy, as the structure was designed
for (thesis section 3.2.2: it runs on any relational DBMS's B-trees): SQLite by default,
PostgreSQL by URL. Each index is a table whose primary key is the composite index
``(node, bound, id)``; a query is one statement, a union of index range scans.

>>> b = SqlBackend("sqlite://", "t")
>>> b.add(8, 3, 14, b"sx")
>>> b.query([4], [12, 10], 5, 9), b.query([], [], 15, 20)
({b'sx'}, set())
"""

from __future__ import annotations

from sqlalchemy import (BigInteger, Column, LargeBinary, MetaData, String, Table, bindparam,
                        create_engine, delete, func, insert, select, union, update)
from sqlalchemy.exc import IntegrityError

from archive.errors import KeyStateError


class SqlBackend:
    """Tables ``<prefix>_lower``, ``<prefix>_upper``, ``<prefix>_open``, ``<prefix>_meta``."""

    def __init__(self, url: str, prefix: str) -> None:
        self.engine = create_engine(url)
        md = MetaData()
        self.lower = Table(f"{prefix}_lower", md, Column("node", BigInteger, primary_key=True),
                           Column("bound", BigInteger, primary_key=True),
                           Column("id", LargeBinary(255), primary_key=True))
        self.upper = Table(f"{prefix}_upper", md, Column("node", BigInteger, primary_key=True),
                           Column("bound", BigInteger, primary_key=True),
                           Column("id", LargeBinary(255), primary_key=True))
        self.open = Table(f"{prefix}_open", md, Column("bound", BigInteger, primary_key=True),
                          Column("id", LargeBinary(255), primary_key=True))
        self.meta = Table(f"{prefix}_meta", md, Column("name", String(32), primary_key=True),
                          Column("value", BigInteger))
        md.create_all(self.engine)
        with self.engine.begin() as con:
            if con.execute(select(self.meta.c.value).where(self.meta.c.name == "max_upper")).first() is None:
                con.execute(insert(self.meta).values(name="max_upper", value=1))
        self.statements = 0
        left = bindparam("left", expanding=True)
        right = bindparam("right", expanding=True)
        ql, qu = bindparam("ql"), bindparam("qu")
        self._query = union(
            select(self.upper.c.id).where(self.upper.c.node.in_(left), self.upper.c.bound >= ql),
            select(self.lower.c.id).where(self.lower.c.node.in_(right), self.lower.c.bound <= qu),
            select(self.lower.c.id).where(self.lower.c.node.between(ql, qu)))

    def max_upper(self) -> int:
        with self.engine.connect() as con:
            return con.execute(select(self.meta.c.value).where(self.meta.c.name == "max_upper")).scalar_one()

    def add(self, node: int, lower: int, upper: int, raw: bytes) -> None:
        try:
            with self.engine.begin() as con:
                con.execute(insert(self.lower).values(node=node, bound=lower, id=raw))
                con.execute(insert(self.upper).values(node=node, bound=upper, id=raw))
                con.execute(update(self.meta).where(self.meta.c.name == "max_upper")
                            .values(value=func.max(self.meta.c.value, upper)
                                    if self.engine.dialect.name == "sqlite"
                                    else func.greatest(self.meta.c.value, upper)))
        except IntegrityError:
            raise KeyStateError(f"interval [{lower - 1}, {upper}) of this id is already stored") from None

    def remove(self, node: int, lower: int, upper: int, raw: bytes) -> None:
        with self.engine.begin() as con:   # both rows or neither: a failure rolls back
            gone = con.execute(delete(self.lower).where(self.lower.c.node == node, self.lower.c.bound == lower,
                                                        self.lower.c.id == raw)).rowcount
            gone += con.execute(delete(self.upper).where(self.upper.c.node == node, self.upper.c.bound == upper,
                                                         self.upper.c.id == raw)).rowcount
            if gone != 2:
                raise KeyStateError(f"interval [{lower - 1}, {upper}) is not stored")

    def open_add(self, lo: int, raw: bytes) -> None:
        try:
            with self.engine.begin() as con:
                con.execute(insert(self.open).values(bound=lo, id=raw))
        except IntegrityError:
            raise KeyStateError(f"open interval [{lo}, ...) of this id is already stored") from None

    def open_remove(self, lo: int, raw: bytes) -> None:
        with self.engine.begin() as con:
            if not con.execute(delete(self.open).where(self.open.c.bound == lo, self.open.c.id == raw)).rowcount:
                raise KeyStateError(f"open interval [{lo}, ...) is not stored")

    def query(self, left: list[int], right: list[int], ql: int, qu: int) -> set[bytes]:
        with self.engine.connect() as con:
            self.statements += 1
            return {r[0] for r in con.execute(self._query, {"left": left, "right": right, "ql": ql, "qu": qu})}

    def open_before(self, hi: int | None) -> set[bytes]:
        q = select(self.open.c.id)
        if hi is not None:
            q = q.where(self.open.c.bound < hi)
        with self.engine.connect() as con:
            return {r[0] for r in con.execute(q)}

    def check(self) -> int:
        """Every lower row has its upper row at the same fork (the fork is recomputed)."""
        from archive.ritree import fork

        with self.engine.connect() as con:
            lows = con.execute(select(self.lower.c.node, self.lower.c.bound, self.lower.c.id)).all()
            ups: dict = {}
            for node, bound, raw in con.execute(select(self.upper.c.node, self.upper.c.bound, self.upper.c.id)):
                ups.setdefault((node, raw), []).append(bound)
        for node, lower, raw in lows:
            assert any(fork(lower, u) == node for u in ups.get((node, raw), [])), \
                f"interval from {lower - 1} is not registered at its fork {node}"
        assert len(lows) == sum(len(v) for v in ups.values()), "the lower and upper tables differ"
        return len(lows)

    def stats(self) -> dict:
        return {"statements": self.statements}

    def reset_counters(self) -> None:
        self.statements = 0

    def close(self) -> None:
        self.engine.dispose()
