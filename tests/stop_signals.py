"""The stop signals for the programs the end-to-end tests start.

The programs keep SIGINT or SIGTERM ignored when it is ignored as they start (a non-interactive
shell starts its background jobs with SIGINT ignored), and a child inherits an ignored signal.
A test run may itself have been started so; the tests that stop a program by a signal need it
taken.
"""

import signal


def take_stop_signals():
    """Ctrl-C as KeyboardInterrupt here (a handler, which a program started from here does not
    inherit: it starts with the default action), and SIGTERM by its default action."""
    signal.signal(signal.SIGINT, signal.default_int_handler)
    if signal.getsignal(signal.SIGTERM) == signal.SIG_IGN:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
