"""Telemetry: OpenTelemetry spans and metrics, and structured logs of every state change.

`setup` installs exporters from the standard `OTEL_*` variables (and `--metrics-listen`), once per
process; `instrument` attaches a server's store, watch hub and projector to whatever was
installed. Nothing here decides anything: spans, counts and log lines observe the core's decisions.
See docs/telemetry.md.
"""
