"""The gRPC shell: maps contract messages to core commands and back, with rich errors."""
