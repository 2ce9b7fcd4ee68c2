"""The running system: the Spark Structured Streaming broker job, the HTTP registration
service, an overlay on this machine, its Kubernetes rendering and the ``onyx`` command line.

At the top: the broker job's entry point (``job.py``: ``python -m broker.job``, what the
Helm chart runs) and the archive writer's (``archive_job.py``), the ``onyx`` CLI (``cli.py``), every default (``config.py``), errors a
user can act on (``errors.py``), topic names (``topics.py``), the rows brokers write
(``packets.py``), Kafka authentication (``kafka_auth.py``), Java and the fetched jars
(``jvm.py``), the publish/subscribe clients (``clients.py``) and the time-travel ones
(``time_travel_client.py``). The subpackages, by concern:

* :mod:`broker.metadata`: Onyx's metadata on MDV (the provider, a broker's repository, the
  ``catalog`` packets between them);
* :mod:`broker.control`: a broker's control state and its state log;
* :mod:`broker.dataplane`: what a broker does with each record, on the executors;
* :mod:`broker.spark`: the SparkSession and the PySpark worker daemon;
* :mod:`broker.registry`: the registration service;
* :mod:`broker.deploy`: Kubernetes rendering (``onyx deploy render``);
* :mod:`broker.local`: Kafka and a whole overlay on this machine (``onyx up``, ``onyx demo``).

Imports go one way, each part importing only parts before it: the top-level modules
(``config``, ``errors``, ``topics``, ``packets``, ``kafka_auth``, ``jvm``, ``clients``,
``time_travel_client``) <- ``metadata`` <- ``control`` <- ``dataplane`` <- ``spark`` <- ``job`` (and
``archive_job``) <- ``registry`` <- ``deploy`` <-
``local`` <- ``cli``. So what runs on the executors never loads the registration
service, the dev cluster or Helm, and ``registry`` and ``deploy`` import only the
top-level modules and ``metadata`` (``tests/test_layout.py`` checks both).
"""
