"""The archive writer holds a partition's lock for one chunk of records at a time
(``archive.defaults.WRITER_CHUNK``), flushing each, so that readers get in between the
chunks of a long batch (a backlog); what it archives does not depend on the chunk."""

from __future__ import annotations

from archive import writer
from archive.directory import Archive
from archive.writer import archive_rows
from yfilter.generators import DocGenerator, Schema


def _rows(n):
    gen = DocGenerator(Schema.nitf(), doc_depth=5, max_repeats=2, seed=12)
    return [{"topic": "onyx.src.news", "partition": 0, "offset": o, "ts_ms": 1000 + 10 * o, "key": None,
             "value": gen.generate(), "headers": []} for o in range(n)]


def _contents(root):
    a = Archive(root)
    try:
        part = a.partitions("news")[0]
        return [(part.record(t).message_id, part.data(t)) for t in part.window(0, 10**9)]
    finally:
        a.close()


def test_a_long_batch_takes_the_lock_once_per_chunk_and_archives_the_same(tmp_path, monkeypatch):
    rows = _rows(23)
    holds = []
    real = writer.locked

    def counted(where, **kw):
        holds.append(where)
        return real(where, **kw)

    monkeypatch.setattr(writer, "locked", counted)
    assert archive_rows(tmp_path / "chunked", rows, chunk=5) == {("news", 0): 23}
    assert len(holds) == 5                  # 5 + 5 + 5 + 5 + 3
    assert archive_rows(tmp_path / "whole", rows, chunk=1000) == {("news", 0): 23}
    assert len(holds) == 6
    assert _contents(tmp_path / "chunked") == _contents(tmp_path / "whole")
    assert len(_contents(tmp_path / "whole")) == 23
