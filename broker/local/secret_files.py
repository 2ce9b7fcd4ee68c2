"""Secrets of the local overlay in files only their owner reads: the operator token, the
passwords of a secure local Kafka's users.

A secret is generated (:func:`new_secret`) and written with mode 0600 from the moment the file
exists (never readable by others, even for an instant), and kept in the run folder so that a
restart finds it again; nothing here ever writes one into ``cluster.json`` or a log.

>>> import tempfile, pathlib
>>> folder = pathlib.Path(tempfile.mkdtemp())
>>> token, made = kept_secret(folder / "token")
>>> made, kept_secret(folder / "token") == (token, False), oct((folder / "token").stat().st_mode & 0o777)
(True, True, '0o600')
"""

from __future__ import annotations

import json
import os
import secrets
from pathlib import Path

from broker import config


def new_secret() -> str:
    """A random password or token: :data:`~broker.config.SECRET_BYTES` bytes, URL-safe text.

    >>> len(new_secret()) >= 43
    True
    """
    return secrets.token_urlsafe(config.SECRET_BYTES)


def write_private(path: Path, text: str) -> None:
    """Write ``text`` to ``path``, readable and writable by its owner only (0600); the folder
    is made if missing. Written to a temporary name and renamed, so a reader never sees half."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.fchmod(fd, 0o600)  # a file left by an earlier run keeps its mode through O_CREAT
        os.write(fd, text.encode())
    finally:
        os.close(fd)
    tmp.replace(path)


def kept_secret(path: Path) -> tuple[str, bool]:
    """The secret kept in ``path``, made and written there (0600) if there is none yet; and
    whether it was made now (so that it is shown once, when it is new)."""
    try:
        text = path.read_text().strip()
    except FileNotFoundError:
        text = ""
    if text:
        return text, False
    text = new_secret()
    write_private(path, text + "\n")
    return text, True


def read_json(path: Path) -> dict:
    """A JSON object written by :func:`write_json` (empty if the file does not exist)."""
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        return {}


def write_json(path: Path, data: dict) -> None:
    """``data`` as JSON in ``path``, mode 0600."""
    write_private(path, json.dumps(data, indent=2, sort_keys=True) + "\n")
