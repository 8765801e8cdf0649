"""A step a signal must not cut in half: asking the daemon to create a container. Ctrl-C
or SIGTERM while that request is in flight left a container the daemon made a moment
after envgen had looked for it to remove (a CI run under load saw one)."""
from __future__ import annotations

import contextlib
import os
import signal
import threading

HELD = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@contextlib.contextmanager
def deferred():
    """Run the block whole: SIGINT, SIGTERM and SIGHUP arriving inside it are held and sent
    again when it ends, to the handlers they would have met (envgen's, which raise where the
    process then is). The block must be bounded (a daemon call with its timeout). Off the
    main thread, where no handler can be set, the block runs as it is. It is given the list
    of the signals held so far, so it can skip what is no longer wanted."""
    if threading.current_thread() is not threading.main_thread():
        yield []
        return
    held: list[int] = []
    previous = {}
    for s in HELD:
        try:
            previous[s] = signal.signal(s, lambda signum, _frame: held.append(signum))
        except (ValueError, OSError):   # not settable here: that one is not held
            pass
    try:
        yield held
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        if held:
            os.kill(os.getpid(), held[0])   # delivered now, to the handler just put back
