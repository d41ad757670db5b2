"""The turngate service: a pure core inside transactional shells (see docs/architecture.md)."""
