"""Profile placement: Partitioning based on Exclusiveness Patterns (PEP), the random
baseline it is measured against, and the mapping of partitions onto brokers that the
registration service uses to choose a profile's host broker.
"""
