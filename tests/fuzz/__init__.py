"""Coverage-guided fuzzing (atheris, i.e. libFuzzer) of everything that reads untrusted
input: profile texts (the XPath and FLWR parsers, validation, registration), messages
as XML text (lxml and the C matcher's reader, which must agree on what they accept),
payloads of every wire format, packet headers, and sources' schemas (DTD, XML Schema).

``targets`` holds the fuzz targets (plain functions of one input's bytes, usable
without atheris), ``limit`` the per-input CPU time limit of the parsing ones, ``run``
the command that fuzzes them (``python -m tests.fuzz``, ``make fuzz``),
``corpus/<target>/`` the committed inputs each run starts from.
"""
