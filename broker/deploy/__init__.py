"""Kubernetes rendering: what an overlay needs from Kafka and Kubernetes, its topics and
what each broker reads and writes (``topology.py``), every principal's Kafka ACL rules,
which the chart's KafkaUsers and a secure local Kafka both get (``acls.py``), and ``onyx
deploy render``, which turns an overlay config into the Helm chart's values and runs
``helm template`` (``render.py``). Imports only the
top-level modules of :mod:`broker`.
"""
