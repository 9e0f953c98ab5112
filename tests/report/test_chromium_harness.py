"""The headless-Chromium harness (chromium.py) on small pages written here: it finds sections and
figures, takes a real full-page screenshot, and reports every request a page makes (so the
report test's "no network request" check can fail)."""

from __future__ import annotations

import struct
import zlib
from base64 import b64encode
from pathlib import Path

import pytest
from chromium import BrowserError, render

RED, BLUE = (255, 0, 0), (0, 0, 255)


def png(width: int, height: int, pixel) -> bytes:
    """An 8-bit RGB PNG; ``pixel(x, y)`` gives the colour."""
    rows = b"".join(b"\0" + bytes(c for x in range(width) for c in pixel(x, y))
                    for y in range(height))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))


def decode_png(data: bytes) -> tuple[int, int, list[bytes]]:
    """Width, height and unfiltered rows of an 8-bit RGB(A), non-interlaced PNG."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    chunks, at = {}, 8
    while at < len(data):
        (length,), kind = struct.unpack(">I", data[at:at + 4]), data[at + 4:at + 8]
        chunks[kind] = chunks.get(kind, b"") + data[at + 8:at + 8 + length]
        at += 12 + length
    width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", chunks[b"IHDR"])
    assert (depth, interlace) == (8, 0) and colour in (2, 6)
    bpp = 3 if colour == 2 else 4
    raw, stride, rows, prev = zlib.decompress(chunks[b"IDAT"]), width * bpp, [], bytes(width * bpp)
    for y in range(height):
        kind, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], prev[i - bpp] if i >= bpp else 0
            if kind == 1:
                line[i] = (line[i] + a) & 255
            elif kind == 2:
                line[i] = (line[i] + b) & 255
            elif kind == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif kind == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line))
        prev = line
    return width, height, [bytes(c for i, c in enumerate(r) if i % bpp < 3) for r in rows]


def count_colour(rows: list[bytes], rgb: tuple[int, int, int]) -> int:
    return sum(row[i:i + 3] == bytes(rgb) for row in rows for i in range(0, len(row), 3))


def page(body: str, head: str = "") -> str:
    return f'<!doctype html><html><head><meta charset="utf-8"><title>t</title>{head}</head><body>{body}</body></html>'


def test_self_contained_page(chromium, tmp_path):
    # A blue 4x3 PNG with one red pixel, shown 80x60 with crisp scaling.
    blue_png = png(4, 3, lambda x, y: RED if (x, y) == (0, 0) else BLUE)
    html = tmp_path / "report.html"
    html.write_text(page(
        '<section id="summary"><h2>Summary</h2><figure id="fig-svg">'
        '<svg width="120" height="40"><rect width="120" height="40" fill="rgb(255,0,0)"/></svg>'
        '<figcaption>svg</figcaption></figure></section>'
        '<section id="energy"><h2>Energy per MAC</h2><figure id="fig-png">'
        f'<img style="width:80px;height:60px;image-rendering:pixelated" '
        f'src="data:image/png;base64,{b64encode(blue_png).decode()}"></figure></section>'))
    out = render(html, tmp_path / "shot.png", width=400, timeout=30, binary=chromium)

    assert [(s.id, s.title) for s in out.sections] == [("summary", "Summary"), ("energy", "Energy per MAC")]
    assert [(f.id, f.svg, [i.decoded for i in f.images]) for f in out.figures] == [
        ("fig-svg", True, []), ("fig-png", False, [True])]
    assert all(f.rendered for f in out.figures)
    assert out.requests == [] and out.failed_requests == [] and out.console_errors == []

    width, height, rows = decode_png(out.screenshot.read_bytes())
    assert (width, height) == (400, out.page_height)
    assert len({row[i:i + 3] for row in rows for i in range(0, len(row), 3)}) > 1, "flat screenshot"
    # Both figures are painted: the SVG's red rectangle and the PNG's blue pixels.
    assert count_colour(rows, RED) >= 120 * 40
    assert count_colour(rows, BLUE) >= 80 * 60 * 11 // 12 - 100


def test_full_page_screenshot_beyond_viewport(chromium, tmp_path):
    html = tmp_path / "long.html"
    html.write_text(page('<div style="height:2500px"></div>'
                         '<section id="end"><h2>End</h2></section>'))
    out = render(html, tmp_path / "shot.png", width=300, timeout=30, binary=chromium)
    assert out.page_height > 2500
    assert struct.unpack(">II", out.screenshot.read_bytes()[16:24]) == (300, out.page_height)
    assert [s.id for s in out.sections] == ["end"]


def test_external_and_relative_requests_are_reported(chromium, tmp_path):
    html = tmp_path / "leaky.html"
    html.write_text(page(
        '<section id="s"><h2>S</h2>'
        '<figure id="remote"><img src="http://example.invalid/x.png"></figure>'
        '<figure id="relative"><img src="missing.png"></figure>'
        '<figure id="broken"><img src="data:image/png;base64,AAAA"></figure></section>',
        head='<link rel="stylesheet" href="https://cdn.example.invalid/a.css">'))
    out = render(html, tmp_path / "shot.png", width=400, timeout=30, binary=chromium)

    assert sorted((r.url, r.resource_type) for r in out.requests) == sorted([
        ("http://example.invalid/x.png", "Image"),
        ("https://cdn.example.invalid/a.css", "Stylesheet"),
        ((tmp_path / "missing.png").as_uri(), "Image")])
    # Nothing is reachable from here, so all three fail; the relative one for want of the file.
    assert {r.url for r in out.failed_requests} == {r.url for r in out.requests}
    assert {f.id: f.rendered for f in out.figures} == {"remote": False, "relative": False, "broken": False}
    assert all(not i.decoded for f in out.figures for i in f.images)
    assert any("missing.png" in e for e in out.console_errors)


def test_console_errors_and_script_requests(chromium, tmp_path):
    html = tmp_path / "script.html"
    html.write_text(page('<script>console.error("boom"); fetch("https://api.example.invalid/q")'
                         '.catch(() => {}); undefinedFunction();</script>'))
    out = render(html, tmp_path / "shot.png", width=200, timeout=30, binary=chromium)
    assert ("https://api.example.invalid/q", "Fetch") in [(r.url, r.resource_type) for r in out.requests]
    assert "boom" in out.console_errors
    assert any("undefinedFunction" in e for e in out.console_errors)


def test_missing_file_is_an_error(chromium, tmp_path):
    with pytest.raises(BrowserError, match="could not open"):
        render(tmp_path / "absent.html", tmp_path / "shot.png", timeout=30, binary=chromium)


def fake_browser(tmp_path, script: str) -> str:
    path = tmp_path / "fake-chromium"
    path.write_text(f"#!/bin/sh\n{script}\n")
    path.chmod(0o755)
    return str(path)


def test_a_browser_that_dies_is_reported_with_its_stderr(tmp_path):
    binary = fake_browser(tmp_path, 'echo "fake crash: no display" >&2; exit 3')
    with pytest.raises(BrowserError, match=r"(?s)closed the DevTools pipe.*fake crash: no display"):
        render(tmp_path / "x.html", tmp_path / "shot.png", timeout=10, binary=binary)


def test_a_browser_that_hangs_times_out_and_is_killed(tmp_path):
    pid_file = tmp_path / "pid"
    binary = fake_browser(tmp_path, f"echo $$ > {pid_file}; exec sleep 60")
    with pytest.raises(BrowserError, match="timed out"):
        render(tmp_path / "x.html", tmp_path / "shot.png", timeout=0.5, binary=binary)
    stat = Path(f"/proc/{pid_file.read_text().strip()}/stat")
    assert not stat.exists() or stat.read_text().rsplit(")", 1)[1].split()[0] == "Z"
