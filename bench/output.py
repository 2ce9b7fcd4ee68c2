"""Where a benchmark's results go: ``bench/results/<name>.json`` and a PNG beside it.

>>> import tempfile
>>> with tempfile.TemporaryDirectory() as d:
...     path = save({"x": 1}, Path(d) / "demo.json", None, lambda res, png: png.write_bytes(b"png"))
...     sorted(p.name for p in Path(d).iterdir())
wrote ... and ...
['demo.json', 'demo.png']
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable


def save(res: dict, json_path: Path, plot_path: Path | None, plot: Callable[[dict, Path], None]) -> Path:
    """Write ``res`` as JSON to ``json_path`` and ``plot`` it to ``plot_path`` (default: the
    JSON path with ``.png``); says where both went."""
    png = plot_path or json_path.with_suffix(".png")
    json_path.parent.mkdir(parents=True, exist_ok=True)
    json_path.write_text(json.dumps(res, indent=1) + "\n")
    plot(res, png)
    print(f"wrote {json_path} and {png}")
    return json_path
