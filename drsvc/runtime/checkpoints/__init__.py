"""The checkpoint stream: consumer-group positions translated and kept on the other cluster.

For every flow ``source->target`` the stream follows the consumer groups on the source, translates
their committed offsets through the offset syncs and writes checkpoints to
``<source>.checkpoints.internal`` on the target (``docs/checkpoints.md``).

* :mod:`~drsvc.runtime.checkpoints.plan`: which streams and sync topics a topology needs, where;
* :mod:`~drsvc.runtime.checkpoints.sync_follower`: an offset index kept current as syncs arrive;
* :mod:`~drsvc.runtime.checkpoints.checkpoint_topic`: creating and reading a checkpoints topic;
* :mod:`~drsvc.runtime.checkpoints.group_reader`: groups, committed offsets and topics of a cluster;
* :mod:`~drsvc.runtime.checkpoints.stream`: one cycle of one stream (translate, decide, count);
* :mod:`~drsvc.runtime.checkpoints.metrics`: the Prometheus metrics;
* :mod:`~drsvc.runtime.checkpoints.group_sync_hook`: hands exact positions to the group syncer;
* :mod:`~drsvc.runtime.checkpoints.faust_apps`: the faust apps, agents and timers;
* :mod:`~drsvc.runtime.checkpoints.service`: loading state and running it all until stopped;
* :mod:`~drsvc.runtime.checkpoints.flow_checkpoints`: reading what the streams wrote (no faust).
"""
