"""The start-up heap out of the garbage collector's walks (`[engine] freeze_startup_heap`).

A router process holds a large heap it never frees: the imports (litellm alone is about
400,000 objects), the configuration, the contracts, the providers. Python's cyclic garbage
collector walks every tracked object in each full collection, and a process running jobs makes
enough objects to start one every few hundred jobs: measured with issue 28 at c=64, seven full
collections of about 0.26 s of CPU each over 3,000 jobs, 0.6 ms a job, a fifth of the router's
CPU. `gc.freeze()` moves every object tracked so far to a permanent generation that no
collection walks; objects made later are collected as before, and reference counting frees
frozen objects as usual. What it costs: a cycle that was already garbage when it ran is never
freed. Done once per process, when the first router starts its workers (after the providers'
warm-up has imported what they need), so that routers opened later (tests open many) do not
freeze each other's garbage.
"""

from __future__ import annotations

import gc
import logging

log = logging.getLogger("jobrouter.engine")
_frozen = False


def freeze_once() -> bool:
    """Freeze the heap as it is now, the first time this process asks; True when it did."""
    global _frozen
    if _frozen:
        return False
    _frozen = True
    gc.freeze()
    log.debug("start-up heap frozen: %d objects left out of collections", gc.get_freeze_count())
    return True
