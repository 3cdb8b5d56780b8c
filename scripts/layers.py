#!/usr/bin/env python3
"""Reads the imports of every crate's src/ and says which go against the
layers, and which files import each other (a loop) inside one module.

The crates are the coarse layers (core ← backends ← console ← the
program, a wrong-way import there does not compile); this also reads the
finer layers inside each crate (app below views, the engine's base below
its answers). Every crate names the modules below it by their own names
(`crate::model` is the core's model everywhere), so a module is named the
same in every crate.

    python3 scripts/layers.py          # the report; exit 1 on a violation

The layers, lowest first (a module may import its own layer and below):
see docs/architecture.md. Imports are read as text (`use crate::x`,
`crate::x::` in code, `super::` resolved against the file's path), which is
what a reader sees; `#[cfg(test)]` modules (tests.rs, tests/) are left out.
"""
import os
import re
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
# Each crate's src/, and the module its lib.rs stands for ("" : the crate's
# own modules are top-level ones).
SRCS = [
    ("src", ""),
    ("crates/core/src", ""),
    ("crates/backends/src", ""),
    ("crates/console/src", ""),
    ("crates/agent/src", "agent"),
]

LAYERS = [
    {"model", "text", "limits", "host", "logging"},
    # report: the engine's answers in words (it reads the engine and text
    # alone); the views, the post-mortem and the command line print with it.
    # sim: the seeded simulated cluster (it reads the engine's write-time
    # model for its checkpoints).
    {"engine", "report", "sim"},
    {"sources", "agent"},
    # The guard, its executors and the audit log.
    {"actions"},
    # Recordings hold the source's snapshots and the audit's records.
    {"recording", "postmortem"},
    {"analyst", "fuzzing"},
    {"app", "columns"},
    {"views"},
    # The program: its command line and settings (resolved from both into
    # the sources', the engine's and the guard's), the console's loop, the
    # commands.
    {"cli", "config", "tui", "output", "action_commands", "recording_commands", "main", "lib"},
]
LEVEL = {m: i for i, layer in enumerate(LAYERS) for m in layer}


def module_of(path, src, prefix):
    """`engine/why.rs` → ["engine", "why"]."""
    rel = os.path.relpath(path, src)[:-3].split(os.sep)
    if rel[-1] == "mod":
        rel = rel[:-1]
    if prefix:
        rel = [prefix] + ([] if rel == ["lib"] else rel)
    return rel


def files():
    for src, prefix in SRCS:
        src = os.path.join(ROOT, src)
        for root, dirs, names in os.walk(src):
            dirs[:] = [d for d in dirs if d != "tests"]
            for n in names:
                if n.endswith(".rs") and n != "tests.rs":
                    yield os.path.join(root, n), src, prefix


def imports(path, src, prefix):
    """The module paths a file names: crate::a::b, super::c (resolved)."""
    me = module_of(path, src, prefix)
    # A file's `super` is its parent module; mod.rs/x.rs with children alike.
    parent = me[:-1]
    text = open(path, encoding="utf-8").read()
    text = text.split("#[cfg(test)]")[0]
    out = set()
    for m in re.finditer(r"\bcrate::([a-z_]+)(?:::([a-z_]+))?", text):
        out.add(tuple(x for x in m.groups() if x))
    for m in re.finditer(r"\bsuper::([a-z_]+)", text):
        out.add(tuple(parent + [m.group(1)]))
    return me, out


def main():
    bad, edges = [], {}
    for f in sorted(files()):
        me, names = imports(*f)
        top = me[0]
        for n in names:
            other = n[0]
            if other == top and len(me) > 1 and len(n) > 1:
                edges.setdefault(tuple(me[:2]), set()).add(tuple(n[:2]))
            if other not in LEVEL or top not in LEVEL or other == top:
                continue
            if LEVEL[other] > LEVEL[top]:
                bad.append(f"{'/'.join(me)} → {other} (layer {LEVEL[top]} imports layer {LEVEL[other]})")
    loops = sorted(
        f"{'/'.join(a)} ↔ {'/'.join(b)}"
        for a, bs in edges.items()
        for b in bs
        if a < b and a in edges.get(b, set())
    )
    for line in sorted(set(bad)):
        print("against the layers:", line)
    for line in loops:
        print("loop:", line)
    print(f"{len(set(bad))} import(s) against the layers, {len(loops)} loop(s)")
    return 1 if bad or loops else 0


if __name__ == "__main__":
    sys.exit(main())
