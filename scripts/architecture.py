#!/usr/bin/env python3
"""Checks the shape of the source tree that issue 24 asks for, so it stays:

* no import circle between the top-level modules of any crate (a module
  `a` depends on `b` when a file under `a` names `crate::b`, or `super::b`
  from a direct child of the crate root);
* no file in crates/stratakv/src over 600 lines outside its tests (a
  trailing `#[cfg(test)] mod tests { ... }` does not count);
* crates/stratakv/src/db/ under 2,500 lines;
* nothing in db/ (tests aside) names a level-0 kind: the matrix, the
  SSTable level 0, or L0Kind.

Standard library only; exits non-zero with a list of what is wrong.
"""
import os
import re
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
CRATES = os.path.join(ROOT, "crates")

USE = re.compile(r"\bcrate::([a-z_][a-z0-9_]*)")
BRACED = re.compile(r"\buse crate::\{([^}]*)\}", re.S)


def rust_files(src):
    for dirpath, _, names in os.walk(src):
        for n in names:
            if n.endswith(".rs"):
                yield os.path.join(dirpath, n)


def top_module(src, path):
    rel = os.path.relpath(path, src).replace(os.sep, "/")
    first = rel.split("/")[0]
    if first in ("lib.rs", "main.rs"):
        return None
    return first[:-3] if first.endswith(".rs") else first


def strip_comments(text):
    text = re.sub(r"//[^\n]*", "", text)
    return re.sub(r"/\*.*?\*/", "", text, flags=re.S)


def non_test_code(text):
    """The text before the file's test module (or all of it)."""
    m = re.search(r"^#\[cfg\(test\)\]\s*\n\s*(pub(\(crate\))? )?mod \w+\s*(\{|;)", text, re.M)
    return text[: m.start()] if m else text


def cycles(graph):
    """Every strongly connected component with more than one node."""
    index, low, on, stack, out = {}, {}, set(), [], []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in list(graph):
        if v not in index:
            visit(v)
    return out


def check_crate(crate, problems):
    src = os.path.join(CRATES, crate, "src")
    if not os.path.isdir(src):
        return
    modules = set()
    for path in rust_files(src):
        m = top_module(src, path)
        if m:
            modules.add(m)
    graph = {m: set() for m in modules}
    edges = {}
    for path in rust_files(src):
        a = top_module(src, path)
        if a is None:
            continue
        code = strip_comments(non_test_code(open(path, encoding="utf-8").read()))
        names = set(USE.findall(code))
        for group in BRACED.findall(code):
            names.update(re.findall(r"(?:^|,)\s*([a-z_][a-z0-9_]*)", group))
        # `super::x` from a direct child of the crate root names a sibling.
        rel = os.path.relpath(path, src).replace(os.sep, "/")
        if rel.count("/") == 0 or (rel.count("/") == 1 and rel.endswith("/mod.rs")):
            names.update(re.findall(r"\bsuper::([a-z_][a-z0-9_]*)", code))
        for b in names:
            if b in modules and b != a:
                graph[a].add(b)
                edges.setdefault((a, b), rel)
    for comp in cycles(graph):
        where = [f"{a} -> {b} ({edges[(a, b)]})" for a in comp for b in comp if (a, b) in edges]
        problems.append(f"{crate}: import circle among {', '.join(comp)}: " + "; ".join(where))


def main():
    problems = []
    for crate in sorted(os.listdir(CRATES)):
        check_crate(crate, problems)
    src = os.path.join(CRATES, "stratakv", "src")
    db_lines = 0
    for path in rust_files(src):
        text = open(path, encoding="utf-8").read()
        rel = os.path.relpath(path, src).replace(os.sep, "/")
        is_test_file = rel.endswith("/tests.rs") or rel == "test_util.rs" or "/tests/" in rel
        code = non_test_code(text)
        n = code.count("\n")
        if not is_test_file and n > 600:
            problems.append(f"{rel}: {n} lines outside tests (limit 600)")
        if rel.startswith("db/"):
            db_lines += text.count("\n")
            if not is_test_file:
                for i, line in enumerate(code.split("\n"), 1):
                    if re.search(r"matrix|Matrix|sstable_l0|L0Kind|TablesL0", line):
                        problems.append(f"{rel}:{i}: db/ names a level-0 kind: {line.strip()}")
    if db_lines >= 2500:
        problems.append(f"db/: {db_lines} lines (limit 2,500)")
    for p in problems:
        print(p)
    print(f"architecture: db/ {db_lines} lines; {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
