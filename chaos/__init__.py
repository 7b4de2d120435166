"""Chaos scenarios and the PySpark consistency checks that judge them."""
