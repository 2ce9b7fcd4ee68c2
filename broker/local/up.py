"""``onyx up`` / ``onyx status`` / ``onyx down``: a whole overlay on this machine.

``up`` starts a :class:`~broker.local.cluster.LocalOverlay` (Kafka, the registration
service, every broker as a streaming query of one Spark application) and keeps it
running until Ctrl-C or ``onyx down``. While it runs it keeps two files in the run
folder: :data:`CLUSTER_FILE` (``.run/cluster.json``: where Kafka and the API are, the
source topics, its pid), for scripts and other Kafka clients, and
:data:`STATUS_FILE` (per broker: lag, messages in and out, profiles, routing-table
size, refreshed every couple of seconds), which ``onyx status`` prints.
``up --detach`` runs the same in a background process (log in :data:`LOG_FILE`) and
returns once everything is ready.

Closed by default: the registration service's operator surfaces need a token. ``up`` takes
ONYX_ADMIN_TOKEN when it is set, else the one it generated on an earlier run and kept in
:data:`~broker.config.ADMIN_TOKEN_FILE` (mode 0600), else a new one it keeps there and prints
once (:func:`admin_token`); the ``onyx`` commands send it to this overlay's API
(:func:`broker.clients.operator_token`). It is never written into ``cluster.json``.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Callable

from broker import config
from broker.clients import ApiError, api
from broker.errors import SetupError
from broker.local.cluster import LocalOverlay, OverlaySettings
from broker.local.secret_files import kept_secret
from broker.query_client import cache_line
from routing.overlay import Overlay

CLUSTER_FILE = config.CLUSTER_FILE
STATUS_FILE = config.RUN_DIR / "status.json"
LOG_FILE = config.RUN_DIR / "onyx-up.log"
STATUS_EVERY_S = 2.0

Say = Callable[[str], None]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _write_json(path: Path, data: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=2))
    tmp.replace(path)


def running_cluster() -> dict | None:
    """The ``cluster.json`` of the overlay running now, or ``None`` (a file left by a
    process that died is removed)."""
    try:
        info = json.loads(CLUSTER_FILE.read_text())
    except (FileNotFoundError, ValueError):
        return None
    if not _alive(int(info.get("pid", -1))):
        CLUSTER_FILE.unlink(missing_ok=True)
        STATUS_FILE.unlink(missing_ok=True)
        return None
    return info


def require_cluster() -> dict:
    """``cluster.json`` of the running overlay, or :class:`SetupError` saying how to start one."""
    info = running_cluster()
    if info is None:
        raise SetupError("no local overlay is running: start one with `onyx up --detach` "
                         "(or pass --bootstrap-servers / --api)")
    return info


def admin_token(say: Say) -> str:
    """The operator token of the overlay ``onyx up`` runs: ONYX_ADMIN_TOKEN, else the one kept in
    :data:`~broker.config.ADMIN_TOKEN_FILE` (made there now, and printed, the first time)."""
    if config.ADMIN_TOKEN:
        say("  operator token: ONYX_ADMIN_TOKEN's")
        return config.ADMIN_TOKEN
    token, made = kept_secret(config.ADMIN_TOKEN_FILE)
    if made:
        say(f"  operator token (shown once; kept in {config.ADMIN_TOKEN_FILE}, mode 0600; the onyx commands "
            f"send it): {token}")
    else:
        say(f"  operator token: in {config.ADMIN_TOKEN_FILE} (the onyx commands send it)")
    return token


def up(overlay: Overlay, settings: OverlaySettings, say: Say) -> int:
    """Run the overlay in this process until SIGINT/SIGTERM; 0 on a clean stop."""
    other = running_cluster()
    if other is not None:
        raise SetupError(f"an overlay is already running (pid {other['pid']}, API {other['api_url']}): "
                         "`onyx down` stops it")
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    cluster = LocalOverlay(overlay, replace(settings, admin_token=admin_token(say)))
    try:
        cluster.start(progress=lambda msg: say(f"  {msg} ..."))
        _write_json(STATUS_FILE, {"time": time.time(), **cluster.status()})
        cluster.write_cluster_json(CLUSTER_FILE, pid=os.getpid(), log=str(LOG_FILE))
        info = cluster.cluster_info()
        say(f"Onyx overlay {overlay.name!r} is up: {len(overlay.brokers)} brokers "
            f"({', '.join(overlay.brokers)})")
        say(f"  kafka     {info['bootstrap_servers']}"
            + (f"  (SASL {config.KAFKA_SASL_MECHANISM} and ACLs)" if info["secure"] else ""))
        if info["secure"]:
            say(f"  users     the overlay's Kafka users' passwords in {info['kafka_users_file']} (mode 0600); "
                "`onyx kafka-user add` makes a publisher's or a subscriber's")
        say(f"  api       {info['api_url']}  (OpenAPI at /openapi.json)")
        say(f"  console   {info['api_url']}/console  (Prometheus metrics at /metrics; the operator token)")
        if info["archive_dir"]:
            say(f"  archive   {info['archive_dir']}  (time travel: `onyx replay`, `onyx archive`)")
        for source, topic in info["sources"].items():
            say(f"  source    {source}: publish to {topic}")
        say(f"  details in {CLUSTER_FILE}; `onyx status` shows the brokers; Ctrl-C or `onyx down` stops")
        trouble = None
        while not stop.wait(STATUS_EVERY_S):
            try:
                for why in cluster.revive():
                    say(f"{why}: started it again from its checkpoint")
                _write_json(STATUS_FILE, {"time": time.time(), **cluster.status()})
                if trouble is not None:
                    say("Kafka answers again")
                trouble = None
            except Exception as exc:  # Kafka away, say: the brokers wait; tried again at the next tick
                if trouble is None:
                    say(f"cannot reach Kafka or restart the brokers ({str(exc).splitlines()[0][:200]}): "
                        "trying again every few seconds")
                trouble = exc
    finally:
        say("stopping the overlay ...")
        CLUSTER_FILE.unlink(missing_ok=True)
        STATUS_FILE.unlink(missing_ok=True)
        cluster.stop()
    say("stopped")
    return 0


def up_detached(argv: list[str], say: Say, timeout: float = 300.0) -> int:
    """Start ``onyx up <argv>`` in the background and return once it is ready."""
    other = running_cluster()
    if other is not None:
        raise SetupError(f"an overlay is already running (pid {other['pid']}, API {other['api_url']}): "
                         "`onyx down` stops it")
    LOG_FILE.parent.mkdir(parents=True, exist_ok=True)
    with open(LOG_FILE, "wb") as log:
        proc = subprocess.Popen([sys.executable, "-m", "broker.cli", "up", *argv], stdout=log,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
    say(f"starting the overlay in the background (pid {proc.pid}, log {LOG_FILE}) ...")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        info = running_cluster()
        if info is not None and info.get("pid") == proc.pid:
            say(f"ready: kafka {info['bootstrap_servers']}, api {info['api_url']}, "
                f"source topic {info['source_topic']}; details in {CLUSTER_FILE}")
            return 0
        if proc.poll() is not None:
            tail = "\n".join(LOG_FILE.read_text(errors="replace").splitlines()[-15:])
            raise SetupError(f"the overlay exited with code {proc.returncode} while starting:\n{tail}")
        time.sleep(0.5)
    proc.terminate()
    raise SetupError(f"the overlay was not ready within {timeout:.0f}s; see {LOG_FILE}")


def down(say: Say, timeout: float = 120.0) -> int:
    """Stop the overlay started by ``onyx up`` (SIGTERM, SIGKILL after ``timeout``)."""
    info = running_cluster()
    if info is None:
        say("no local overlay is running")
        return 0
    pid = int(info["pid"])
    say(f"stopping the overlay (pid {pid}) ...")
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.3)
    if _alive(pid):
        say(f"still running after {timeout:.0f}s: killing it")
        os.kill(pid, signal.SIGKILL)
    CLUSTER_FILE.unlink(missing_ok=True)
    STATUS_FILE.unlink(missing_ok=True)
    say("stopped")
    return 0


def reset(overlay: Overlay, settings: OverlaySettings, say: Say, yes: bool,
          ask: Callable[[str], str] | None) -> int:
    """``onyx reset``: delete what ``onyx up`` keeps between runs (its sources, profiles,
    Kafka topics and the brokers' state), after asking (``ask``; ``None``: no terminal
    to ask on, so ``yes`` is needed). Refused while the overlay runs. 0 when wiped (or
    nothing was there), 1 when the answer was no."""
    other = running_cluster()
    if other is not None:
        raise SetupError(f"the overlay is running (pid {other['pid']}): `onyx down` first")
    dirs = [d for d in LocalOverlay(overlay, settings).data_dirs() if d.exists()]
    if not dirs:
        say("nothing to reset: no overlay data under " + str(config.RUN_DIR))
        return 0
    listing = "".join(f"\n  {d}" for d in dirs)
    if not yes:
        if ask is None:
            raise SetupError(f"`onyx reset` deletes every source, profile and message of the local overlay:{listing}"
                             "\nno terminal to ask on: pass --yes to go ahead")
        if ask(f"delete every source, profile and message of the local overlay?{listing}\n[y/N] "
               ).strip().lower() not in ("y", "yes"):
            say("nothing deleted")
            return 1
    for d in dirs:
        shutil.rmtree(d)
    say(f"deleted {len(dirs)} folder(s); the next `onyx up` starts from nothing")
    return 0


def status_table(status: dict) -> str:
    """The per-broker table ``onyx status`` prints: ``projected`` counts messages sent
    down a link transformed (incremental transformation, :mod:`routing.incremental`), ``false+`` messages the
    parent's table sent here that matched nothing here or below (its false positives,
    the price of generalized summaries); ``links`` and ``atoms`` are the size of the
    broker's routing tables, ``sent`` the atoms of the summaries it sends its parents
    (:mod:`routing.summary`), and ``budget`` the tables' budget (``-``: exact).

    >>> print(status_table({"time": 0, "brokers": [{"broker": "b1", "running": True, "lag": 0,
    ...     "messages": 5, "forwarded": 3, "delivered": 2, "dead_letters": 0, "profiles": 1,
    ...     "routing": {"b1": {"links": 1, "atoms": 2}}}]}).splitlines()[1])
    b1      yes        0        5         3         0      0         2     0         1      1      2      0 -
    """
    head = (f"{'broker':<7} {'running':<7} {'lag':>4} {'msgs in':>8} {'forwarded':>9} {'projected':>9} "
            f"{'false+':>6} {'delivered':>9} {'dead':>5} {'profiles':>9} {'links':>6} {'atoms':>6} {'sent':>6} budget")
    lines = [head]
    for b in status["brokers"]:
        routing = b.get("routing", {}).values()
        links = sum(r.get("links", 0) for r in routing)
        atoms = sum(r.get("atoms", 0) for r in routing)
        sent = sum(r.get("summary", {}).get("atoms", 0) for r in routing)
        lag = "?" if b.get("lag") is None else b["lag"]
        false_positives = sum(b.get("false_positives", {}).values())
        lines.append(f"{b['broker']:<7} {'yes' if b['running'] else 'NO':<7} {lag:>4} {b['messages']:>8} "
                     f"{b['forwarded']:>9} {b.get('projected', 0):>9} {false_positives:>6} {b['delivered']:>9} "
                     f"{b['dead_letters']:>5} {b['profiles']:>9} {links:>6} {atoms:>6} {sent:>6} {b.get('budget') or '-'}")
    return "\n".join(lines)


def status(say: Say) -> int:
    """Print the status of the running overlay."""
    info = require_cluster()
    try:
        data = json.loads(STATUS_FILE.read_text())
    except (FileNotFoundError, ValueError):
        raise SetupError(f"the overlay (pid {info['pid']}) has not written its status yet; try again") from None
    say(f"overlay at {info['api_url']}, kafka {info['bootstrap_servers']}, "
        f"status of {time.strftime('%H:%M:%S', time.localtime(data['time']))}")
    say(status_table(data))
    archive = data.get("archive")
    if archive is not None:
        say(f"archive writer: {'running (pid ' + str(archive['pid']) + ')' if archive['running'] else 'STOPPED'}; "
            f"archive in {archive['directory']}")
    try:
        say(cache_line(api("GET", f"{info['api_url']}/cache")))
    except ApiError as exc:
        say(f"query cache: unknown ({exc})")
    return 0
