"""The supervised process tree behind ``drsvc run``.

Every role of a topology (replication workers per flow, heartbeat emitters, checkpoint agents) runs
as a child process in its own process group. Decisions (when to restart a role, how long to back
off, when to give up on bad input) live in the pure :mod:`~drsvc.runtime.supervisor.restart_policy`;
the effects (spawning, signalling, reaping, log files, ``roles.json``) in
:mod:`~drsvc.runtime.supervisor.supervisor` and :mod:`~drsvc.runtime.supervisor.child`; what the
operator sees in :mod:`~drsvc.runtime.supervisor.live_view` (a terminal) or
:mod:`~drsvc.runtime.supervisor.plain_view` (log lines).
"""
