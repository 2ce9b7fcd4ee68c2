"""``GET /metrics``: the brokers' figures (:mod:`broker.registry.figures`, what the console and
``onyx status`` show) in Prometheus' text format, for the monitoring operators already run (the
Helm chart's optional ``ServiceMonitor`` scrapes it). Guarded like the console's data.

Counters (``_total``) are the brokers' own, since their streaming query started; gauges are
what the figures were when gathered (at most ``ONYX_CONSOLE_EVERY`` seconds ago).

>>> from broker.registry.figures import Figures
>>> figures = Figures(lambda: {"brokers": [{"broker": "b1", "running": True, "messages": 7, "lag": 2,
...     "routing": {"b1": {"links": 1, "atoms": 3}}, "false_positives": {"b2": 1}, "last_batch_ms": 40}]}, every=0)
>>> text = exposition(FiguresCollector(figures, lambda: {"b1": 4}, lambda: {"dead_lettered": 1}))
>>> [line for line in text.splitlines() if line.startswith(("onyx_messages_in_total", "onyx_lag_records",
...                                                         "onyx_webhook_dead_lettered_total"))]
['onyx_messages_in_total{broker="b1"} 7.0', 'onyx_lag_records{broker="b1"} 2.0', 'onyx_webhook_dead_lettered_total 1.0']
"""

from __future__ import annotations

from typing import Callable, Iterator

from fastapi import Depends, FastAPI
from fastapi.responses import PlainTextResponse
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from broker.registry import access
from broker.registry.app import error_responses
from broker.registry.console import OPERATOR
from broker.registry.figures import Figures

# (figure, metric name, help) of the brokers' counters
COUNTERS = (
    ("messages", "onyx_messages_in", "messages a broker read (from its sources and its parents)"),
    ("forwarded", "onyx_messages_forwarded", "messages a broker sent down a link"),
    ("delivered", "onyx_messages_delivered", "deliveries a broker wrote to delivery topics"),
    ("dead_letters", "onyx_dead_letters", "records a broker wrote to onyx.dead-letter"),
    ("projected", "onyx_messages_projected", "messages sent down a link transformed (ONYX 4.2.2 incremental transformation)"),
    ("bytes_written", "onyx_bytes_written", "bytes a broker wrote to Kafka"),
    ("control_packets", "onyx_control_packets", "control packets a broker applied"),
)


class FiguresCollector:
    """A Prometheus collector over :class:`Figures` and the profiles hosted per broker."""

    def __init__(self, figures: Figures, hosted: Callable[[], dict[str, int]],
                 webhooks: Callable[[], dict[str, int]] = dict) -> None:
        self.figures = figures
        self.hosted = hosted
        self.webhooks = webhooks  # the webhook dispatcher's counts (posted, retried, dead_lettered)

    def collect(self) -> Iterator[Metric]:
        snap = self.figures.snapshot()
        brokers = snap["brokers"]
        for key, name, help_text in COUNTERS:
            family = CounterMetricFamily(name, help_text, labels=["broker"])
            for b in brokers:
                family.add_metric([b["broker"]], float(b.get(key, 0)))
            yield family
        gauges = {
            "onyx_broker_up": ("1 if the broker's streaming query runs", lambda b: float(bool(b.get("running")))),
            "onyx_lag_records": ("records on a broker's topics not processed yet", lambda b: b.get("lag")),
            "onyx_batch_duration_seconds": ("duration of the broker query's last micro-batch",
                                            lambda b: None if b.get("last_batch_ms") is None
                                            else b["last_batch_ms"] / 1000),
            "onyx_routing_links": ("output links in a broker's routing tables",
                                   lambda b: sum(r.get("links", 0) for r in b.get("routing", {}).values())),
            "onyx_routing_atoms": ("atoms (routing-table size) of a broker's routing tables",
                                   lambda b: sum(r.get("atoms", 0) for r in b.get("routing", {}).values())),
        }
        for name, (help_text, value) in gauges.items():
            family = GaugeMetricFamily(name, help_text, labels=["broker"])
            for b in brokers:
                v = value(b)
                if v is not None:
                    family.add_metric([b["broker"]], float(v))
            yield family
        fp = CounterMetricFamily("onyx_false_positives", "messages a parent's routing table sent down the link "
                                 "(parent>broker) that matched nothing at or below the broker", labels=["broker", "link"])
        for b in brokers:
            for link, n in b.get("false_positives", {}).items():
                fp.add_metric([b["broker"], link], float(n))
        yield fp
        hosted = GaugeMetricFamily("onyx_profiles_hosted", "profiles registered on a broker", labels=["broker"])
        for broker, n in sorted(self.hosted().items()):
            hosted.add_metric([broker], float(n))
        yield hosted
        for key, n in sorted(self.webhooks().items()):
            family = CounterMetricFamily(f"onyx_webhook_{key}", f"webhook deliveries {key.replace('_', '-')} by "
                                         "the registration service since it started")
            family.add_metric([], float(n))
            yield family
        age = GaugeMetricFamily("onyx_figures_timestamp_seconds", "when the brokers' figures were gathered (0: the "
                                "service runs no brokers)")
        age.add_metric([], float(snap["time"]))
        yield age


def exposition(collector: FiguresCollector) -> str:
    """The collector's metrics in Prometheus' text format."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    return generate_latest(registry).decode()


def add_metrics(app: FastAPI, figures: Figures, hosted: Callable[[], dict[str, int]],
                webhooks: Callable[[], dict[str, int]] = dict) -> None:
    """Add ``GET /metrics`` to the service (an operator's: Prometheus scrapes it with the operator token)."""
    collector = FiguresCollector(figures, hosted, webhooks)

    @app.get("/metrics", response_class=PlainTextResponse, summary="The brokers' figures for Prometheus",
             operation_id="metrics",
             responses={200: {"description": "Prometheus' text exposition format (version 0.0.4)",
                              "content": {"text/plain": {"schema": {"type": "string"}}}},
                        **error_responses(OPERATOR)},
             dependencies=[Depends(access.of(app).allow("operator", sees="every broker's figures"))])
    def metrics() -> PlainTextResponse:
        return PlainTextResponse(exposition(collector), media_type=CONTENT_TYPE_LATEST)
