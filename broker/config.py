"""Where Onyx keeps its files and the defaults a user can change, in one place.

Every setting can be overridden by an environment variable (named next to it), so
that ``make run``, the tests and a deployed broker read the same table.
"""

from __future__ import annotations

import os
from pathlib import Path

from cache import defaults as cache_defaults

REPO_ROOT = Path(__file__).resolve().parent.parent


def _path(env: str, default: Path) -> Path:
    value = os.environ.get(env)
    return Path(value).resolve() if value else default


RUN_DIR = _path("ONYX_RUN_DIR", REPO_ROOT / ".run")
"""Scratch space: Kafka data and logs, Spark checkpoints and local dirs (ONYX_RUN_DIR)."""

JVM_LIB_DIR = _path("ONYX_JVM_LIB", REPO_ROOT / "deploy" / "jvm" / "lib")
"""Jars fetched by ``make jvm``: ``kafka/`` (the broker) and ``spark-kafka/`` (the connector)."""

CORPUS_DIR = _path("ONYX_CORPUS", REPO_ROOT.parent / "shared" / "corpus" / "news")
"""Real news-agency XML used by the demo, tests and benchmarks when present (ONYX_CORPUS)."""

KAFKA_HEAP = os.environ.get("ONYX_KAFKA_HEAP", "512m")
"""Maximum heap of the local Kafka broker JVM (ONYX_KAFKA_HEAP)."""

KAFKA_START_TIMEOUT_S = float(os.environ.get("ONYX_KAFKA_START_TIMEOUT", "90"))
"""How long to wait for the local Kafka broker to accept clients (ONYX_KAFKA_START_TIMEOUT)."""

KAFKA_REPLICATION = int(os.environ.get("ONYX_KAFKA_REPLICATION", "3"))
"""Copies of every topic in a local Kafka cluster of several nodes (ONYX_KAFKA_REPLICATION; at
most the number of nodes): ``onyx up --distributed``'s three nodes keep three, as the Helm chart's
cluster does."""

KAFKA_MIN_INSYNC = int(os.environ.get("ONYX_KAFKA_MIN_INSYNC", "2"))
"""``min.insync.replicas`` of such a cluster (ONYX_KAFKA_MIN_INSYNC; at most the replication
factor minus one): with ``acks=all`` a write is acknowledged once this many copies have it, so
one node may be lost without losing a record or refusing a write."""

# -- `onyx up --distributed`: a Kafka cluster and a Spark standalone cluster on loopback ------

DIST_KAFKA_NODES = int(os.environ.get("ONYX_DIST_KAFKA_NODES", "3"))
"""Combined controller+broker KRaft nodes of ``onyx up --distributed`` (ONYX_DIST_KAFKA_NODES)."""

DIST_SPARK_WORKERS = int(os.environ.get("ONYX_DIST_SPARK_WORKERS", "2"))
"""Spark standalone workers of ``onyx up --distributed`` (ONYX_DIST_SPARK_WORKERS)."""

DIST_WORKER_CORES = int(os.environ.get("ONYX_DIST_WORKER_CORES", "8"))
"""Cores each standalone worker offers (ONYX_DIST_WORKER_CORES; SPARK_WORKER_CORES). More than
the machine has: every broker is an application of its own with one executor core, and one
worker must be able to take every application's executor when the other is lost."""

DIST_WORKER_MEMORY = os.environ.get("ONYX_DIST_WORKER_MEMORY", "6g")
"""Memory each standalone worker offers its executors (ONYX_DIST_WORKER_MEMORY; SPARK_WORKER_MEMORY):
enough for every application's executor on one worker."""

DIST_DAEMON_MEMORY = os.environ.get("ONYX_DIST_DAEMON_MEMORY", "512m")
"""Heap of the standalone master and of each worker daemon (ONYX_DIST_DAEMON_MEMORY; SPARK_DAEMON_MEMORY)."""

DIST_EXECUTOR_MEMORY = os.environ.get("ONYX_DIST_EXECUTOR_MEMORY", "512m")
"""Executor memory of each broker application on the standalone cluster (ONYX_DIST_EXECUTOR_MEMORY)."""

DIST_DRIVER_MEMORY = os.environ.get("ONYX_DIST_DRIVER_MEMORY", "512m")
"""Driver memory of each broker application on the standalone cluster (ONYX_DIST_DRIVER_MEMORY)."""

DIST_APP_CORES = int(os.environ.get("ONYX_DIST_APP_CORES", "1"))
"""Executor cores of each broker application (ONYX_DIST_APP_CORES; ``spark.cores.max``)."""

DIST_START_TIMEOUT_S = float(os.environ.get("ONYX_DIST_START_TIMEOUT", "600"))
"""How long to wait for the standalone cluster and every broker application to run
(ONYX_DIST_START_TIMEOUT): six applications starting at once on two cores take minutes."""

DIST_STATUS_EVERY_S = float(os.environ.get("ONYX_DIST_STATUS_EVERY", "1"))
"""How often a broker application started with ``--status-file`` writes its status there
(ONYX_DIST_STATUS_EVERY, seconds): how ``onyx up --distributed`` sees lag and counters."""

SPARK_MASTER = os.environ.get("ONYX_SPARK_MASTER", "local[2]")
"""Spark master for brokers (ONYX_SPARK_MASTER); local with two threads by default."""

SPARK_DRIVER_MEMORY = os.environ.get("ONYX_SPARK_DRIVER_MEMORY", "2g")
"""Driver memory of the local Spark application (ONYX_SPARK_DRIVER_MEMORY)."""

POSTGRES_BIN_DIR = os.environ.get("ONYX_POSTGRES_BIN") or None
"""Folder with PostgreSQL's ``initdb`` and ``postgres`` for the local server of the tests and
benchmarks (ONYX_POSTGRES_BIN); unset: found on PATH, else under ``/usr/lib/postgresql/<n>/bin``
(Debian's package ``postgresql-15``)."""

POSTGRES_OS_USER = os.environ.get("ONYX_POSTGRES_OS_USER", "postgres")
"""Unprivileged system user the local PostgreSQL server runs as when Onyx runs as root, which
PostgreSQL refuses (ONYX_POSTGRES_OS_USER); ``nobody`` if this user does not exist."""

POSTGRES_START_TIMEOUT_S = float(os.environ.get("ONYX_POSTGRES_START_TIMEOUT", "60"))
"""How long to wait for the local PostgreSQL server to accept connections (ONYX_POSTGRES_START_TIMEOUT)."""

DATABASE_URL = os.environ.get("ONYX_DATABASE_URL", f"sqlite:///{RUN_DIR / 'onyx.db'}")
"""Where the registration service keeps sources and profiles (ONYX_DATABASE_URL):
a SQLite file by default, or ``postgresql+psycopg://user:pass@host/db``."""

KAFKA_USERNAME = os.environ.get("ONYX_KAFKA_USERNAME") or None
"""User the Kafka clients authenticate as (ONYX_KAFKA_USERNAME); unset, they do not
authenticate (a local Kafka). In the Helm chart each broker, the registration service and
each publisher or subscriber is a Strimzi ``KafkaUser`` whose ACLs say what it may touch."""

KAFKA_PASSWORD = os.environ.get("ONYX_KAFKA_PASSWORD") or None
"""That user's password (ONYX_KAFKA_PASSWORD), e.g. from the Secret Strimzi writes for a KafkaUser."""

KAFKA_SASL_MECHANISM = os.environ.get("ONYX_KAFKA_SASL_MECHANISM", "SCRAM-SHA-512")
"""SASL mechanism with a username (ONYX_KAFKA_SASL_MECHANISM): SCRAM-SHA-512 or SCRAM-SHA-256."""

KAFKA_SECURITY_PROTOCOL = os.environ.get("ONYX_KAFKA_SECURITY_PROTOCOL", "SASL_PLAINTEXT")
"""Security protocol with a username (ONYX_KAFKA_SECURITY_PROTOCOL): SASL_PLAINTEXT or SASL_SSL."""

DELIVERY_PARTITIONS = int(os.environ.get("ONYX_DELIVERY_PARTITIONS", "1"))
"""Partitions of each delivery topic the registration service creates (ONYX_DELIVERY_PARTITIONS)."""

DELIVERY_PROFILES_HEADER_BYTES = int(os.environ.get("ONYX_DELIVERY_PROFILES_HEADER_BYTES", str(64 * 1024)))
"""Most bytes of the ``onyx-profiles`` header of one delivery record (ONYX_DELIVERY_PROFILES_HEADER_BYTES):
a host broker writes one record per delivery topic and message for all the filters there that match
it, listing their ids in that header; more ids than fit are split over several records (each with
the message). 64 KB holds about 3,800 service-made ids (16 hex digits and a comma): few records even
when 100,000 profiles match, while a record with its header stays far below Kafka's default limit of
1 MB per record and a reader that splits the header for each record (the event streams, webhooks)
never parses more than 64 KB of it."""

API_HOST = os.environ.get("ONYX_API_HOST", "127.0.0.1")
"""Address the registration service binds to (ONYX_API_HOST); loopback by default."""

API_PORT = int(os.environ.get("ONYX_API_PORT", "8080"))
"""Port of the registration service (ONYX_API_PORT)."""

ADMIN_TOKEN = os.environ.get("ONYX_ADMIN_TOKEN") or None
"""Token for the registration service's operator endpoints (``POST /rebalance``), sent as
``X-Onyx-Admin-Token`` (ONYX_ADMIN_TOKEN); unset, those endpoints are disabled."""

DELIVERY_TOPIC_PREFIXES = tuple(p.strip() for p in os.environ.get("ONYX_DELIVERY_TOPIC_PREFIXES", "").split(",")
                                if p.strip())
"""Prefixes of Kafka topics subscribers may name as delivery topics besides their own namespace
``onyx.deliver.<subscriber id>[.<name>]`` (ONYX_DELIVERY_TOPIC_PREFIXES, comma-separated; the Helm
chart's ``security.deliveryTopicPrefixes``). Empty by default: a subscriber writes only into its
own namespace, so no request can make the overlay write into a topic someone else reads."""

ANONYMOUS_MAX_BATCH = int(os.environ.get("ONYX_ANONYMOUS_MAX_BATCH", "100"))
"""Profiles one ``POST /profiles:batch`` without a subscriber token may carry (ONYX_ANONYMOUS_MAX_BATCH;
with a token: 10,000). A client loading many profiles registers its subscriber first
(``POST /subscribers``, as ``onyx subscribe --file`` does) and sends its token."""

ANONYMOUS_MAX_CHARS = int(os.environ.get("ONYX_ANONYMOUS_MAX_CHARS", "100000"))
"""Characters of profile text (over all items of a batch) and of a source's schema a request
without a token may send (ONYX_ANONYMOUS_MAX_CHARS; with a token: 2,000,000 per batch, 1,000,000
per schema). Parsing costs about 6 us of CPU a character: an anonymous request costs at most
about 0.6 s."""

ANONYMOUS_RATE = float(os.environ.get("ONYX_ANONYMOUS_RATE", "20"))
"""Registrations per second all requests without a token share (ONYX_ANONYMOUS_RATE: profiles,
subscribers, sources; 0: no limit), in bursts of ONYX_ANONYMOUS_BURST. Each creates a subscriber
or a publisher: a client that registers more sends the token its first registration returned."""

ANONYMOUS_BURST = int(os.environ.get("ONYX_ANONYMOUS_BURST", "200"))
"""Burst of ONYX_ANONYMOUS_RATE (ONYX_ANONYMOUS_BURST)."""

SOURCE_RATE = float(os.environ.get("ONYX_SOURCE_RATE", "1"))
"""Sources one publisher (or all anonymous callers together) may register per second
(ONYX_SOURCE_RATE, in bursts of ONYX_SOURCE_BURST; 0: no limit): each source is a Kafka topic, a
catalog record, metadata documents and a broadcast tree at every broker."""

SOURCE_BURST = int(os.environ.get("ONYX_SOURCE_BURST", "20"))
"""Burst of ONYX_SOURCE_RATE (ONYX_SOURCE_BURST)."""

REGISTRATION_RATE = float(os.environ.get("ONYX_REGISTRATION_RATE", "10000"))
"""Profiles one subscriber may register, update or delete per second through the
registration service, on average (ONYX_REGISTRATION_RATE; 0: no limit). Past it (and
the burst) a request is refused with 429 and ``Retry-After``. The default is above what
one subscriber reaches on a 2-core machine (about 9,000/s in batches of 10,000), so it
never slows ``onyx subscribe --file`` or the benchmarks there; a service shared by many
subscribers sets it lower."""

REGISTRATION_BURST = int(os.environ.get("ONYX_REGISTRATION_BURST", "100000"))
"""How many profiles a subscriber may register, update or delete at once above
ONYX_REGISTRATION_RATE (ONYX_REGISTRATION_BURST): the size of its token bucket. At least
a batch of 10,000 (one request of ``POST /profiles:batch``); the default lets a client
load 100,000 profiles as fast as the service takes them."""

PLACEMENT = os.environ.get("ONYX_PLACEMENT", "nearest")
"""How a profile's host broker is chosen (ONYX_PLACEMENT), a strategy of :mod:`routing.placement`:
``nearest`` (the subscriber's hint, else round robin), ``round-robin``, ``random``, or ``pep`` (PEP
partitioning by exclusiveness patterns)."""

PEP_PARTITIONS_PER_BROKER = int(os.environ.get("ONYX_PEP_PARTITIONS_PER_BROKER", "4"))
"""PEP partitions per broker (ONYX_PEP_PARTITIONS_PER_BROKER) for the ``pep`` placement."""

PEP_TOLERANCE = float(os.environ.get("ONYX_PEP_TOLERANCE", "0.1"))
"""PEP balance tolerance (ONYX_PEP_TOLERANCE): no partition holds more than
max((1 + t) * mean, mean + 1 / t) profiles."""

# -- the broker job (tuned by bench/overlay.py on a 2-core machine; see the README) --------

BROKER_TRIGGER = os.environ.get("ONYX_BROKER_TRIGGER", "0 seconds")
"""Micro-batch interval of the broker query (ONYX_BROKER_TRIGGER): ``0 seconds`` starts the
next batch as soon as one ends, which a message crossing three links needs (four batches
back to back, publish to delivery); a longer interval trades latency for fewer batches."""

BROKER_POLL_MS = int(os.environ.get("ONYX_BROKER_POLL_MS", "50"))
"""How long the broker query waits before it asks Kafka again when a micro-batch found no
new records (ONYX_BROKER_POLL_MS; Spark's ``spark.sql.streaming.pollingDelay``, 10 ms by
default). Each ask costs the JVM and Kafka about 2 ms of CPU: at 10 ms an idle overlay
kept a third of a core busy, at 50 ms a quarter; a message arriving at an idle overlay
waits for it once (25 ms on average), later hops do not wait."""

BROKER_TASKS = int(os.environ.get("ONYX_BROKER_TASKS", "2"))
"""Python tasks per micro-batch (ONYX_BROKER_TASKS): the inbound topic partitions of all
brokers of one Spark application are coalesced into this many; 2 keeps both cores of a
``local[2]`` application busy without a second wave of tasks."""

BROKER_MAX_OFFSETS = int(os.environ.get("ONYX_BROKER_MAX_OFFSETS", "20000"))
"""At most this many records per micro-batch over all topics (ONYX_BROKER_MAX_OFFSETS),
so one batch after a backlog does not hold up the others for long."""

BROKER_FETCH_WAIT_MS = int(os.environ.get("ONYX_BROKER_FETCH_WAIT_MS", "0"))
"""``fetch.max.wait.ms`` of the executors' Kafka consumers (ONYX_BROKER_FETCH_WAIT_MS). A
task's records are known to be there, but a fetch the consumer left waiting at the end of
a partition delays the next task's first records by up to this long (Kafka's default,
500 ms: 2.4 s p50 over three hops instead of 0.7 s in a forwarding query; 50 ms: tasks
waited 70-240 ms for their first records, 0: 0-40 ms)."""

BROKER_LINGER_MS = float(os.environ.get("ONYX_BROKER_LINGER_MS", "2"))
"""``linger.ms`` of the brokers' Kafka producer (ONYX_BROKER_LINGER_MS): how long output
waits to be batched; every task flushes at its end anyway."""

BROKER_COMPRESSION = os.environ.get("ONYX_BROKER_COMPRESSION", "zstd")
"""Compression of what brokers write (ONYX_BROKER_COMPRESSION: none, gzip, snappy, lz4,
zstd): deliveries of one message to many profiles are copies of it, which the
producer's batches shrink to a fraction. zstd, because every Kafka client since Kafka
2.1 reads it, kafka-python included with the ``zstandard`` package Onyx already needs
(lz4 would need one more)."""

BROKER_PROJECTION = os.environ.get("ONYX_BROKER_PROJECTION", "on") != "off"
"""Whether a link below which no profile needs the whole message carries what the link's
transformation query makes of it (ONYX_BROKER_PROJECTION: on, or off): bindings no
profile below can match dropped, the rest projected, shared first steps run (ONYX 4.2.2),
see :mod:`routing.incremental`."""

LINK_BANDWIDTH = float(os.environ.get("ONYX_LINK_BANDWIDTH", "100e6"))
"""Bits per second of a link between brokers, as the cost model of incremental
transformation sees it (ONYX_LINK_BANDWIDTH; :class:`routing.node.LinkCost`): a link runs
its transformation query on a message only when the bytes it leaves out take longer on the
link (8 / bandwidth s each) and downstream (25 ns each, measured: ``Node.cpu_per_byte``) than the
transformation takes. The default, 100 Mbit/s, is a wide-area link's share (the paper's
PlanetLab links were slower): a byte costs 80 ns on it, and ``bench/transform.py`` measured
6 ns of transformation per byte left out on the batched news workload (0.23 ms more in
``forwards`` for 38.5 KB less on the links a message), so links transform; at 10 Gbit/s (0.8 ns a byte, a rack's links) they do only where that pays."""

BROKER_TABLE_BUDGET = os.environ.get("ONYX_TABLE_BUDGET", "atoms=4000,states=12000,predicates=2000") or None
"""How big each routing table of the overlay may be (ONYX_TABLE_BUDGET), as
``atoms=N,states=N,predicates=N`` (any of them; empty: exact tables). Each broker
sends its parent a summary of what is below it generalized to its share of the budget
(ONYX 4.2.1, Figure 6(d); false positives, never a false negative), see
:mod:`routing.summary`, so that the parent's table, the root's included, fits it. A
broker of the overlay config with a ``budget`` of its own uses that instead.
The default: at 100k profiles derived from the news corpus the root's table held
12,440 atoms exact (issue 41); 4,000 keeps every table to a third of that, a few MB,
while a plan for a host's summary of 17k generator profiles takes about 12 s on a
2-core machine (measured in-process; ``bench.overlay`` measures the running overlay)."""

ARCHIVE = os.environ.get("ONYX_ARCHIVE", "1") not in ("0", "false", "no")
"""Whether ``onyx up`` runs the archive writer beside the brokers (ONYX_ARCHIVE; ``--no-archive``
turns it off for one run): every source message and profile change archived, for time travel."""

ARCHIVE_DIR = Path(os.environ["ONYX_ARCHIVE_DIR"]).resolve() if os.environ.get("ONYX_ARCHIVE_DIR") else None
"""The archive the registration service reads for time travel (ONYX_ARCHIVE_DIR); ``onyx up``
sets it to its own ``archive/`` folder; unset for ``onyx serve``, the time-travel operations
answer 503."""

ARCHIVE_TRIGGER = os.environ.get("ONYX_ARCHIVE_TRIGGER", "2 seconds")
"""Micro-batch interval of the archive writer (ONYX_ARCHIVE_TRIGGER): archiving in batches of a
couple of seconds leaves the cores to the brokers."""

ARCHIVE_NICE = int(os.environ.get("ONYX_ARCHIVE_NICE", "10"))
"""How much lower than the brokers' the CPU priority of ``onyx up``'s archive writer is
(ONYX_ARCHIVE_NICE, a ``nice`` increment): the archive may lag, the brokers may not."""

ARCHIVE_DRIVER_MEMORY = os.environ.get("ONYX_ARCHIVE_DRIVER_MEMORY", "1g")
"""Driver memory of ``onyx up``'s archive writer application (ONYX_ARCHIVE_DRIVER_MEMORY)."""

REPLAY_MAX_WINDOW_MS = int(os.environ.get("ONYX_REPLAY_MAX_WINDOW_MS", str(31 * 24 * 3_600_000)))
"""Widest window (``to`` - ``from``) of ``POST /replay`` and ``POST /queries`` (ONYX_REPLAY_MAX_WINDOW_MS,
31 days): a wider one is refused with 422 (ask for it in pieces)."""

REPLAY_MAX_CANDIDATES = int(os.environ.get("ONYX_REPLAY_MAX_CANDIDATES", "50000"))
"""Archived messages one replay verifies at most (ONYX_REPLAY_MAX_CANDIDATES): past them the answer
ends with ``truncated`` and the archive time to go on from. At about 0.1-0.3 ms a message
(``bench.archive``), one request costs seconds of CPU, not minutes."""

REPLAY_MAX_BYTES = int(os.environ.get("ONYX_REPLAY_MAX_BYTES", str(64 * 1024 * 1024)))
"""Bytes of matched messages (and results) one replay or query holds for its client at most
(ONYX_REPLAY_MAX_BYTES): the archive is read into memory, released, then streamed at the client's
pace; past this the answer ends with ``truncated``."""

BACKFILL_TIMEOUT_S = float(os.environ.get("ONYX_BACKFILL_TIMEOUT", "60"))
"""How long a backfill waits for the brokers and the archive writer to reach its seam (ONYX_BACKFILL_TIMEOUT)."""

BACKFILL_LOOKBACK_MS = 10 * 60 * 1000
"""A backfill reads the root brokers' state logs from this long before the profile's version
was registered (or before now, when the archive does not know that time yet)."""

QUERY_CACHE_BYTES = int(os.environ.get("ONYX_QUERY_CACHE_BYTES", str(cache_defaults.CAPACITY_BYTES)))
"""Capacity of the query service's semantic cache of each source (ONYX_QUERY_CACHE_BYTES):
its regions' items and descriptions, replaced LRU past it (``POST /queries``, :mod:`cache`)."""

QUERY_CACHE_MAX_AGE_S = float(os.environ.get("ONYX_QUERY_CACHE_MAX_AGE", str(cache_defaults.MAX_AGE_SECONDS)))
"""A cached region collected longer ago than this is dropped (ONYX_QUERY_CACHE_MAX_AGE, seconds): it
would miss a message retracted since."""

QUERY_CACHE_MAX_IDLE_S = float(os.environ.get("ONYX_QUERY_CACHE_MAX_IDLE", str(cache_defaults.MAX_IDLE_SECONDS)))
"""A cached region not used for longer than this is dropped (ONYX_QUERY_CACHE_MAX_IDLE, seconds)."""

QUERY_WINDOW_MS = int(os.environ.get("ONYX_QUERY_WINDOW_MS", str(3_600_000)))
"""The window of a query that names no start (ONYX_QUERY_WINDOW_MS): this long, ending at its end
(by default the last settled archive time), an hour."""

# -- the metadata catalog (issue 32: MDV) ----------------------------------------------------

METADATA_PACKET_DOCS = int(os.environ.get("ONYX_METADATA_PACKET_DOCS", "500"))
"""Documents' resources per ``catalog`` packet to a broker's repository (a broker's initial load
at 100,000 profiles is some 17,000 documents: many packets, each well under Kafka's 1 MB)."""

METADATA_BATCH_S = float(os.environ.get("ONYX_METADATA_BATCH", "0.5"))
"""Seconds the metadata provider collects profiles' documents before it filters them as one
batch (MDV section 4: batched registration); sources are filtered as they are registered."""

# -- the operator console, push delivery and metrics of the registration service -------------

CONSOLE_EVERY_S = float(os.environ.get("ONYX_CONSOLE_EVERY", "2"))
"""How often the console's event stream (``GET /console/events``) sends the brokers' figures, and
how old the figures ``/metrics`` and the console show may be (ONYX_CONSOLE_EVERY, seconds): the
figures are gathered once per interval however many clients watch."""

CONSOLE_DEAD_LETTERS = int(os.environ.get("ONYX_CONSOLE_DEAD_LETTERS", "50"))
"""How many of the dead-letter topic's last records ``GET /console/dead-letters`` shows
(ONYX_CONSOLE_DEAD_LETTERS)."""

SSE_KEEPALIVE_S = float(os.environ.get("ONYX_SSE_KEEPALIVE", "15"))
"""A delivery stream (``GET /profiles/{id}/deliveries``) with nothing to send sends an SSE comment
this often (ONYX_SSE_KEEPALIVE, seconds), so proxies keep it open and a vanished client is noticed."""

WEBHOOK_ALLOW_PRIVATE = os.environ.get("ONYX_WEBHOOK_ALLOW_PRIVATE", "0") in ("1", "true", "yes")
"""Whether a webhook URL may resolve to a loopback, private, link-local or otherwise non-public
address, an IPv6 form with an IPv4 address inside included (ONYX_WEBHOOK_ALLOW_PRIVATE; see
:mod:`broker.registry.webhook_targets`). Off: such a URL is refused at registration (422) and
checked again at each POST, which connects to the address it checked, so no subscriber can make
the service probe internal hosts. Tests and a single-machine setup turn it on (each POST still
connects to the address it resolved)."""

WEBHOOK_ATTEMPTS = int(os.environ.get("ONYX_WEBHOOK_ATTEMPTS", "5"))
"""POSTs of one delivery to a webhook before it goes to ``onyx.dead-letter`` with the reason
(ONYX_WEBHOOK_ATTEMPTS)."""

WEBHOOK_BACKOFF_S = float(os.environ.get("ONYX_WEBHOOK_BACKOFF", "0.5"))
"""Wait before the second POST of a delivery (ONYX_WEBHOOK_BACKOFF, seconds); it doubles at each
further attempt (0.5, 1, 2, 4 s by default)."""

WEBHOOK_TIMEOUT_S = float(os.environ.get("ONYX_WEBHOOK_TIMEOUT", "5"))
"""How long one POST to a webhook may wait to connect, and then for each part of the answer
(ONYX_WEBHOOK_TIMEOUT, seconds). A receiver that never answers holds its subscriber's worker this
long per attempt (about 7.5 s of backoff plus 25 s per delivery with the defaults), and only its
own subscriber's deliveries wait meanwhile."""

WEBHOOK_RATE = float(os.environ.get("ONYX_WEBHOOK_RATE", "50"))
"""POSTs per second the service makes to one subscriber's webhooks, on average (ONYX_WEBHOOK_RATE;
0: no limit); deliveries past it wait (they are not dropped)."""

WEBHOOK_BURST = int(os.environ.get("ONYX_WEBHOOK_BURST", "100"))
"""POSTs to one subscriber's webhooks above ONYX_WEBHOOK_RATE at once (ONYX_WEBHOOK_BURST)."""

WEBHOOK_WORKERS = int(os.environ.get("ONYX_WEBHOOK_WORKERS", "16"))
"""POSTs to webhooks in flight at once, over all subscribers (ONYX_WEBHOOK_WORKERS; threads). A
subscriber has at most one, so a receiver that hangs holds one worker for ONYX_WEBHOOK_TIMEOUT per
attempt and the others go on; only this many hanging at once would hold everyone up. A delivery
waiting for its retry or its subscriber's rate limit holds none. A worker mostly waits on a
socket, but a POST costs the service CPU: measured on loopback (a 5 KB body), 0.2 ms over http
and 0.8 ms over https (a TLS handshake each time). 16 subscribers POSTed to at ONYX_WEBHOOK_RATE
(800 POSTs/s) take up to two thirds of one of the 2 cores over https: about what webhooks may take
from the rest of the service; more workers would serve more hanging receivers at once, at that cost."""

WEBHOOK_QUEUE = int(os.environ.get("ONYX_WEBHOOK_QUEUE", "100"))
"""Deliveries read ahead for one subscriber's webhooks (ONYX_WEBHOOK_QUEUE); past it the service
pauses that subscriber's delivery partitions (nobody else's) until half of them were sent. The
default is ONYX_WEBHOOK_BURST: what a subscriber may be sent at once; more read ahead would only
wait for its rate limit, while this keeps it fed (the consumer refills every 0.2 s at most, 10
deliveries at ONYX_WEBHOOK_RATE). Memory: up to this many deliveries per subscriber with a
webhook."""

# -- security: the local overlay's Kafka users and ACLs (`onyx up --secure`), the operator token --

CLUSTER_FILE = RUN_DIR / "cluster.json"
"""Where ``onyx up`` says what it runs (under ONYX_RUN_DIR): Kafka's and the API's addresses, the
source topics, its pid; never a secret. The ``onyx`` commands find the local overlay there, and
send its API the operator token (:data:`ADMIN_TOKEN_FILE`)."""

ADMIN_TOKEN_FILE = _path("ONYX_ADMIN_TOKEN_FILE", RUN_DIR / "admin-token")
"""The operator token ``onyx up`` generates when ONYX_ADMIN_TOKEN is unset (ONYX_ADMIN_TOKEN_FILE;
mode 0600): made once, kept across runs (and ``onyx reset``) so that scripts and open consoles
keep working, and sent by the ``onyx`` commands to the local overlay's API. Closed by default:
with no token the operator surfaces refuse everyone."""

SECRET_BYTES = int(os.environ.get("ONYX_SECRET_BYTES", "32"))
"""Random bytes in each password and token Onyx generates (ONYX_SECRET_BYTES): 32, 256 bits, what
no guessing reaches; written URL-safe (43 characters), so it needs no quoting in a JAAS line, a
Kafka tool's argument or an HTTP header."""

KAFKA_SUPER_USER = os.environ.get("ONYX_KAFKA_SUPER_USER", "onyx-admin")
"""The super user of a secure local Kafka (ONYX_KAFKA_SUPER_USER): its nodes talk to each other as
it, and ``onyx up --secure`` creates the overlay's users and ACLs with it; its password is generated
when the Kafka's storage is formatted and kept beside its data (mode 0600)."""

KAFKA_SCRAM_ITERATIONS = int(os.environ.get("ONYX_KAFKA_SCRAM_ITERATIONS", "4096"))
"""PBKDF2 iterations of the SCRAM credentials ``onyx up --secure`` creates (ONYX_KAFKA_SCRAM_ITERATIONS):
Kafka's own default and the least it accepts for SCRAM-SHA-512, as the super user's credential from
``kafka-storage format --add-scram`` has; each login costs the client and Kafka this many hashes."""

KAFKA_ADMIN_TIMEOUT_S = float(os.environ.get("ONYX_KAFKA_ADMIN_TIMEOUT", "30"))
"""How long a new Kafka user or ACL of a secure local Kafka may take to be in force (ONYX_KAFKA_ADMIN_TIMEOUT,
seconds): Kafka applies them through its metadata log, a moment after it acknowledged them."""

# -- HTTP: the registration service's server and what one client may hold (issue: bounded work per request)

HTTP_HEADER_TIMEOUT_S = float(os.environ.get("ONYX_HTTP_HEADER_TIMEOUT", "10"))
"""Seconds a connection may take to send a request's line and headers, from its first byte (or
from the connection's start) (ONYX_HTTP_HEADER_TIMEOUT); past it the service answers 408 and
closes it, and a connection that sent nothing is closed. uvicorn has no such limit (its
keep-alive timeout starts after a response), so a client sending a header byte now and then
held its socket forever (slowloris). A client sends its headers in one segment: 10 s lets
three retransmissions of a lost one through (TCP's 1 s initial timeout, doubled: 1 + 2 + 4 s)."""

HTTP_KEEPALIVE_TIMEOUT_S = float(os.environ.get("ONYX_HTTP_KEEPALIVE_TIMEOUT", "5"))
"""Seconds an idle connection stays open after a response for the client's next request
(ONYX_HTTP_KEEPALIVE_TIMEOUT; uvicorn's default). Clients that reuse connections (the CLI, the
benchmarks' keep-alive clients) send their next request within it; behind a proxy that keeps
idle upstream connections longer (ingress-nginx: 60 s) set it above the proxy's, or a request
the proxy sends as the service closes the connection fails (502)."""

HTTP_DRAIN_TIMEOUT_S = float(os.environ.get("ONYX_HTTP_DRAIN_TIMEOUT", "2"))
"""Seconds a client answered before its request body came (a body over its limit: 413,
refused unread) may go on sending it, dropped, before the connection is closed
(ONYX_HTTP_DRAIN_TIMEOUT): most clients send the whole body before they read the answer, and
one whose connection is reset while it sends loses the answer. 2 s, as long as Apache's
lingering close waits for each read: the service reads a 64 MiB body in 0.1 s on loopback
(bench.http_limits), a LAN is not much slower; an attacker's endless body costs the service
2 s of reading and dropping."""

HTTP_MAX_CONNECTIONS = int(os.environ.get("ONYX_HTTP_MAX_CONNECTIONS", "2048"))
"""Connections the registration service keeps open at once (ONYX_HTTP_MAX_CONNECTIONS); one
accepted past it is answered 503 and closed at once (``/health`` too: the service is full).
Above what it must keep answering through (1,000 delivery-stream attempts at once, most
refused with 429, or 200 slowloris sockets, with ``/health`` polled throughout), with room to
spare; an idle connection costs about 5 KB (measured: 2,100 open took 10 MB) and an open file,
so the bound is on open files: the process's limit is raised to this plus what Kafka and the
database need (broker.registry.http), and 2,048 fits where a container's hard limit is as low
as 4,096."""

HTTP_ACTIVE_REQUESTS = int(os.environ.get("ONYX_HTTP_ACTIVE_REQUESTS", "64"))
"""Requests the registration service works on at once (ONYX_HTTP_ACTIVE_REQUESTS); the others
wait their turn, and ``GET /health`` never waits (broker.registry.http.Admission). It bounds
how much work one turn of the service's event loop holds, and so how long ``/health`` waits
in the service: during 1,000 delivery-stream attempts at once, up to 0.26-0.32 s without it,
0.03-0.10 s with 64 (2 shared cores; 16 did no better). Above anyio's 40 threads for
synchronous endpoints, so they still fill them."""

HTTP_BACKLOG = int(os.environ.get("ONYX_HTTP_BACKLOG", "2048"))
"""Connections the kernel queues for the service before it accepts them (ONYX_HTTP_BACKLOG,
``listen()``'s backlog; Linux caps it at net.core.somaxconn, 4,096 since 5.4): a burst as large
as the connection limit waits there instead of having its handshakes dropped (a dropped SYN is
retried after 1 s, then 3 s, ...)."""

ALLOWED_HOSTS = tuple(h.strip() for h in os.environ.get("ONYX_ALLOWED_HOSTS", "").split(",") if h.strip()) or None
"""Host names (or addresses) the registration service answers to, comma-separated
(ONYX_ALLOWED_HOSTS, without ports; ``*.example.org`` for every name under example.org, ``*``
for any): a request whose ``Host`` header names another is refused with 400, so a web page
cannot reach the service by pointing a name of its own at the service's address (DNS
rebinding). Unset: ``localhost``, ``127.0.0.1``, ``[::1]`` and the address the service binds
to, when it binds to one (not 0.0.0.0 or ::). A deployment sets the names clients use (the
Helm chart: its Service's and Ingress's). ``GET /health`` answers any."""

SSE_MAX = int(os.environ.get("ONYX_SSE_MAX", "64"))
"""Delivery streams (``GET /profiles/{id}/deliveries``) the service keeps open in all
(ONYX_SSE_MAX); past it a new one is refused with 429 and ``Retry-After``. Each is a Kafka
consumer and a thread of the service; measured on a one-node Kafka, an idle stream costs 5
threads, 8 open files, 0.5 MB and 0.04% of a core (64: 320 threads, 2.9% of a core), and its
consumer may buffer up to librdkafka's ``queued.max.messages.kbytes`` (64 MB) of a busy topic.
64 keeps all of it a small part of a 2-core service; a service for many browser subscribers
raises it with its memory and open-file limits."""

SSE_PER_SUBSCRIBER = int(os.environ.get("ONYX_SSE_PER_SUBSCRIBER", "8"))
"""Delivery streams one subscriber may keep open at once, over all its profiles
(ONYX_SSE_PER_SUBSCRIBER; 429 past it), so one subscriber cannot take every stream of
ONYX_SSE_MAX. A browser opens at most 6 connections to a host over HTTP/1.1, so a page
cannot use more than 6 anyway; 8 leaves room for a reconnect before the old stream is
noticed gone. A subscriber with more profiles reads its delivery topic from Kafka, or gets
webhooks."""

CONSOLE_STREAMS = int(os.environ.get("ONYX_CONSOLE_STREAMS", "8"))
"""Console event streams (``GET /console/events``) open at once, in all (ONYX_CONSOLE_STREAMS;
429 past it): one per operator's open console page, a handful."""

SSE_RETRY_AFTER_S = int(os.environ.get("ONYX_SSE_RETRY_AFTER", "5"))
"""``Retry-After`` of a stream refused for want of a slot (ONYX_SSE_RETRY_AFTER, seconds): a
slot frees as soon as its client goes away, but streams last minutes to hours; sooner than a
few seconds a retry would be refused again."""

HEALTH_TIMEOUT_S = float(os.environ.get("ONYX_HEALTH_TIMEOUT", "2"))
"""``GET /health`` answers 503 when the database has not answered a ping for this long, or the
last ping failed (ONYX_HEALTH_TIMEOUT, seconds; a thread pings four times as often,
broker.registry.health). Far above a ping's time on a working database even while the service
is flooded (up to 0.4 s measured, 1,000 requests at once on 2 cores), so a busy service is not
declared unready; short enough that the next probe (the Helm chart's come every 5 and 20 s)
sees a database that stopped answering."""
