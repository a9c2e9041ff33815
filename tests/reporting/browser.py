"""A headless Chromium driven over the DevTools protocol, for the HTML report's browser test.

The protocol runs over a pipe (``--remote-debugging-pipe``: descriptors 3 and 4 of the
browser, JSON messages ended by a NUL byte), so the browser listens on no port and the test
needs no websocket or browser-automation package. Chromium starts with a fresh profile and
everything that would reach the network off; the network is closed on CI anyway.

``load`` opens a file and returns what the test asserts on: the console messages and page
errors (``Runtime``, ``Log``), every URL the page asked for (``Network``), the size of each
``<svg>``, and a PNG screenshot of the whole page.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import os
import select
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-dev-shm-usage",
    "--remote-debugging-pipe",
)
CANDIDATES = ("/usr/bin/chromium", "chromium", "chromium-browser", "google-chrome")
TIMEOUT = 60.0


def find_chromium() -> str | None:
    """The Chromium to test with: ``$SPECSEED_CHROMIUM``, else Debian's, else one on PATH."""
    given = os.environ.get("SPECSEED_CHROMIUM")
    if given:
        return given if shutil.which(given) else None
    for name in CANDIDATES:
        found = shutil.which(name)
        if found:
            return found
    return None


def _high(pipe: tuple[int, int]) -> tuple[int, int]:
    """The pipe's descriptors moved to 10 and above, so that the shell's ``3<&N 4>&M`` never
    overwrites one of them before it is duplicated."""
    moved = tuple(fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10) for fd in pipe)
    for fd in pipe:
        os.close(fd)
    return moved[0], moved[1]


@dataclass
class PageLoad:
    """What one page load showed."""

    console: list[str] = field(default_factory=list)
    """Console messages of level error or warning, page errors and log entries of level error."""
    requests: list[str] = field(default_factory=list)
    """Every URL the page requested (the page itself included)."""
    svgs: list[tuple[float, float]] = field(default_factory=list)
    """Width and height (CSS pixels) of every ``<svg>`` on the page."""
    text: str = ""
    """The page's visible text."""
    screenshot: bytes = b""
    """PNG of the whole page."""


class Browser:
    """One headless Chromium; use as a context manager."""

    def __init__(self, executable: str, profile: Path, log: Path) -> None:
        to_browser_r, self._to_browser = _high(os.pipe())
        self._from_browser, from_browser_w = _high(os.pipe())
        self._log = log.open("wb")
        # The browser reads commands on descriptor 3 and writes replies on 4.
        self.process = subprocess.Popen(
            [
                "/bin/bash",  # dash takes no descriptor above 9 in a redirection
                "-c",
                f'exec "$0" "$@" 3<&{to_browser_r} 4>&{from_browser_w}',
                executable,
                *FLAGS,
                f"--user-data-dir={profile}",
                "about:blank",
            ],
            pass_fds=(to_browser_r, from_browser_w),
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=self._log,
        )
        os.close(to_browser_r)
        os.close(from_browser_w)
        self._buffer = b""
        self._next_id = 0
        self.events: list[dict[str, Any]] = []

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        with contextlib.suppress(Exception):  # already gone
            self.send("Browser.close", timeout=10.0)
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=10)
        for fd in (self._to_browser, self._from_browser):
            with contextlib.suppress(OSError):
                os.close(fd)
        self._log.close()

    # -- the protocol ------------------------------------------------------------------------

    def send(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        *,
        session: str | None = None,
        timeout: float = TIMEOUT,
    ) -> dict[str, Any]:
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if session is not None:
            message["sessionId"] = session
        os.write(self._to_browser, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            reply = self._receive(deadline)
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                result: dict[str, Any] = reply.get("result", {})
                return result
            self.events.append(reply)

    def _receive(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("the browser did not answer in time")
            ready, _, _ = select.select([self._from_browser], [], [], left)
            if not ready:
                continue
            chunk = os.read(self._from_browser, 1 << 20)
            if not chunk:
                raise RuntimeError(f"the browser exited (code {self.process.poll()})")
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\0")
        parsed: dict[str, Any] = json.loads(line)
        return parsed

    def wait_for(self, method: str, session: str, timeout: float = TIMEOUT) -> None:
        deadline = time.monotonic() + timeout
        while not any(
            e.get("method") == method and e.get("sessionId") == session for e in self.events
        ):
            self.events.append(self._receive(deadline))

    # -- a page --------------------------------------------------------------------------

    def load(self, path: Path, width: int = 1200) -> PageLoad:
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})[
            "sessionId"
        ]
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.send(f"{domain}.enable", session=session)
        self.send(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": 900, "deviceScaleFactor": 1, "mobile": False},
            session=session,
        )
        self.events.clear()
        self.send("Page.navigate", {"url": path.resolve().as_uri()}, session=session)
        self.wait_for("Page.loadEventFired", session)
        page = PageLoad()
        probe = (
            "JSON.stringify({svgs: [...document.querySelectorAll('svg')].map(s => {"
            "const r = s.getBoundingClientRect(); return [r.width, r.height];}),"
            "text: document.body.innerText})"
        )
        value = self.send(
            "Runtime.evaluate", {"expression": probe, "returnByValue": True}, session=session
        )["result"]["value"]
        found = json.loads(value)
        page.svgs = [(float(w), float(h)) for w, h in found["svgs"]]
        page.text = found["text"]
        metrics = self.send("Page.getLayoutMetrics", session=session)
        size = metrics["cssContentSize"]
        shot = self.send(
            "Page.captureScreenshot",
            {
                "format": "png",
                "captureBeyondViewport": True,
                "clip": {
                    "x": 0,
                    "y": 0,
                    "width": width,
                    "height": min(float(size["height"]), 16000.0),
                    "scale": 1,
                },
            },
            session=session,
        )
        page.screenshot = base64.b64decode(shot["data"])
        for event in self.events:
            if event.get("sessionId") != session:
                continue
            method, params = event.get("method"), event.get("params", {})
            if method == "Runtime.consoleAPICalled" and params.get("type") in (
                "error",
                "warning",
                "assert",
            ):
                texts = [str(a.get("value", a.get("description", ""))) for a in params["args"]]
                page.console.append(f"console.{params['type']}: {' '.join(texts)}")
            elif method == "Runtime.exceptionThrown":
                page.console.append(f"exception: {params['exceptionDetails'].get('text')}")
            elif method == "Log.entryAdded" and params["entry"].get("level") == "error":
                page.console.append(f"log: {params['entry'].get('text')}")
            elif method == "Network.requestWillBeSent":
                page.requests.append(params["request"]["url"])
        self.send("Target.closeTarget", {"targetId": target})
        return page
