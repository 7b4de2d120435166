"""Children that die with their supervisor, even when it is killed with SIGKILL (Linux).

``prctl(PR_SET_PDEATHSIG, SIGKILL)`` asks the kernel to kill the child when the thread that forked
it ends. It is set between fork and exec (``preexec_fn``) and survives the exec. SIGKILL rather
than SIGTERM: no supervisor is left to enforce a grace period, and every role already tolerates
being killed (replication progress is committed only after the copies are acknowledged), whereas
a role that hung in its shutdown would otherwise run forever.

Caveats, and how the supervisor meets them: the signal follows the forking *thread*, so children
are only ever started from the supervisor's main thread; and a supervisor that dies between fork
and ``prctl`` would be missed, so the child checks afterwards that its parent is still the one
that forked it.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os
import signal
import sys
from collections.abc import Callable

log = logging.getLogger(__name__)

_PR_SET_PDEATHSIG = 1


def die_with_parent_hook() -> Callable[[], None] | None:
    """A ``preexec_fn`` that ties the child's life to this process, or None where the kernel
    offers no such thing (not Linux, no libc found)."""
    if not sys.platform.startswith("linux"):
        log.warning(
            "this platform has no parent-death signal: children outlive a supervisor that is "
            "killed with SIGKILL"
        )
        return None
    libc_name = ctypes.util.find_library("c")
    if libc_name is None:
        log.warning("libc not found: children outlive a supervisor that is killed with SIGKILL")
        return None
    # Loaded here, in the parent: the hook must not import or load anything after fork.
    prctl = ctypes.CDLL(libc_name, use_errno=True).prctl
    parent = os.getpid()

    def die_with_parent() -> None:
        prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
        if os.getppid() != parent:  # the parent died before prctl took effect
            os.kill(os.getpid(), signal.SIGKILL)

    return die_with_parent
