"""report.html opened in a real browser (headless Chromium, Debian's package): every figure loads, tables are there.

A copy of the report gets a small script that, once the page has loaded, writes into the DOM how many images
decoded (naturalWidth > 0) and which tables exist; `chromium --dump-dom` prints that DOM. Skipped, saying why, only
when no chromium can be found (scripts/bootstrap.sh installs it).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

CHECK = """<script>
window.addEventListener('load', () => {
  const imgs = [...document.images];
  const ok = imgs.filter(i => i.complete && i.naturalWidth > 0).length;
  const tables = [...document.querySelectorAll('table[data-table]')].map(t => t.dataset.table).join(',');
  const out = document.createElement('pre');
  out.id = 'browser-check';
  out.textContent = `images=${ok}/${imgs.length} tables=${tables}`;
  document.body.appendChild(out);
});
</script>"""


def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def _run(browser: str, profile: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                           f"--user-data-dir={profile}", "--virtual-time-budget=10000", *args],
                          capture_output=True, text=True, timeout=120)


@pytest.mark.skipif(_chromium() is None, reason="chromium not installed (scripts/bootstrap.sh installs it)")
def test_report_renders_with_every_figure_and_table(bundle: Path, tmp_path: Path) -> None:
    browser = _chromium()
    assert browser is not None
    report = bundle / "report.html"
    text = report.read_text()
    assert "http://" not in text and "https://" not in text  # self-contained: nothing to fetch
    checked = tmp_path / "checked.html"
    checked.write_text(text.replace("</body>", CHECK + "</body>"))
    r = _run(browser, tmp_path / "profile", "--dump-dom", checked.as_uri())
    found = re.search(r'<pre id="browser-check">images=(\d+)/(\d+) tables=([\w,]*)</pre>', r.stdout)
    assert found, r.stderr[-2000:]
    loaded, total, tables = int(found[1]), int(found[2]), found[3].split(",")
    assert total == 2 and loaded == total  # figure7 and model-vs-observed, both decoded
    assert {"metrics", "table3", "model"} <= set(tables)
    shot = tmp_path / "report.png"
    s = _run(browser, tmp_path / "profile", f"--screenshot={shot}", "--window-size=1280,2600", report.as_uri())
    assert shot.is_file() and shot.stat().st_size > 10_000, s.stderr[-2000:]
