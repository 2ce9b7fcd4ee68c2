"""Kubernetes deployment: topology, Helm chart rendering and values validation."""
