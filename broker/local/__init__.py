"""Running an overlay on this machine: the single-node KRaft Kafka broker on loopback
(``devcluster.py``, ``onyx kafka``), a whole overlay of Kafka, the registration service
and every broker in one Spark application (``cluster.py``), ``onyx up``, ``onyx status``
and ``onyx down`` around it (``up.py``), and ``onyx demo`` (``demo.py``). The top of the
import order inside :mod:`broker`, below only the CLI: nothing else imports it.
"""
