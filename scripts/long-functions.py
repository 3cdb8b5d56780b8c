#!/usr/bin/env python3
"""Lists the functions of every crate's src/ (tests left out) longer than a limit.

    python3 scripts/long-functions.py [LIMIT]   # default 120 lines; exit 1 if any

A function is read from its `fn` line to the line where its braces close
(strings and comments are not parsed: good enough for rustfmt'd code).
"""
import os
import re
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
SRCS = [os.path.join(ROOT, d) for d in ("src", "crates/core/src", "crates/sources/src", "crates/actions/src", "crates/recording/src", "crates/console/src", "crates/agent/src")]
FN = re.compile(r"^\s*(pub(\([^)]*\))?\s+)?(async\s+)?(const\s+)?fn\s+([a-z_0-9]+)")


def code_of(line):
    """A line without its string and char literals and comments, so that
    braces in text (`"{g}"`, `br#"{"kind"…"#`, `'{'`) are not counted."""
    line = re.sub(r'b?r(#+)".*?"\1', '""', line)
    line = re.sub(r'b?"(\\.|[^"\\])*"', '""', line)
    line = re.sub(r"'(\\.|[^'\\])'", "' '", line)
    return line.split("//")[0]


def long_functions(limit):
    for root, dirs, names in (w for src in SRCS for w in os.walk(src)):
        dirs[:] = [d for d in dirs if d != "tests"]
        for n in sorted(names):
            if not n.endswith(".rs") or n == "tests.rs":
                continue
            path = os.path.join(root, n)
            lines = [
                code_of(l)
                for l in open(path, encoding="utf-8").read().split("#[cfg(test)]")[0].splitlines()
            ]
            i = 0
            while i < len(lines):
                m = FN.match(lines[i])
                if not m:
                    i += 1
                    continue
                depth, opened, j = 0, False, i
                while j < len(lines):
                    depth += lines[j].count("{") - lines[j].count("}")
                    opened = opened or "{" in lines[j]
                    if opened and depth <= 0:
                        break
                    if not opened and lines[j].rstrip().endswith(";"):
                        break
                    j += 1
                size = j - i + 1
                if size > limit:
                    yield os.path.relpath(path, ROOT), i + 1, m.group(5), size
                i = j + 1 if opened else i + 1


def main():
    limit = int(sys.argv[1]) if len(sys.argv) > 1 else 120
    found = sorted(long_functions(limit), key=lambda f: -f[3])
    for path, line, name, size in found:
        print(f"{size:5} lines  {path}:{line}  {name}")
    print(f"{len(found)} function(s) over {limit} lines")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
