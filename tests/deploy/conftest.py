"""Fixtures for the deployment tests: overlays, and the real helm binary when installed."""

from __future__ import annotations

import pytest

from broker.deploy import render as deploy_render
from routing.generators import random_geometric
from routing.overlay import Overlay, builtin


@pytest.fixture(scope="session")
def helm() -> str:
    """The helm binary (``make k8s-tools`` builds it into .tools/bin; ``make test`` always does)."""
    try:
        return deploy_render.find_helm()
    except deploy_render.DeployError as exc:
        pytest.skip(f"{exc} (make test installs it; these tests render the chart with the real helm)")


@pytest.fixture(scope="session", params=["figure4", "geometric20"])
def overlay(request) -> Overlay:
    """The default six-broker overlay and a 20-broker, 2-source generated one."""
    return builtin("figure4") if request.param == "figure4" else random_geometric(20, sources=2)
