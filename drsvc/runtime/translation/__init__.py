"""Consumer-group offset translation between clusters, from the offset syncs of the flows.

:mod:`~drsvc.runtime.translation.sync_reader` reads a flow's sync topic into an
:class:`failover.offset_index.OffsetIndex`; :mod:`~drsvc.runtime.translation.cluster_view` is what
translation reads from a cluster (committed offsets, topic ids, end offsets, syncs);
:mod:`~drsvc.runtime.translation.group_translation` decides, for one group, which flow and direction
each of its partitions translates through and does the translation (``drsvc translate``).
"""
