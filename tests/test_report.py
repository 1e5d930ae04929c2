"""Report rounding: medians of counts keep their half, and the percentages beside them agree with what is shown."""

from __future__ import annotations

from rich.console import Console

from gesscale.experiment.html import _num
from gesscale.experiment.paper import reproduction_markdown
from gesscale.metrics import METRIC_KEYS
from gesscale.report import metrics_table

MEDIANS = {"gesscale": {**dict.fromkeys(METRIC_KEYS, 1.0), "reconfigurations": 11.5, "cost": 100.0},
           "thr-nlunaware": {**dict.fromkeys(METRIC_KEYS, 1.0), "reconfigurations": 10.5, "cost": 120.0}}


def test_half_medians_are_shown_with_their_half_and_the_saving_agrees() -> None:
    console = Console(width=300, record=True, file=open("/dev/null", "w"))  # noqa: SIM115
    console.print(metrics_table("t", MEDIANS))
    text = console.export_text()
    assert " 11.5 " in text and " 10.5 " in text
    assert _num("reconfigurations", 11.5) == "11.5" and _num("reconfigurations", 12.0) == "12"
    md = reproduction_markdown(MEDIANS, "synthetic", 2)
    row = next(line for line in md.splitlines() if "vs thr-nlunaware" in line)
    assert "-9.5 %" in row and "16.7 %" in row  # 1 - 11.5/10.5 and 1 - 100/120
