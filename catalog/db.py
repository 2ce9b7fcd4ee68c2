"""Opening a database: SQLite (a file, or in memory when no URL is given) or PostgreSQL by URL
(``postgresql+psycopg://user@host:port/db``), with the catalog's tables created if missing."""

from __future__ import annotations

from sqlalchemy import MetaData, create_engine, event
from sqlalchemy.engine import Engine
from sqlalchemy.pool import StaticPool

from catalog import defaults


def open_database(url: str | None, metadata: MetaData) -> Engine:
    """An engine on ``url`` (``None``: a private in-memory SQLite) with ``metadata``'s tables.

    >>> from sqlalchemy import MetaData, Table, Column, Integer, inspect
    >>> md = MetaData(); _ = Table("t", md, Column("x", Integer))
    >>> inspect(open_database(None, md)).get_table_names()
    ['t']
    """
    url = url or defaults.DATABASE_URL
    if url in ("sqlite://", "sqlite:///:memory:"):
        # One connection for the object's life: every new connection to :memory: is a new, empty database.
        engine = create_engine(url, poolclass=StaticPool, connect_args={"check_same_thread": False},
                               enable_from_linting=False)
    else:
        # Local queries join their variables inside EXISTS clauses, which the linter takes for
        # cartesian products.
        engine = create_engine(url, enable_from_linting=False)
    if engine.dialect.name == "sqlite":
        @event.listens_for(engine, "connect")
        def _pragmas(dbapi_con, _record) -> None:
            # A file database: the write-ahead log lets readers go on while a batch is filtered.
            cur = dbapi_con.cursor()
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA synchronous=NORMAL")
            cur.close()
    metadata.create_all(engine)
    return engine
