"""The examples in the broker's docstrings run."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = ["broker.topics", "broker.registry.store", "broker.registry.subscribers", "broker.registry.topic_admin",
           "broker.kafka_auth", "broker.registry.control_packets", "broker.deploy.topology", "broker.control.state",
           "broker.dataplane.plan", "broker.control.state_log", "broker.dataplane.sink", "broker.spark.daemon",
           "broker.clients", "broker.registry.limits", "broker.registry.queries", "broker.query_client",
           "broker.registry.figures", "broker.registry.kafka_reads", "broker.registry.metrics",
           "broker.registry.webhooks", "broker.registry.webhook_targets", "broker.registry.webhook_lanes",
           "broker.registry.deliveries",
           "broker.local.devcluster", "broker.metadata.onyx_schema", "broker.metadata.documents",
           "broker.metadata.packets", "broker.metadata.broker_lmr", "broker.metadata.provider",
           "broker.metadata.client", "broker.registry.access", "broker.registry.app", "broker.registry.time_travel",
           "broker.registry.detached", "broker.registry.metadata_api", "broker.deploy.acls",
           "broker.local.secret_files",
           "broker.registry.http", "broker.registry.hosts", "broker.registry.health", "broker.packets"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name) -> None:
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0
