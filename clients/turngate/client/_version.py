"""The version of turngate: the one place it is written. Both distributions read it (the
service's `turngate` and the client's `turngate-client`, which are released together)."""

__version__ = "0.1.0"
