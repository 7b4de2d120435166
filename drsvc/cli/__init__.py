"""Command-line interface: thin commands over the service modules."""
