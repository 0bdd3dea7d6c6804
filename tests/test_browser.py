"""The report site in a real browser: headless Chromium (Debian's ``chromium``) opens the
index and every page reachable from it, and this test checks that no page logs a console
error (a script error, a resource that failed to load, ...), that every image loaded
(``naturalWidth > 0``), that every local link points at an existing file, that nothing is
fetched from the network and that no Markdown markup is visible; a screenshot of every page
is kept under the test's temporary folder (``index.png`` first).

The browser is driven through the Chrome DevTools protocol over a pipe
(``--remote-debugging-pipe``: NUL-terminated JSON on file descriptors 3 and 4), with the
standard library only.  Skipped, with the reason, where no Chromium executable is found
(``.ci/run`` installs Debian's ``chromium`` where it can); ``WORKBENCH_CHROMIUM`` names
another executable.

Two sites: the fixture site of ``tests/test_site.py`` (always), and the committed
``reports/`` once the main job has written ``reports/simulate/`` in this checkout.
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import select
import shutil
import subprocess
import time
from collections import deque
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest
from test_site import REPORTS, make_site

RAW_MARKUP = ("**", "`", "](", "![", "|---", "<!--")
#: what the browser reports about a loaded page
PAGE_FACTS = """JSON.stringify({
  title: document.title,
  text: document.body ? document.body.innerText : "",
  images: Array.from(document.images).map(i => ({src: i.getAttribute("src"), url: i.src,
                                                 ok: i.complete && i.naturalWidth > 0})),
  links: Array.from(document.querySelectorAll("a[href]")).map(a => a.href),
  resources: Array.from(document.querySelectorAll("[src], link[href]"))
                  .map(e => e.getAttribute("src") || e.getAttribute("href")),
  tables: document.querySelectorAll("table.data").length,
  nav: document.querySelectorAll("nav.site a").length,
})"""


def chromium_executable() -> str | None:
    names = [os.environ.get("WORKBENCH_CHROMIUM", ""), "chromium", "chromium-browser",
             "google-chrome", "google-chrome-stable"]
    for name in names:
        if name and shutil.which(name):
            return shutil.which(name)
    return None


class Browser:
    """A headless Chromium driven over ``--remote-debugging-pipe``."""

    def __init__(self, exe: str, profile: Path, timeout: float = 30.0):
        self.timeout = timeout
        cmd_r, self._cmd_w = os.pipe()          # we write commands, Chromium reads fd 3
        self._res_r, res_w = os.pipe()          # Chromium writes fd 4, we read

        def to_fds_3_and_4():                  # in the child, before exec
            a = fcntl.fcntl(cmd_r, fcntl.F_DUPFD, 10)
            b = fcntl.fcntl(res_w, fcntl.F_DUPFD, 10)
            os.dup2(a, 3)
            os.dup2(b, 4)

        self.log = profile / "chromium.log"
        self.proc = subprocess.Popen(
            [exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
             "--no-first-run", "--no-default-browser-check", "--disable-background-networking",
             "--disable-component-update", "--disable-sync", "--disable-extensions",
             "--disable-dev-shm-usage", "--hide-scrollbars", "--mute-audio",
             f"--user-data-dir={profile}", "--remote-debugging-pipe", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=open(self.log, "wb"), close_fds=False, preexec_fn=to_fds_3_and_4)
        os.close(cmd_r)
        os.close(res_w)
        self._buf = b""
        self._inbox: list[dict] = []
        self.events: list[dict] = []
        self._id = 0

    # -- protocol --------------------------------------------------------------------------
    def _read(self, deadline: float) -> None:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("no answer from Chromium; its log: "
                               + self.log.read_text(errors="replace")[-2000:])
        ready, _, _ = select.select([self._res_r], [], [], left)
        if not ready:
            return
        chunk = os.read(self._res_r, 1 << 20)
        if not chunk:
            raise RuntimeError("Chromium closed the pipe; its log: "
                               + self.log.read_text(errors="replace")[-2000:])
        self._buf += chunk
        *msgs, self._buf = self._buf.split(b"\0")
        for raw in msgs:
            msg = json.loads(raw)
            self._inbox.append(msg)
            if "method" in msg:
                self.events.append(msg)

    def wait(self, match, timeout: float | None = None) -> dict:
        deadline = time.monotonic() + (timeout or self.timeout)
        while True:
            for k, msg in enumerate(self._inbox):
                if match(msg):
                    return self._inbox.pop(k)
            self._read(deadline)

    def send(self, method: str, params: dict | None = None, session: str | None = None):
        self._id += 1
        msg = {"id": self._id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self._cmd_w, json.dumps(msg).encode() + b"\0")
        ans = self.wait(lambda m, i=self._id: m.get("id") == i)
        if "error" in ans:
            raise RuntimeError(f"{method}: {ans['error']}")
        return ans.get("result", {})

    # -- pages -----------------------------------------------------------------------------
    def open_tab(self, width: int = 1280, height: int = 900) -> str:
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.send("Target.attachToTarget",
                            {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Page", "Runtime", "Log"):
            self.send(f"{domain}.enable", session=session)
        self.send("Emulation.setDeviceMetricsOverride",
                  {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
                  session)
        return session

    def visit(self, session: str, url: str) -> tuple[dict, list[str]]:
        """Load ``url``; returns the page facts (:data:`PAGE_FACTS`) and the console
        errors logged while it loaded."""
        self._inbox = [m for m in self._inbox if "id" in m]       # drop earlier events
        mark = len(self.events)
        self.send("Page.navigate", {"url": url}, session)
        self.wait(lambda m: m.get("method") == "Page.loadEventFired"
                  and m.get("sessionId") == session)
        facts = json.loads(self.send("Runtime.evaluate", {"expression": PAGE_FACTS,
                                                          "returnByValue": True},
                                     session)["result"]["value"])
        time.sleep(0.05)                                  # late console messages
        try:
            self._read(time.monotonic() + 0.05)
        except TimeoutError:
            pass
        return facts, console_errors(self.events[mark:], session)

    def screenshot(self, session: str, path: Path, max_height: int = 6000) -> Path:
        size = self.send("Page.getLayoutMetrics", session=session)["cssContentSize"]
        clip = {"x": 0, "y": 0, "width": size["width"],
                "height": min(size["height"], max_height), "scale": 1}
        data = self.send("Page.captureScreenshot", {"format": "png", "clip": clip,
                                                     "captureBeyondViewport": True},
                         session)["data"]
        path.write_bytes(base64.b64decode(data))
        return path

    def close(self) -> None:
        try:
            self._id += 1
            os.write(self._cmd_w, json.dumps({"id": self._id, "method": "Browser.close"})
                     .encode() + b"\0")
            self.proc.wait(timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait()
        finally:
            os.close(self._cmd_w)
            os.close(self._res_r)


def console_errors(events: list[dict], session: str) -> list[str]:
    out = []
    for e in events:
        if e.get("sessionId") != session:
            continue
        p = e.get("params", {})
        if e["method"] == "Runtime.exceptionThrown":
            out.append("exception: " + json.dumps(p.get("exceptionDetails", {}))[:300])
        elif e["method"] == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
            out.append("console.error: " + json.dumps(p.get("args", []))[:300])
        elif e["method"] == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
            ent = p["entry"]
            out.append(f"{ent.get('source')}: {ent.get('text')} {ent.get('url', '')}")
    return out


def _path(url: str) -> Path:
    return Path(unquote(urlparse(url).path))


def _uncommitted(target: Path) -> bool:
    """The time histories of the main job's simulations (``simulate/*/history.csv``, 9 MB
    for n-four-bar) are written by ``workbench reproduce`` but not committed (.gitignore):
    their links resolve once the main job has run in the checkout."""
    return target.name == "history.csv" and target.parent.parent.name == "simulate"


def crawl(root: Path, shots: Path) -> dict:
    """Open ``root/index.html`` and every page reachable from it; returns
    ``{page: facts}`` and fails on the first problem found (all problems listed)."""
    exe = chromium_executable()
    if exe is None:
        pytest.skip("headless Chromium not found (Debian package `chromium`; .ci/run installs "
                    "it where it can, or set WORKBENCH_CHROMIUM): the browser check of the "
                    "report site is skipped")
    shots.mkdir(parents=True, exist_ok=True)
    profile = shots / "chromium-profile"
    profile.mkdir(exist_ok=True)
    browser = Browser(exe, profile)
    seen, problems, todo = {}, [], deque([(root / "index.html").resolve()])
    try:
        session = browser.open_tab()
        while todo:
            page = todo.popleft()
            if page in seen:
                continue
            facts, errors = browser.visit(session, page.as_uri())
            seen[page] = facts
            name = page.relative_to(root.resolve()).as_posix()
            browser.screenshot(session, shots / (name.replace("/", "__")[:-5] + ".png"))
            problems += [f"{name}: console error: {e}" for e in errors]
            problems += [f"{name}: broken image {i['src']}" for i in facts["images"]
                         if not i["ok"]]
            for ref in facts["resources"]:
                if ref.startswith(("http:", "https:", "//")):
                    problems.append(f"{name}: fetches {ref} from the network")
            for raw in RAW_MARKUP:
                if raw in facts["text"]:
                    problems.append(f"{name}: raw Markdown {raw!r} visible")
            if not facts["nav"]:
                problems.append(f"{name}: no navigation bar")
            for url in facts["links"]:
                if not url.startswith("file:"):
                    continue
                target = _path(url)
                if not target.exists() and not _uncommitted(target):
                    problems.append(f"{name}: broken link {url}")
                elif target.suffix == ".html" and target.is_relative_to(root.resolve()):
                    todo.append(target)
    finally:
        browser.close()
    assert not problems, "\n".join(problems)
    return seen


def test_the_report_site_in_headless_chromium(tmp_path):
    root = tmp_path / "reports"
    pages = make_site(root)
    t0 = time.perf_counter()
    seen = crawl(root, tmp_path / "screenshots")
    # every page of the site was reached from the index
    assert {p.resolve() for p in pages} <= set(seen)
    index = seen[(root / "index.html").resolve()]
    assert "workbench reproduce" in index["text"] and index["tables"] >= 2
    shot = tmp_path / "screenshots" / "index.png"
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 5000
    assert time.perf_counter() - t0 < 60


def test_the_committed_reports_in_headless_chromium(tmp_path):
    if not (REPORTS / "index.html").is_file():
        pytest.skip("reports/index.html not present (written by `workbench reproduce`)")
    if not (REPORTS / "simulate").is_dir():
        pytest.skip("reports/simulate/ not present: the main job `workbench reproduce` has not "
                    "run in this checkout (the index links its simulation results)")
    seen = crawl(REPORTS, tmp_path / "screenshots")
    assert len(seen) >= 2
