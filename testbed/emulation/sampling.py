"""A thread that samples something periodically while a ``with`` block runs."""
from __future__ import annotations

import threading


class Sampler:
    """Subclasses define ``_run`` and check ``self._stop`` (an Event) between samples;
    entering starts the thread, leaving stops it and waits for it."""

    def __init__(self):
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        raise NotImplementedError

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        return False
