"""Running the registration service: in the foreground (``onyx serve``) or in a
background thread (``onyx up`` and the tests), always on a real uvicorn HTTP server with the
service's limits (:func:`broker.registry.http.make_server`)."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from broker import config
from broker.metadata.provider import MetadataProvider
from broker.registry.app import create_app
from broker.compacted import read_to_end
from broker.registry.console import add_console
from broker.registry.control_packets import KafkaSender
from broker.registry.deliveries import add_deliveries
from broker.registry.figures import Figures
from broker.registry.hosts import allowed_hosts
from broker.registry.http import ServerLimits, make_server
from broker.registry.limits import RateLimiter
from broker.registry.metrics import add_metrics
from broker.registry.queries import add_queries
from broker.registry.recovery import announced, recover
from broker.registry.store import Store
from broker.registry.time_travel import add_time_travel
from broker.registry.topic_admin import KafkaTopicAdmin
from broker.registry.webhooks import Dispatcher
from broker.topics import CATALOG, METADATA, PROFILES, ensure_topics, broker_topic
from routing.overlay import Overlay, builtin


@dataclass
class ServiceSettings:
    bootstrap_servers: str
    overlay: Overlay
    database_url: str = config.DATABASE_URL
    host: str = config.API_HOST
    port: int = config.API_PORT
    placement: str = config.PLACEMENT
    admin_token: str | None = config.ADMIN_TOKEN
    registration_rate: float = config.REGISTRATION_RATE
    registration_burst: int = config.REGISTRATION_BURST
    archive_dir: Path | None = config.ARCHIVE_DIR  # what the time-travel operations read (None: they answer 503)
    figures: Callable[[], dict[str, Any]] | None = None  # the brokers' figures (onyx up's); None: the service has none
    webhook_allow_private: bool = config.WEBHOOK_ALLOW_PRIVATE
    delivery_prefixes: tuple[str, ...] = config.DELIVERY_TOPIC_PREFIXES  # besides each subscriber's namespace
    allowed_hosts: tuple[str, ...] | None = config.ALLOWED_HOSTS  # None: the loopback names and ``host``
    http: ServerLimits = field(default_factory=ServerLimits)  # timeouts and the connection limit


def build_app(settings: ServiceSettings):
    """The FastAPI app wired to a real database and a real Kafka producer."""
    ensure_topics(settings.bootstrap_servers,
                  [CATALOG, PROFILES] + [broker_topic(b) for b in settings.overlay.brokers])
    ensure_topics(settings.bootstrap_servers, [METADATA], config={"cleanup.policy": "compact"})
    store = Store(settings.database_url)
    sender = KafkaSender(settings.bootstrap_servers, origin=store.identity())
    # the metadata provider: every document and subscription of the log, before it starts
    metadata = MetadataProvider(sender, settings.overlay)
    metadata.replay((m.key(), m.value()) for m in read_to_end(settings.bootstrap_servers, METADATA))
    admin = KafkaTopicAdmin(settings.bootstrap_servers)
    # after a crash: the brokers and the database agree again
    recover(store, sender, announced(settings.bootstrap_servers, store.identity()))
    app = create_app(store, settings.overlay, sender, settings.placement, settings.admin_token, admin,
                     RateLimiter(settings.registration_rate, settings.registration_burst), metadata,
                     settings.webhook_allow_private, settings.delivery_prefixes,
                     allowed_hosts(settings.host, settings.allowed_hosts))
    add_time_travel(app, store, settings.overlay, settings.archive_dir, settings.bootstrap_servers)
    add_queries(app, store, settings.overlay, settings.archive_dir)
    add_deliveries(app, store, settings.bootstrap_servers)
    webhooks = Dispatcher(store, settings.bootstrap_servers, allow_private=settings.webhook_allow_private)
    figures = Figures(settings.figures)
    add_console(app, store, settings.overlay, figures, settings.bootstrap_servers, webhooks.profiles)
    add_metrics(app, figures, lambda: {b: 0 for b in settings.overlay.brokers} | store.profile_counts(),
                lambda: dict(webhooks.counts))
    app.router.on_startup.append(webhooks.start)
    app.router.on_shutdown.extend([webhooks.stop, sender.close, admin.close])
    return app


def serve(settings: ServiceSettings) -> None:
    """Serve until interrupted (Ctrl-C)."""
    make_server(build_app(settings), settings.host, settings.port, settings.http).run()


class BackgroundServer:
    """The service on a uvicorn server in a daemon thread; ``url`` once started."""

    def __init__(self, settings: ServiceSettings) -> None:
        self.settings = settings
        self.server = make_server(build_app(settings), settings.host, settings.port, settings.http)
        self.thread = threading.Thread(target=self.server.run, name="onyx-registration", daemon=True)

    @property
    def url(self) -> str:
        return f"http://{self.settings.host}:{self.settings.port}"

    def start(self, timeout: float = 30.0) -> "BackgroundServer":
        self.thread.start()
        deadline = time.monotonic() + timeout
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"the registration service did not start on {self.url}")
            time.sleep(0.05)
        return self

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(10)


def load_overlay(path: Path | None) -> Overlay:
    """The overlay from a config file, or the built-in six-broker overlay of ONYX Figure 4."""
    return Overlay.load(path) if path else builtin("figure4")
