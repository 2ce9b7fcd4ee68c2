"""What the API conformance run (``tests/broker/test_api_conformance.py``) gives schemathesis:
its settings (``schemathesis.toml``) and hooks (``hooks.py``)."""
