"""The ``chromium`` fixture: the browser binary for the report tests.

Without one these tests skip on a developer's machine, but fail under CI (``CI=true``): `.ci/run`
installs Chromium, and a skip there would be a test that cannot fail.
"""

from __future__ import annotations

import os

import pytest
from chromium import BINARIES, find_chromium


@pytest.fixture(scope="session")
def chromium() -> str:
    binary = find_chromium()
    if binary is None:
        why = f"no Chromium binary on PATH (looked for {', '.join(BINARIES)})"
        if os.environ.get("CI") == "true":
            pytest.fail(f"{why}; CI must run the report tests (.ci/run installs Debian's chromium)")
        pytest.skip(why)
    return binary
