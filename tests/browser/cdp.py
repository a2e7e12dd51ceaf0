"""Headless Chromium driven over the DevTools protocol, through a pipe (no WebSocket, no Playwright).

``chromium --remote-debugging-pipe`` reads protocol messages from its file descriptor 3 and writes
its answers to descriptor 4, each a JSON object ended by a NUL byte
(https://chromedevtools.github.io/devtools-protocol/). :class:`Browser` starts Debian's chromium
with a throwaway profile, opens one page and records what a test checks: console messages, uncaught
exceptions and every network request the page makes.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any


def chromium_path() -> str | None:
    """Debian's chromium (``apt-get install chromium``), or ``None``."""
    return shutil.which("chromium") or shutil.which("chromium-browser")


class BrowserError(RuntimeError):
    """Chromium exited, timed out or answered a command with an error."""


class Browser:
    """One headless Chromium with one page (a context manager)."""

    def __init__(self, width: int = 1280, height: int = 900, timeout: float = 60.0) -> None:
        exe = chromium_path()
        if exe is None:
            raise BrowserError("chromium is not installed (apt-get install --no-install-recommends chromium)")
        self.timeout = timeout
        self.profile = tempfile.mkdtemp(prefix="hpcjobs-chromium-")
        to_browser_r, self._to_browser = os.pipe()
        self._from_browser, from_browser_w = os.pipe()
        # the child's ends above 9, so that putting them on 3 and 4 cannot overwrite one with the other
        to_browser_r, from_browser_w = (self._high(fd) for fd in (to_browser_r, from_browser_w))
        args = [exe, "--headless=new", "--remote-debugging-pipe", "--no-first-run", "--no-default-browser-check",
                "--disable-gpu", "--disable-extensions", "--disable-background-networking", "--disable-sync",
                "--no-sandbox", "--disable-dev-shm-usage", "--mute-audio", f"--user-data-dir={self.profile}",
                f"--window-size={width},{height}", "about:blank"]

        # chromium wants the pipe on descriptors 3 (its input) and 4 (its output): bash puts them there
        # (dash, /bin/sh on Debian, takes one-digit descriptors only)
        shell = f'exec "$0" "$@" 3<&{to_browser_r} 4>&{from_browser_w}'
        self.proc = subprocess.Popen(["/bin/bash", "-c", shell, *args], stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                     pass_fds=(to_browser_r, from_browser_w))
        os.close(to_browser_r)
        os.close(from_browser_w)
        self._buf = b""
        self._next_id = 0
        self.events: list[dict[str, Any]] = []
        self.console: list[dict[str, Any]] = []
        self.exceptions: list[dict[str, Any]] = []
        self.requests: list[str] = []
        target = self.send("Target.createTarget", url="about:blank")["targetId"]
        self.session = self.send("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        for domain in ("Page", "Runtime", "Network", "Log"):
            self.send(f"{domain}.enable", session=True)
        self.send("Emulation.setDeviceMetricsOverride", session=True, width=width, height=height,
                  deviceScaleFactor=1, mobile=False)

    @staticmethod
    def _high(fd: int) -> int:
        import fcntl

        high = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10)
        os.close(fd)
        return high

    # ---------------------------------------------------------------------------------------- wire
    def _read_message(self, deadline: float) -> dict[str, Any]:
        import select

        while b"\0" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise BrowserError("chromium did not answer in time")
            ready, _, _ = select.select([self._from_browser], [], [], left)
            if not ready:
                continue
            chunk = os.read(self._from_browser, 1 << 20)
            if not chunk:
                err = self.proc.stderr.read().decode(errors="replace")[-2000:] if self.proc.stderr else ""
                raise BrowserError(f"chromium closed the pipe (exit {self.proc.poll()}): {err}")
            self._buf += chunk
        raw, self._buf = self._buf.split(b"\0", 1)
        return json.loads(raw)

    def _record(self, msg: dict[str, Any]) -> None:
        method, params = msg.get("method"), msg.get("params", {})
        self.events.append(msg)
        if method == "Runtime.consoleAPICalled":
            self.console.append({"type": params.get("type"),
                                 "text": " ".join(str(a.get("value", a.get("description", "")))
                                                  for a in params.get("args", []))})
        elif method == "Log.entryAdded":
            entry = params.get("entry", {})
            self.console.append({"type": entry.get("level"), "text": entry.get("text", ""),
                                 "source": entry.get("source")})
        elif method == "Runtime.exceptionThrown":
            self.exceptions.append(params.get("exceptionDetails", {}))
        elif method == "Network.requestWillBeSent":
            self.requests.append(params.get("request", {}).get("url", ""))

    def send(self, method: str, *, session: bool = False, **params: Any) -> dict[str, Any]:
        """Send one command and return its result (events that come first are recorded)."""
        self._next_id += 1
        msg: dict[str, Any] = {"id": self._next_id, "method": method, "params": params}
        if session:
            msg["sessionId"] = self.session
        os.write(self._to_browser, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + self.timeout
        while True:
            answer = self._read_message(deadline)
            if answer.get("id") == self._next_id:
                if "error" in answer:
                    raise BrowserError(f"{method}: {answer['error']}")
                return answer.get("result", {})
            self._record(answer)

    def wait_event(self, method: str, timeout: float | None = None) -> dict[str, Any]:
        """The next event ``method`` (one already recorded since the last wait counts)."""
        for i, msg in enumerate(self.events):
            if msg.get("method") == method:
                del self.events[: i + 1]
                return msg
        deadline = time.monotonic() + (timeout or self.timeout)
        while True:
            msg = self._read_message(deadline)
            self._record(msg)
            if msg.get("method") == method:
                self.events.clear()
                return msg

    # ------------------------------------------------------------------------------------- page use
    def open(self, path: Path) -> float:
        """Load a local file; seconds from the navigation to the page's load event."""
        self.events.clear()
        start = time.monotonic()
        self.send("Page.navigate", session=True, url=path.resolve().as_uri())
        self.wait_event("Page.loadEventFired")
        return time.monotonic() - start

    def js(self, expression: str) -> Any:
        """Evaluate ``expression`` in the page (promises awaited) and return its value."""
        result = self.send("Runtime.evaluate", session=True, expression=expression, returnByValue=True,
                           awaitPromise=True)
        if "exceptionDetails" in result:
            thrown = result["exceptionDetails"].get("exception", {}).get("description")
            raise BrowserError(f"{expression[:80]}: {thrown}")
        return result.get("result", {}).get("value")

    def mouse(self, kind: str, x: float, y: float, clicks: int = 0) -> None:
        """A real mouse event (``mousePressed``, ``mouseMoved``, ``mouseReleased``) at page coordinates."""
        extra = {"button": "left", "clickCount": clicks} if kind != "mouseMoved" else {"button": "none"}
        if kind == "mouseMoved" and clicks:
            extra = {"button": "left", "buttons": 1}
        self.send("Input.dispatchMouseEvent", session=True, type=kind, x=x, y=y, **extra)

    def type_text(self, text: str) -> None:
        """Type into the focused element, as a keyboard would."""
        self.send("Input.insertText", session=True, text=text)

    def screenshot(self, path: Path, full_page: bool = True) -> Path:
        """A PNG of the page (the whole page by default)."""
        params: dict[str, Any] = {"format": "png"}
        if full_page:
            size = self.send("Page.getLayoutMetrics", session=True)["cssContentSize"]
            params.update(captureBeyondViewport=True, clip={"x": 0, "y": 0, "width": size["width"],
                                                            "height": size["height"], "scale": 1})
        data = self.send("Page.captureScreenshot", session=True, **params)["data"]
        path.write_bytes(base64.b64decode(data))
        return path

    def close(self) -> None:
        with contextlib.suppress(BrowserError, OSError):
            self.send("Browser.close")
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        for fd in (self._to_browser, self._from_browser):
            with contextlib.suppress(OSError):
                os.close(fd)
        if self.proc.stderr:
            self.proc.stderr.close()
        shutil.rmtree(self.profile, ignore_errors=True)

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
