"""``drsvc migrate``: moving topics (and applications) from one cluster to another for good.

:mod:`.plan_reader` reads both clusters of a migration and asks the pure planner
(:mod:`failover.migration_plan`) what would be created, what already matches and what conflicts;
it changes nothing.
"""
