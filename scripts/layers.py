#!/usr/bin/env python3
"""Reads the imports of every crate's src/ and says which go against the
layers, and every circle of files (a file that, through any number of
others, imports itself) inside each crate.

The crates are the coarse layers (core ← sources ← actions ← recording,
core ← console, both below the program; a wrong-way import there does
not compile); this also reads the
finer layers inside each crate (app below views, the engine's base below
its answers). Every crate names the modules below it by their own names
(`crate::model` is the core's model everywhere), so a module is named the
same in every crate.

    python3 scripts/layers.py          # the report; exit 1 on a violation

A file imports another when it names that file's module, by any path:
`crate::a::b::x`, `super::b::x`, `self::b`, `use super::{b, c}`, or a child
module by its bare name (`calls::X`); the name is taken to the longest
prefix that is a file. A file naming a module it sits in (`super::x`
where x is its parent's item) is inside that room, not an arrow out of it;
a parent naming its child is an arrow. The circles are the strongly connected components
of that graph (Tarjan), so a circle of any length is found. Between crates
no circle can compile.

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
# own modules are top-level ones). A crate names the crates below it at its
# root (`crate::model`, `crate::sources`): `crate::x` is the crate's own
# module x where it has one, else the layer of that name.
SRCS = [
    ("src", ""),
    ("crates/core/src", ""),
    ("crates/sources/src", "sources"),
    ("crates/actions/src", "actions"),
    ("crates/recording/src", "recording"),
    ("crates/console/src", ""),
    ("crates/agent/src", "agent"),
    ("crates/autopilot/src", "autopilot"),
]

LAYERS = [
    {"model", "text", "limits", "host", "logging"},
    # report: the engine's answers in words (it reads the engine and text
    # alone); the views, the post-mortem and the command line print with it.
    # sim: the seeded simulated cluster (it reads the engine's write-time
    # model for its checkpoints).
    {"engine", "report", "sim"},
    # The messages between the layers (sources → console, console →
    # runner, console → playback): plain data over the model and engine.
    {"protocol"},
    {"sources", "agent"},
    # The guard, its executors and the audit log.
    {"actions"},
    # Recordings hold the source's snapshots and the audit's records.
    {"recording", "postmortem"},
    # The autopilot: policies over the engine's answers, sent through the
    # guard (actions), paged out.
    {"autopilot"},
    {"analyst", "fuzzing"},
    {"app", "columns"},
    {"views"},
    # The program: its command line and settings (resolved from both into
    # the sources', the engine's and the guard's), the console's loop, the
    # commands.
    {"cli", "config", "tui", "output", "action_commands", "recording_commands", "doctor", "main", "lib",
     "autopilot_commands", "autopilot_shadow"},
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
    own = own_modules(src, prefix)
    for m in re.finditer(r"\bcrate::([a-z_]+)(?:::([a-z_]+))?", text):
        segs = [x for x in m.groups() if x]
        out.add(tuple(([prefix] if segs[0] in own else []) + segs))
    for m in re.finditer(r"\bsuper::([a-z_]+)", text):
        out.add(tuple(parent + [m.group(1)]))
    return me, out


def own_modules(src, prefix):
    """The top-level modules a crate has of its own (by their file)."""
    if not prefix:
        return set()
    out = set()
    for name in os.listdir(src):
        if name.endswith(".rs") and name != "lib.rs":
            out.add(name[:-3])
        elif os.path.isdir(os.path.join(src, name)):
            out.add(name)
    return out


def file_modules():
    """Per crate: module path (tuple) → file path."""
    out = {}
    for path, src, prefix in files():
        out.setdefault(src, {})[tuple(module_of(path, src, prefix))] = path
    return out


PATH = r"[a-z_][a-z0-9_]*(?:::[a-z_][a-z0-9_]*)*"


def named_paths(path, src, prefix, mods):
    """Every module path the file names, from the crate's root."""
    me = module_of(path, src, prefix)
    # `super` of a file is its parent module (mod.rs and x.rs alike).
    parent = me[:-1]
    text = open(path, encoding="utf-8").read().split("#[cfg(test)]")[0]
    text = re.sub(r"//[^\n]*", "", text)
    out = []

    def expand(base, rest):
        # `a::{b, c::d}` → a::b, a::c::d (one level of braces).
        m = re.match(r"\{([^{}]*)\}", rest)
        if m:
            for item in m.group(1).split(","):
                item = item.strip().split(" as ")[0].strip()
                if re.fullmatch(PATH, item or "-"):
                    out.append(base + item.split("::"))
        else:
            out.append(base)

    for m in re.finditer(r"\b(crate|super|self)::((?:" + PATH + r"::)*)(" + PATH + r"|\{[^{}]*\})?", text):
        head, mid, tail = m.group(1), m.group(2), m.group(3) or ""
        segs = [x for x in mid.split("::") if x]
        first = (segs or [tail.split("::")[0]])[0]
        own = prefix and (tuple([prefix, first]) in mods or first == prefix)
        root = {"crate": [prefix] if own else [], "super": list(parent), "self": list(me)}[head]
        if tail.startswith("{"):
            expand(root + segs, tail)
        else:
            out.append(root + segs + ([x for x in tail.split("::") if x]))
    # A child module by its bare name: `calls::X`, `use calls::*`.
    for m in re.finditer(r"(?<![:\w])([a-z_][a-z0-9_]*)::", text):
        name = m.group(1)
        if tuple(me + [name]) in mods:
            out.append(me + [name])
    return me, out


def circles():
    """Every circle of files inside each crate, as lists of files."""
    found = []
    by_crate = file_modules()
    for src, mods in by_crate.items():
        graph = {}
        for mod, path in mods.items():
            me, named = named_paths(path, src, [k for s, k in SRCS if os.path.join(ROOT, s) == src][0], mods)
            targets = set()
            for n in named:
                for k in range(len(n), 0, -1):
                    t = tuple(n[:k])
                    if t in mods:
                        # A file's own module and the modules it sits in
                        # are its rooms, not arrows out of it.
                        if t != tuple(me)[: len(t)]:
                            targets.add(t)
                        break
            graph[tuple(me)] = targets
        found += [sorted(mods[m] for m in c) for c in strongly_connected(graph) if len(c) > 1]
    return found


def strongly_connected(graph):
    """Tarjan's algorithm, iterative."""
    index, low, on, stack, out = {}, {}, set(), [], []
    counter = [0]
    for v0 in graph:
        if v0 in index:
            continue
        work = [(v0, iter(graph.get(v0, ())))]
        index[v0] = low[v0] = counter[0]
        counter[0] += 1
        stack.append(v0)
        on.add(v0)
        while work:
            v, it = work[-1]
            advanced = False
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(graph.get(w, ()))))
                    advanced = True
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                out.append(comp)
    return out


def main():
    bad = []
    for f in sorted(files()):
        me, names = imports(*f)
        top = me[0]
        for n in names:
            other = n[0]
            if other not in LEVEL or top not in LEVEL or other == top:
                continue
            if LEVEL[other] > LEVEL[top]:
                bad.append(f"{'/'.join(me)} → {other} (layer {LEVEL[top]} imports layer {LEVEL[other]})")
    circles_found = circles()
    for line in sorted(set(bad)):
        print("against the layers:", line)
    for c in circles_found:
        print(f"circle of {len(c)} files:", ", ".join(os.path.relpath(f, ROOT) for f in c))
    print(f"{len(set(bad))} import(s) against the layers, {len(circles_found)} circle(s) of files")
    return 1 if bad or circles_found else 0


def self_test():
    """The checker on a made-up tree: a circle of three files through a
    grandchild and a sibling, a child using its parent (no arrow), and a
    line of four with no circle."""
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        tree = {
            "lib.rs": "pub mod a; pub mod b; pub mod line;",
            "a/mod.rs": "mod deep; use deep::x;",
            "a/deep.rs": "use crate::b::{y, z};\nfn f() { super::shared(); }",
            "b.rs": "use super::a::q;",
            "line/mod.rs": "use self::one::k;",
            "line/one.rs": "use super::two::k;",
            "line/two.rs": "use crate::line::three::k;",
            "line/three.rs": "// crate::line::one::k in a comment\nfn k() {}",
        }
        for name, text in tree.items():
            os.makedirs(os.path.dirname(os.path.join(d, name)) or d, exist_ok=True)
            with open(os.path.join(d, name), "w", encoding="utf-8") as f:
                f.write(text)
        global SRCS, ROOT
        saved = (SRCS, ROOT)
        SRCS, ROOT = [(d, "")], "/"
        try:
            got = [sorted(os.path.relpath(f, d) for f in c) for c in circles()]
        finally:
            SRCS, ROOT = saved
    want = [["a/deep.rs", "a/mod.rs", "b.rs"]]
    if got != want:
        print("self-test failed: found", got, "wanted", want)
        return 1
    print("self-test: a circle of three found, a line of four and a child using its parent not")
    return 0


if __name__ == "__main__":
    sys.exit(self_test() if sys.argv[1:] == ["--self-test"] else main())
