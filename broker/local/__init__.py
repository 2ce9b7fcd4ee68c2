"""Running an overlay on this machine: the KRaft Kafka on loopback, open or secure (SASL/SCRAM
and ACLs) (``devcluster.py``, ``onyx kafka``), a whole overlay of Kafka, the registration
service and every broker in one Spark application (``cluster.py``), the Kafka users of a
secure one (``kafka_users.py``, ``onyx kafka-user``) and the secrets kept for it in owner-only
files (``secret_files.py``), ``onyx up``, ``onyx status`` and ``onyx down`` around it
(``up.py``), and ``onyx demo`` (``demo.py``). The top of the
import order inside :mod:`broker`, below only the CLI: nothing else imports it.
"""
