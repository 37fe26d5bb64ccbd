"""``llmcalc verify --junit FILE``: the checks as JUnit XML, the format CI systems read to show
which test failed (a plain-Python writer, as the JSON, CSV and Markdown ones are)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path


def write_junit(path: Path, records: list[dict]) -> None:
    """``llmcalc verify``'s records as JUnit XML: a test suite per model, a test case per check, a
    failure carrying the analytic and measured figures and their difference, so a CI system shows
    which check failed."""
    suites = ET.Element("testsuites", name="llmcalc verify")
    for r in records:
        checks = r["checks"]
        suite = ET.SubElement(suites, "testsuite", name=r["model"], tests=str(len(checks)),
                              failures=str(sum(not c["ok"] for c in checks)), errors="0", skipped="0")
        where = ", ".join(f"{k} {r[k]}" for k in ("device", "against", "hardware", "seq_len", "batch") if k in r)
        ET.SubElement(ET.SubElement(suite, "properties"), "property", name="workload", value=where)
        for c in checks:
            case = ET.SubElement(suite, "testcase", classname=f"llmcalc.verify.{r['model']}", name=c["name"])
            if not c["ok"]:
                analytic, measured = c["analytic"], c["measured"]
                difference = measured - analytic if isinstance(analytic, int) and isinstance(measured, int) else None
                message = f"analytic {analytic}, measured {measured}" + (
                    "" if difference is None else f", difference {difference}")
                failure = ET.SubElement(case, "failure", message=message, type="mismatch")
                failure.text = message + (f" ({c['note']})" if c.get("note") else "")
    ET.ElementTree(suites).write(path, encoding="utf-8", xml_declaration=True)
