"""Progress for the command line: a notice while numba compiles the kernels, and progress
bars (tqdm) for long simulations.

Both write to stderr, so that the results on stdout stay clean.  The compile notice is
printed once per process, when the first kernel is compiled (a first run, or a run after
the on-disk cache was invalidated), and :func:`compile_report` says how long compilation
took.  The progress bars are drawn only on a terminal (tqdm's ``disable=None``).
"""

from __future__ import annotations

import sys
import threading
import time

from numba.core import event as _numba_event

#: simulations shorter than this many seconds of wall time draw no bar (tqdm's delay)
BAR_DELAY_S = 2.0
#: compilation is announced once it has lasted this long (a few small functions, such as
#: the structref constructor of the compiled arrays, compile in every process in < 1 s)
NOTICE_DELAY_S = 2.0


class _CompileNotice(_numba_event.Listener):
    """Listens to numba's ``numba:compile`` events (fired only on a cache miss)."""

    def __init__(self, stream=None):
        self.stream = stream
        self.depth = 0
        self.started = None
        self.total = 0.0
        self.kernels = 0
        self.announced = False
        self.timer = None

    def on_start(self, event):
        if self.depth == 0:
            self.started = time.perf_counter()
            if not self.announced and self.timer is None:
                self.timer = threading.Timer(NOTICE_DELAY_S, self._announce)
                self.timer.daemon = True
                self.timer.start()
        self.depth += 1
        self.kernels += 1

    def _announce(self):
        if self.depth > 0 and not self.announced:
            self.announced = True
            print("compiling the numerical kernels (first use: a few minutes; cached on "
                  "disk for later runs) ...", file=self.stream or sys.stderr, flush=True)

    def on_end(self, event):
        self.depth = max(0, self.depth - 1)
        if self.depth == 0 and self.started is not None:
            self.total += time.perf_counter() - self.started
            if self.timer is not None and not self.announced:
                self.timer.cancel()
                self.timer = None


_NOTICE = None


def watch_compilation(stream=None) -> None:
    """Print a notice when numba starts compiling (once per process)."""
    global _NOTICE
    if _NOTICE is None:
        _NOTICE = _CompileNotice(stream)
        _numba_event.register("numba:compile", _NOTICE)


def compile_report(stream=None) -> None:
    """Say how long compilation took, when anything was compiled."""
    if _NOTICE is not None and _NOTICE.announced:
        print(f"compiled {_NOTICE.kernels} kernel specialisations in {_NOTICE.total:.1f} s "
              "(cached on disk: later runs start at once)", file=stream or sys.stderr,
              flush=True)
        _NOTICE.kernels, _NOTICE.total, _NOTICE.announced = 0, 0.0, False


def simulation_bar(desc: str):
    """A ``progress(done, total)`` callback for :func:`workbench.simulate` that draws a
    tqdm bar on a terminal; call ``.close()`` on it when the run ends."""
    from tqdm import tqdm

    class _Bar:
        def __init__(self):
            self.bar = None

        def __call__(self, done, total):
            if self.bar is None:
                self.bar = tqdm(total=total, desc=desc, unit="step", disable=None,
                                file=sys.stderr, delay=BAR_DELAY_S, leave=False)
            self.bar.update(done - self.bar.n)

        def close(self):
            if self.bar is not None:
                self.bar.close()
    return _Bar()
