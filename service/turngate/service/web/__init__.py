"""The HTTP listener (`--http-listen`): the contract for browsers over Connect and gRPC-Web, and
the operator console (docs/decisions.md, HTTP listener)."""
