"""Render an HTML file in headless Chromium and report what the page did (a test helper).

Chromium is driven over the DevTools protocol on ``--remote-debugging-pipe``: JSON messages
separated by NUL bytes, commands written to the browser's fd 3, replies and events read from
its fd 4. No package beyond the standard library is needed.

Every request the page makes is recorded from ``Network.requestWillBeSent`` of the page's own
session, so a report that is not self-contained (a CDN script, a stylesheet, an ``<img>`` that
points to a file next to it) shows up in ``Rendered.requests``, whether or not it succeeded.
"""

from __future__ import annotations

import base64
import fcntl
import json
import math
import os
import select
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

# The flags the issue prescribes, then what the pipe and a throwaway profile need.
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
         "--disable-background-networking")
EXTRA_FLAGS = ("--remote-debugging-pipe", "--hide-scrollbars", "--mute-audio",
               "--no-default-browser-check")
BINARIES = ("chromium", "chromium-browser", "google-chrome")
# In-memory URLs: not network requests (a self-contained report embeds its figures as data:).
LOCAL_SCHEMES = ("data:", "blob:")


class BrowserError(RuntimeError):
    """Chromium died, timed out or refused a command; the message ends with its stderr tail."""


@dataclass(frozen=True)
class Section:
    id: str
    title: str | None  # text of the section's first <h2>; None without one


@dataclass(frozen=True)
class Image:
    src: str  # data: URLs cut to 60 characters
    decoded: bool  # complete and naturalWidth > 0: the browser could decode it


@dataclass(frozen=True)
class Figure:
    id: str
    svg: bool  # holds an inline <svg> with a non-empty layout box
    images: tuple[Image, ...]

    @property
    def rendered(self) -> bool:
        return self.svg or (bool(self.images) and all(i.decoded for i in self.images))


@dataclass(frozen=True)
class Request:
    url: str
    resource_type: str  # DevTools' type: Image, Stylesheet, Script, Font, Fetch, ...


@dataclass(frozen=True)
class FailedRequest:
    url: str
    resource_type: str
    error: str  # e.g. net::ERR_NAME_NOT_RESOLVED, net::ERR_FILE_NOT_FOUND


@dataclass(frozen=True)
class Rendered:
    sections: list[Section]  # document order
    figures: list[Figure]  # document order
    requests: list[Request]  # all but the file's own navigation and data:/blob: URLs
    failed_requests: list[FailedRequest]
    console_errors: list[str]
    screenshot: Path  # PNG of the full page, ``width`` CSS pixels wide at scale 1
    page_height: int  # CSS pixels, the screenshot's height: the document's, at least the viewport's (900)
    probe: object = None  # what the caller's ``probe`` expression returned (JSON values), None without one


def find_chromium() -> str | None:
    return next(filter(None, map(shutil.which, BINARIES)), None)


# Runs in the page after the load event.
_COLLECT_JS = """(() => {
  const sections = [...document.querySelectorAll('section')].map(s => {
    const h2 = s.querySelector('h2');
    return {id: s.id, title: h2 ? h2.textContent.trim() : null};
  });
  const figures = [...document.querySelectorAll('figure')].map(f => ({
    id: f.id,
    svg: [...f.querySelectorAll('svg')].some(s => {
      const r = s.getBoundingClientRect(); return r.width > 0 && r.height > 0; }),
    images: [...f.querySelectorAll('img')].map(i => ({
      src: i.getAttribute('src') || '', decoded: i.complete && i.naturalWidth > 0})),
  }));
  return {sections, figures};
})()"""


class _Pipe:
    """The DevTools connection: commands out, replies back; events are kept in ``events``."""

    def __init__(self, to_browser: int, from_browser: int, deadline: float, stderr_tail):
        self._out, self._in = to_browser, from_browser
        self._deadline, self._tail = deadline, stderr_tail
        self._buffer, self._next_id = b"", 0
        self.events: list[dict] = []

    def _fail(self, why: str):
        raise BrowserError(f"{why}\n--- chromium stderr (tail) ---\n{self._tail()}")

    def _read_message(self, until: float) -> dict | None:
        while b"\0" not in self._buffer:
            left = min(until, self._deadline) - time.monotonic()
            if left <= 0:
                if until < self._deadline:
                    return None
                self._fail("timed out waiting for Chromium")
            if not select.select([self._in], [], [], left)[0]:
                continue
            chunk = os.read(self._in, 1 << 20)
            if not chunk:
                self._fail("Chromium closed the DevTools pipe (it exited or crashed)")
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)

    def send(self, method: str, session: str | None = None, **params) -> dict:
        self._next_id += 1
        message = {"id": self._next_id, "method": method, "params": params}
        if session:
            message["sessionId"] = session
        data = json.dumps(message).encode() + b"\0"
        try:
            while data:
                data = data[os.write(self._out, data):]
        except BrokenPipeError:
            self._fail(f"Chromium closed the DevTools pipe while sending {method}")
        while True:
            reply = self._read_message(math.inf)
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    self._fail(f"{method} failed: {reply['error']}")
                return reply["result"]
            if "method" in reply:
                self.events.append(reply)

    def wait_for(self, predicate, until: float = math.inf, start: int = 0) -> int | None:
        """Index in ``events`` of the first event from ``start`` on (seen already or arriving
        before ``until``) that ``predicate`` accepts; None if none came in time."""
        while True:
            for index in range(start, len(self.events)):
                if predicate(self.events[index]):
                    return index
            start = len(self.events)
            event = self._read_message(until)
            if event is None:
                return None
            if "method" in event:
                self.events.append(event)


def render(html: Path, screenshot: Path, *, width: int = 1400, timeout: float = 60,
           binary: str | None = None, probe: str | None = None) -> Rendered:
    """Load ``html`` from disk, wait for its load event, collect what it shows and did, and
    evaluate ``probe`` (a JavaScript expression, e.g. layout measurements) in the page.

    Raises BrowserError if no browser is found, it dies, the file cannot be opened, or the whole
    run takes longer than ``timeout`` seconds. The browser and its profile are gone on return.
    """
    binary = binary or find_chromium()
    if binary is None:
        raise BrowserError(f"no Chromium found (looked for {', '.join(BINARIES)})")
    url = Path(html).resolve().as_uri()
    deadline = time.monotonic() + timeout
    with tempfile.TemporaryDirectory(prefix="asicsim-chromium-", ignore_cleanup_errors=True) as tmp:
        stderr_path = Path(tmp, "stderr.log")

        def stderr_tail() -> str:
            try:
                return "\n".join(stderr_path.read_text(errors="replace").splitlines()[-30:])
            except OSError:
                return "(no stderr)"

        browser_reads, we_write = os.pipe()
        we_read, browser_writes = os.pipe()
        # bash moves the browser's ends to fds 3 and 4 and execs Chromium (preexec_fn is unsafe
        # with threads, and pytest has JAX's). They go above 9 first, so no move clobbers another.
        browser_reads, browser_writes = _above_9(browser_reads), _above_9(browser_writes)
        shell = (f'exec "$0" "$@" 3<&{browser_reads} 4>&{browser_writes} '
                 f'{browser_reads}<&- {browser_writes}>&-')
        args = [*FLAGS, *EXTRA_FLAGS, f"--user-data-dir={tmp}/profile", "about:blank"]
        try:
            with open(stderr_path, "wb") as stderr:
                # Its own session, so that killing the group ends every Chromium process.
                proc = subprocess.Popen(["bash", "-c", shell, binary, *args],
                                        stdin=subprocess.DEVNULL, stdout=stderr, stderr=stderr,
                                        pass_fds=(browser_reads, browser_writes),
                                        start_new_session=True)
        except BaseException:
            for fd in (browser_reads, we_write, we_read, browser_writes):
                os.close(fd)
            raise
        os.close(browser_reads)
        os.close(browser_writes)
        try:
            pipe = _Pipe(we_write, we_read, deadline, stderr_tail)
            return _drive(pipe, url, Path(screenshot), width, probe)
        finally:
            _stop(proc, pipe_fds=(we_write, we_read))


def _drive(pipe: _Pipe, url: str, screenshot: Path, width: int, probe: str | None = None) -> Rendered:
    target = pipe.send("Target.createTarget", url="about:blank")["targetId"]
    session = pipe.send("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
    for domain in ("Network", "Page", "Runtime", "Log"):
        pipe.send(f"{domain}.enable", session)
    pipe.send("Emulation.setDeviceMetricsOverride", session, width=width, height=900,
              deviceScaleFactor=1, mobile=False)

    def ours(event: dict) -> bool:
        return event.get("sessionId") == session

    navigation = pipe.send("Page.navigate", session, url=url)
    if navigation.get("errorText"):
        raise BrowserError(f"could not open {url}: {navigation['errorText']}")
    # The load event after our document is committed (not a late one of about:blank).
    committed = pipe.wait_for(lambda e: ours(e) and e["method"] == "Page.frameNavigated"
                              and e["params"]["frame"]["loaderId"] == navigation["loaderId"])
    pipe.wait_for(lambda e: ours(e) and e["method"] == "Page.loadEventFired", start=committed)

    def network(name: str) -> list[dict]:
        return [e["params"] for e in pipe.events if ours(e) and e["method"] == f"Network.{name}"]

    # Requests may still be in flight after the load event (e.g. started by a script):
    # wait up to two seconds for all of them to end, so they are at least recorded as sent.
    def idle(_event=None) -> bool:
        ended = {p["requestId"] for p in network("loadingFinished") + network("loadingFailed")}
        return all(p["requestId"] in ended for p in network("requestWillBeSent")
                   if not p["request"]["url"].startswith(LOCAL_SCHEMES))
    if not idle():
        pipe.wait_for(idle, until=time.monotonic() + 2)

    page = pipe.send("Runtime.evaluate", session, expression=_COLLECT_JS,
                     returnByValue=True)["result"]["value"]
    probed = None
    if probe:  # before the screenshot, which may resize the viewport to the whole page
        reply = pipe.send("Runtime.evaluate", session, expression=probe, returnByValue=True)
        if "exceptionDetails" in reply:
            raise BrowserError(f"probe failed: {reply['exceptionDetails'].get('text')}")
        probed = reply["result"].get("value")
    size = pipe.send("Page.getLayoutMetrics", session)["cssContentSize"]
    height = math.ceil(size["height"])
    shot = pipe.send("Page.captureScreenshot", session, format="png", captureBeyondViewport=True,
                     clip={"x": 0, "y": 0, "width": width, "height": height, "scale": 1})
    screenshot.write_bytes(base64.b64decode(shot["data"]))

    sent = {}  # requestId -> the request; the main document's requestId is its loaderId
    requests = []
    for p in network("requestWillBeSent"):
        if p["requestId"] == navigation["loaderId"] or p["request"]["url"].startswith(LOCAL_SCHEMES):
            continue
        sent[p["requestId"]] = Request(p["request"]["url"], p.get("type", "Other"))
        requests.append(sent[p["requestId"]])
    failed = [FailedRequest(sent[p["requestId"]].url, p.get("type", "Other"), p["errorText"])
              for p in network("loadingFailed") if p["requestId"] in sent]
    return Rendered(
        sections=[Section(s["id"], s["title"]) for s in page["sections"]],
        figures=[Figure(f["id"], f["svg"], tuple(Image(i["src"][:60], i["decoded"])
                                                for i in f["images"]))
                 for f in page["figures"]],
        requests=requests, failed_requests=failed,
        console_errors=_console_errors(p for p in pipe.events if ours(p)),
        screenshot=screenshot, page_height=height, probe=probed)


def _console_errors(events) -> list[str]:
    errors = []
    for event in events:
        method, p = event["method"], event.get("params", {})
        if method == "Runtime.consoleAPICalled" and p["type"] in ("error", "assert"):
            errors.append(" ".join(str(a.get("value", a.get("description", ""))) for a in p["args"]))
        elif method == "Runtime.exceptionThrown":
            details = p["exceptionDetails"]
            errors.append(details.get("exception", {}).get("description") or details["text"])
        elif method == "Log.entryAdded" and p["entry"]["level"] == "error":
            errors.append(f"{p['entry']['text']} {p['entry'].get('url', '')}".strip())
    return errors


def _above_9(fd: int) -> int:
    moved = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10)
    os.close(fd)
    return moved


def _stop(proc: subprocess.Popen, pipe_fds: tuple[int, int]) -> None:
    """Kill Chromium and every process it started (its own session), then close our pipe ends."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()
    for fd in pipe_fds:
        os.close(fd)
    # Let the renderer and zygote processes die before the profile directory is removed (dead
    # ones linger as zombies until init reaps them, which can take a second: don't wait for that).
    end = time.monotonic() + 5
    while _live_members(proc.pid) and time.monotonic() < end:
        time.sleep(0.02)


def _live_members(group: int) -> bool:
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[0] != "Z" and int(fields[2]) == group:
            return True
    return False
