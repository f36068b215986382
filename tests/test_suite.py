"""The test run itself: its last line names the groups of tests it skipped and how to run them."""
from __future__ import annotations

import os
import subprocess
import sys

from conftest import REPO


def _pytest(*args: str, **env: str) -> list[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("FACTWEAVE_REQUIRE_")}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args], cwd=REPO,
                          capture_output=True, text=True, timeout=600, env={**clean, **env}, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout.strip().splitlines()


def test_the_last_line_names_the_skipped_groups_and_how_to_run_them():
    lines = _pytest("tests/test_ui_browser.py", "-k", "binds_loopback", FACTWEAVE_CHROMIUM="/no/such/chromium")
    assert "1 skipped" in lines[-2]
    assert lines[-1].startswith("Skipped groups: 1 browser test(s): install Chromium (as root: apt-get install "
                                "chromium;"), lines[-1]


def test_the_last_line_says_none_when_every_test_ran():
    lines = _pytest("tests/test_metrics.py", "-k", "exact")
    assert "passed" in lines[-2] and lines[-1] == "Skipped groups: none (every test ran)."
