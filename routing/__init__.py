"""The query plane: the broker overlay and its broadcast trees (networkx), routing
queries in disjunctive normal form built by Map / Collect / Aggregate, content
generalization under a budget, and incremental transformation plans that let a
message be reshaped upstream of the brokers that host its subscribers.
"""
