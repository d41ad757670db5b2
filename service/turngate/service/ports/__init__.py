"""What the shells offer the layers above them, and nothing else: the store port (`store`) and
the turn-history port with its views (`history`). Stores and the ledger implement them; the API,
watch hub, watchdog and telemetry use them."""
