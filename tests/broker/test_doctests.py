"""The examples in the broker's docstrings run."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = ["broker.topics", "broker.store", "broker.subscribers", "broker.topic_admin", "broker.kafka_auth",
           "broker.control_packets", "broker.deploy_topology", "broker.state", "broker.plan", "broker.state_log",
           "broker.sink", "broker.spark_daemon", "broker.clients"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name) -> None:
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0
