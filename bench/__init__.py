"""The lionmsg benchmark harness: `make bench` (see bench/README.md). Not part of the lionmsg package."""
