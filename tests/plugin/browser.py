"""A small Chrome DevTools Protocol client for the browser tests: Debian's headless
chromium, driven over its debugging websocket (no webdriver, no extra package:
`websockets` comes with Airflow's api-server). Clicks are real input events
(mouse pressed/released at the element's position), so the page sees a user
gesture, as it would from a person."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import tempfile
import time
import urllib.request
from typing import Any

from websockets.sync.client import connect

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"


class BrowserError(AssertionError):
    pass


class Browser:
    """One headless chromium with one page. Use as a context manager."""

    def __init__(self, width: int = 1280, height: int = 800):
        self.profile = tempfile.TemporaryDirectory(prefix="flinkchain-cdp-", ignore_cleanup_errors=True)
        self.proc = subprocess.Popen(
            [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             "--remote-debugging-port=0", f"--user-data-dir={self.profile.name}",
             f"--window-size={width},{height}", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        port = self._debugging_port()
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=30) as answer:
            page = next(t for t in json.load(answer) if t["type"] == "page")
        self.ws = connect(page["webSocketDebuggerUrl"], max_size=None, open_timeout=30).__enter__()
        self._next_id = 0
        self.call("Page.enable")
        self.call("Runtime.enable")

    def _debugging_port(self) -> int:
        deadline = time.time() + 60
        lines = []
        while time.time() < deadline:
            line = self.proc.stderr.readline()
            lines.append(line)
            found = re.search(r"DevTools listening on ws://[^:]+:(\d+)/", line)
            if found:
                return int(found.group(1))
            if not line and self.proc.poll() is not None:
                break
        raise BrowserError("chromium did not start: " + "".join(lines)[-2000:])

    def __enter__(self) -> "Browser":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        try:
            self.ws.close()
        finally:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            self.proc.stderr.close()
            self.profile.cleanup()

    def call(self, method: str, **params) -> dict:
        self._next_id += 1
        self.ws.send(json.dumps({"id": self._next_id, "method": method, "params": params}))
        while True:  # events in between are not needed
            message = json.loads(self.ws.recv(timeout=60))
            if message.get("id") == self._next_id:
                if "error" in message:
                    raise BrowserError(f"{method}: {message['error']}")
                return message.get("result", {})

    # ---- what a test does -----------------------------------------------------------

    def set_cookie(self, url: str, name: str, value: str) -> None:
        self.call("Network.setCookie", url=url, name=name, value=value, path="/")

    def open(self, url: str) -> None:
        self.call("Page.navigate", url=url)
        self.wait_for("document.readyState === 'complete'")

    def eval(self, expression: str) -> Any:
        answer = self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in answer:
            raise BrowserError(f"{expression[:200]}: {answer['exceptionDetails']}")
        return answer["result"].get("value")

    def wait_for(self, expression: str, timeout: float = 30) -> Any:
        """Poll `expression` (evaluated in the top page; errors count as not yet) until truthy."""
        deadline = time.time() + timeout
        last = None
        while time.time() < deadline:
            try:
                value = self.eval(f"(() => {{ try {{ const v = ({expression}); return typeof v === 'object' && v !== null "
                                  f"&& 'nodeType' in v ? true : v; }} catch (e) {{ return null; }} }})()")
            except BrowserError as error:  # navigating: the context went away
                value, last = None, error
            if value:
                return value
            time.sleep(0.2)
        raise BrowserError(f"timed out waiting for {expression!r} (at {self.location()}) {last or ''}")

    def location(self) -> str:
        try:
            return self.eval("location.pathname + location.search")
        except BrowserError:
            return "?"

    def click_at(self, x: float, y: float) -> None:
        for kind in ("mouseMoved", "mousePressed", "mouseReleased"):
            self.call("Input.dispatchMouseEvent", type=kind, x=x, y=y, button="left", clickCount=1)

    KEYS = {"ArrowDown": 40, "ArrowUp": 38, "Enter": 13}

    def press(self, key: str) -> None:
        """A key press on the focused element (a user gesture, like a click)."""
        for kind in ("rawKeyDown", "keyUp"):
            self.call("Input.dispatchKeyEvent", type=kind, key=key, code=key, windowsVirtualKeyCode=self.KEYS[key])

    def click(self, element: str) -> None:
        """Click the element a JS expression (evaluated in the top page) yields, inside an
        iframe or not: scrolled into view, then a real mouse click at its centre."""
        box = self.eval(f"""(() => {{
            const el = {element};
            el.scrollIntoView({{block: "center", inline: "center"}});
            const r = el.getBoundingClientRect();
            let x = r.left + r.width / 2, y = r.top + r.height / 2;
            for (let w = el.ownerDocument.defaultView; w.frameElement; w = w.parent) {{
                const f = w.frameElement.getBoundingClientRect();
                x += f.left; y += f.top;
            }}
            return [x, y];
        }})()""")
        self.click_at(*box)
