"""What a broker does with each record of its inbound topic, on the Spark executors: the
task function that applies control packets in place and routes, transforms and delivers
messages (``executor.py``), the per-broker plan that turns one record into output rows
(``plan.py``), and the librdkafka sink those rows are written with (``sink.py``). Imports
:mod:`broker.control` and the top-level modules of :mod:`broker`, never the registration
service, the local dev cluster or the Kubernetes rendering.
"""
