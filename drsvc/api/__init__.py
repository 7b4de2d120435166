"""The failover API: an HTTP service (FastAPI) over the same service functions as the CLI."""
