"""The registration service (DESIGN.md section 4): the HTTP API that registers sources,
subscribers and profiles (``app.py``), the database it keeps them in (``store.py``),
subscribers and the delivery topics they own (``subscribers.py``, ``topic_admin.py``),
the ``query`` and ``catalog`` packets it writes to the brokers' inbound topics
(``control_packets.py``), the operator console and its live figures (``console.py``,
``figures.py``, ``static/console.html``), ``/metrics`` (``metrics.py``), push delivery over
Server-Sent Events (``deliveries.py``) and webhooks (``webhooks.py``), both reading Kafka
through ``kafka_reads.py``, and running it against Kafka (``serve.py``, ``onyx serve``).
Imports only the top-level modules of :mod:`broker`: it never loads Spark or the data plane.
"""
