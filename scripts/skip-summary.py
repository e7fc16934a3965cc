#!/usr/bin/env python3
"""Lists every skipped test with its reason, from JUnit reports: ctest's (--output-junit, with the
passed tests' output kept: a gtest binary run as one ctest test, such as an mpirun job, skips
inside a passed test) and pytest's (--junitxml). Usage:

    skip-summary.py LABEL=REPORT.xml ...

prints "Skipped: N" and one line per skip, "LABEL: TEST — REASON". Reports that do not exist
(a stage that did not run) are left out."""

from __future__ import annotations

import re
import sys
import xml.etree.ElementTree as ET

COLOR = re.compile(r"(\x1b|\[NON-XML-CHAR-0x1B\])\[[0-9;]*m")
RUN = re.compile(r"^\[ RUN      \] (\S+)")
SKIPPED = re.compile(r"^\[  SKIPPED \] (\S+) \(")
SKIP_AT = re.compile(r": Skipped$")


def gtest_skips(output: str) -> list[tuple[str, str]]:
    """(test, reason) for each "[  SKIPPED ]" test in gtest's `output`: the reason is what
    follows its "file:line: Skipped" line."""
    skips, reason, running = [], [], None
    for line in COLOR.sub("", output).splitlines():
        if match := RUN.match(line):
            running, reason = match.group(1), None
        elif running and reason is None and SKIP_AT.search(line):
            reason = []
        elif (match := SKIPPED.match(line)) and match.group(1) == running:
            skips.append((running, " ".join(reason or []).strip() or "(no reason given)"))
            running = None
        elif reason is not None and running:
            reason.append(line.strip())
    return skips


def ctest_skip_reason(output: str) -> str:
    """A ctest-level skip (a script's exit 77): its line that says "skipped", else its last."""
    lines = [line.strip() for line in COLOR.sub("", output).splitlines() if line.strip()]
    said = [line for line in lines if line.lower().startswith("skipped")]
    return (said or lines or ["(no output)"])[-1]


def skips_in(path: str) -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []
    for case in ET.parse(path).getroot().iter("testcase"):
        name = case.get("name", "?")
        if case.get("classname") and case.get("classname") != name and "::" not in name:
            # pytest: classname is the module (dotted), name the test.
            name = f"{case.get('classname')}::{name}"
        output = case.findtext("system-out") or ""
        inner = gtest_skips(output)
        for test, reason in dict.fromkeys(inner):  # each rank of a job prints its own
            found.append((name if test == name else f"{name} {test}", reason))
        skipped = case.find("skipped")
        if not inner and (skipped is not None or case.get("status") == "notrun"):
            message = skipped.get("message", "") if skipped is not None else ""
            found.append((name, message.strip() if message.strip() and message != "skipped"
                          else ctest_skip_reason(output)))
    return found


def main(arguments: list[str]) -> int:
    lines = []
    for argument in arguments:
        label, _, path = argument.partition("=")
        try:
            lines += [f"  {label}: {test} — {reason}" for test, reason in skips_in(path)]
        except FileNotFoundError:
            continue
    print(f"Skipped: {len(lines)}")
    print("\n".join(lines)) if lines else None
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
