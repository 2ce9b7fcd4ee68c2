"""PySpark's Python worker daemon, minus a fixed cost of ~0.1-1 s on every task.

Before each task PySpark's worker calls ``importlib.invalidate_caches()``
(``pyspark.worker_util.setup_spark_files``), and on Python 3.11 every zip importer on
``sys.path`` then re-reads its archive's whole directory: ``pyspark.zip`` alone has about
1,300 entries, parsed in pure Python (frozen ``zipimport``). Measured in a worker here:
100-180 ms per task on an idle machine, about a second when the two cores are busy,
while a broker's Python step itself takes well under a millisecond for a few rows.
Spark runs this module instead of ``pyspark.daemon`` (``spark.python.daemon.module``,
set in :mod:`broker.spark.session`): it makes a zip importer re-read its directory only
when the archive changed on disk (size or modification time; Python 3.13's zipimport
does the same check), then hands over to PySpark's own daemon.

>>> import zipimport
>>> zipimport.zipimporter.invalidate_caches is invalidate_caches
True
"""

from __future__ import annotations

import os
import zipimport

_reread = zipimport.zipimporter.invalidate_caches
_stamps: dict[str, tuple[int, int] | None] = {}


def invalidate_caches(self: zipimport.zipimporter) -> None:
    """Re-read the archive's directory only if the file changed since the last read."""
    try:
        st = os.stat(self.archive)
        stamp = (st.st_mtime_ns, st.st_size)
    except OSError:
        stamp = None
    if stamp is not None and _stamps.get(self.archive) == stamp:
        return
    _reread(self)
    _stamps[self.archive] = stamp


zipimport.zipimporter.invalidate_caches = invalidate_caches

if __name__ == "__main__":
    from pyspark import daemon

    daemon.manager()
