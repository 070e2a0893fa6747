"""The dashboard's signals: the terminal given back on SIGTERM, SIGHUP and SIGINT, and
SIGSTOP/SIGCONT (or SIGTSTP) in any rhythm survived.

Textual 8.2.8 leaves three gaps (textual/drivers/linux_driver.py):

- `LinuxDriver.__init__` puts Python handlers on SIGTSTP and SIGCONT that stop and start
  application mode *inside the handler*, that is in whatever frame of the main thread the
  signal interrupted. `_sigcont_application` calls `start_application_mode` even when no
  SIGTSTP stopped it first (a plain SIGSTOP cannot be caught): it starts a second writer
  thread and a second input thread beside the running ones (two threads then read the keys),
  and `Thread.start` waits for the new thread on locks the interrupted frame may hold (the
  queue of the writer thread, threading's `_active_limbo_lock` while the poller starts a
  worker): a few fast pairs left the main thread in a futex wait for good. It also takes the
  terminal's raw attributes as the ones to restore (`attrs_before`), so the shell got raw
  mode back at exit.
- SIGTERM and SIGHUP keep their default action: the process ends with the alternate screen,
  raw mode, mouse tracking and a hidden cursor left to the shell.
- SIGINT raises KeyboardInterrupt in whatever frame it lands.

So every one of them is handled by the event loop instead (`loop.add_signal_handler`: the
signal only wakes the loop, and the work runs as an ordinary callback between two others).
SIGCONT stops and starts application mode properly (`Driver.suspend_application_mode`, then
`resume_application_mode`, as `App.suspend` does) and repaints, once for a burst of them
(`RESTART_DELAY_S`: each restart flushes the keys typed meanwhile, `LinuxDriver.disable_input`
calls `tcflush(TCIFLUSH)`, so ten quick pairs must not mean ten restarts); SIGTSTP
suspends, then stops the process; SIGTERM, SIGHUP and SIGINT end the app through
`App.exit` (which restores the terminal), with a watchdog that restores it directly if the
exit hangs (a terminal that hung up cannot take the writes Textual waits on).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import termios
import threading
from typing import Any

from textual.app import App

#: What the terminal is given back when the watchdog must do it: Textual's
#: `LinuxDriver.stop_application_mode` and `_disable_mouse_support` writes (mouse modes off,
#: Kitty keyboard protocol popped, bracketed paste off, line wrap on, alternate screen left,
#: cursor shown, focus events off).
RESET = (
    "\x1b[?1000l\x1b[?1003l\x1b[?1015l\x1b[?1006l\x1b[?2004l\x1b[?7h\x1b[<u"
    "\x1b[?1049l\x1b[?25h\x1b[?1004l"
)
RESTART_DELAY_S = 0.05
"""How long after a SIGCONT application mode restarts; the SIGCONTs of a burst share it."""
EXIT_GRACE_S = 5.0
"""How long the app has to exit after a terminating signal before the watchdog ends it."""

_ENDING = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)


class TerminalSignals:
    """The signal handlers of one running dashboard (a real terminal, never headless)."""

    def __init__(self, app: App[Any]) -> None:
        self._app = app
        # Textual keeps its driver private (textual/app.py App._driver, 8.2.8); the terminal
        # attributes from before application mode are its public `attrs_before`
        self._driver: Any = app._driver
        self._original = getattr(self._driver, "attrs_before", None)
        self._suspended = False
        self._ending = False
        self._restart: asyncio.TimerHandle | None = None

    @classmethod
    def install(cls, app: App[Any]) -> TerminalSignals | None:
        """Take over the signals for `app`, when it runs on a real terminal under the event
        loop of the main thread; None where it does not (headless tests, Windows)."""
        if app.is_headless or sys.platform == "win32" or app._driver is None:
            return None
        if threading.current_thread() is not threading.main_thread():
            return None
        handlers = cls(app)
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGCONT, handlers._continued)
        loop.add_signal_handler(signal.SIGTSTP, handlers._stop_requested)
        for signum in _ENDING:
            loop.add_signal_handler(signum, handlers._end, signum)
        return handlers

    def _continued(self) -> None:
        """SIGCONT: restart application mode soon, once for the whole burst."""
        if self._ending or self._restart is not None:
            return
        loop = asyncio.get_running_loop()
        self._restart = loop.call_later(RESTART_DELAY_S, self._restarted)

    def _restarted(self) -> None:
        """After a SIGTSTP (suspended here) resume; after a SIGSTOP (nothing could run) stop
        and start application mode, since a shell that saw the stop reset the terminal's
        modes. Then repaint everything."""
        self._restart = None
        if self._ending:
            return
        driver = self._driver
        if not self._suspended:
            driver.suspend_application_mode()
        self._suspended = False
        driver.resume_application_mode()
        if self._original is not None:
            driver.attrs_before = self._original  # exit restores the shell's modes, not raw
        self._app.refresh(layout=True)

    def _stop_requested(self) -> None:
        """SIGTSTP: give the terminal back, then stop (SIGCONT resumes)."""
        if self._ending or self._suspended:
            return
        self._suspended = True
        self._driver.suspend_application_mode()
        os.kill(os.getpid(), signal.SIGSTOP)

    def _end(self, signum: int) -> None:
        """SIGTERM, SIGHUP, SIGINT: exit as `q` does, 128 + the signal's number (the shell's
        convention for a process ended by it); a second one, or an exit that hangs, ends the
        process at once with the terminal restored directly."""
        code = 128 + signum
        if self._ending:
            self._force(code)
        self._ending = True
        if self._suspended:  # stopped by SIGTSTP: the terminal is already the shell's
            self._force(code)
        watchdog = threading.Timer(EXIT_GRACE_S, self._overdue, args=(code,))
        watchdog.daemon = True
        watchdog.start()
        self._app.exit(return_code=code)

    def _overdue(self, code: int) -> None:
        """The watchdog: the app has not given the terminal back yet (Textual's writer thread
        still runs until `LinuxDriver.close`), so do it here; past that point the rest of the
        exit is bounded on its own (`BoundedSource.close`)."""
        writer = getattr(self._driver, "_writer_thread", None)
        if writer is not None and writer.is_alive():
            self._force(code)

    def _force(self, code: int) -> None:
        """Restore the terminal without Textual (its writer thread may be stuck) and end."""
        with contextlib.suppress(OSError, termios.error, ValueError, AttributeError):
            fileno = self._driver.fileno
            if self._original is not None:
                termios.tcsetattr(fileno, termios.TCSANOW, self._original)
            os.write(sys.__stderr__.fileno(), RESET.encode())  # type: ignore[union-attr]
        os._exit(code)
