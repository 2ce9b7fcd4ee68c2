"""A broker's control state and its log: what the ``query`` and ``catalog`` packets of its
inbound topic made of it (the overlay, the catalog of sources, its routing node with the
profiles it hosts and its routing tables; ``state.py``), and the state log
``onyx.state.<broker>`` that keeps every Python worker's copy of that state in step and
lets a restarted broker rebuild it from Kafka (``state_log.py``). Imports only the
top-level modules of :mod:`broker`; the data plane builds on it.
"""
