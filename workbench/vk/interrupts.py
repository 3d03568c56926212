"""Ctrl-C held back over a step that must not be cut in half: work submitted to a queue and its wait, a row being
written. The one way of deferring SIGINT in the workbench (the runtime and the results writer use it).

Why a Python-level handler and not `pthread_sigmask`: a mask blocks SIGINT in the calling thread only, and the
kernel then hands the signal to any other thread of the process (lavapipe's, pyarrow's, tqdm's monitor); CPython's
C handler trips its flag there all the same and the main thread raises KeyboardInterrupt at its next bytecode, in
the middle of the step. A Python-level handler is what the main thread runs, whichever thread the signal reached.
"""
from __future__ import annotations

import contextlib
import signal
import threading


@contextlib.contextmanager
def sigint_deferred():
    """Run the block with SIGINT recorded, not acted on; afterwards the handler in place before the block gets it
    (the default one raises KeyboardInterrupt there, after the block). Nested blocks hand it outwards; outside the
    main thread (where no handler can be set) the block runs as it is."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: caught.append(frame))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)  # runs the recorder first for a signal still pending
        if caught:
            _deliver(previous, caught[0])


def _deliver(handler, frame) -> None:
    if callable(handler):
        handler(signal.SIGINT, frame)
    elif handler == signal.SIG_DFL:
        signal.raise_signal(signal.SIGINT)
    # SIG_IGN, or a handler not set from Python (None): nothing to do
