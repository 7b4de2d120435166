"""The automated DR trigger: fails applications over when their cluster is gone."""
