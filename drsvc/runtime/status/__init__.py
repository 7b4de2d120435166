"""``drsvc status``: how far each flow has replicated, partition by partition, and who copies it.

:mod:`.report` holds the result and its JSON shape, :mod:`.cluster_reader` what status reads from a
cluster, and :mod:`.flow_status` how a flow's partitions, progress, lag and owners are put
together from both of its clusters.
"""
