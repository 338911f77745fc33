#!/usr/bin/env python3
"""Checks the shape of the source tree that issue 24 asks for, so it stays:

* no import circle among the child modules of any module of any crate
  (crates/*/src), at every level of the module tree (the rule below);
* no file in crates/stratakv/src over 600 lines outside its tests (a
  trailing `#[cfg(test)] mod tests { ... }` does not count);
* crates/stratakv/src/db/ under 2,500 lines;
* nothing in db/ (tests aside) names a level-0 kind: the matrix, the
  SSTable level 0, or L0Kind.

Import circles
--------------
Modules come from the file system. In a directory D, each `x.rs` (but
mod.rs, lib.rs, main.rs) and each subdirectory `x/` that holds a mod.rs or
sits next to an `x.rs` (the 2018 layout) is a child module `x` of D's
module. A file's module path: lib.rs and main.rs are [] (the crate root),
cmd/mod.rs is [cmd], cmd/script/run.rs is [cmd, script, run]. Directories
that are no module (src/bin/, whose files are crates of their own) are
skipped.

A file refers to a path when its code names `crate::a::b`, `super::a`,
`super::super::a` or `self::a`: in a `use` (braced groups, nested or not,
`self` in a group and `as` included) or anywhere else
(`super::notify::call(..)`). The path is made absolute from the module the
code is in: `crate` is the root, `self` that module, `super` its parent
(for cmd/script/run.rs, [cmd, script]; for cmd/script/mod.rs, [cmd]); code
in an inline `mod m { ... }` is in module [..., m].

A reference from file module F to absolute path T is an edge f -> t among
the children of P, the longest common prefix of F and T, when F and T both
go on after P (with f and t) and P's module has a child module t on the
file system. So naming the parent's own items (`super::Ctx`, defined in
cmd/mod.rs) gives no edge, nor does naming what the parent re-exports
(`super::resolve`, a `pub use table::resolve` of cmd/mod.rs); naming
anything inside t counts as t; a module naming its ancestors or its
descendants gives no edge. A path that starts with a plain name (a child
module, another crate) never names a sibling, so it is not read.

Every strongly connected component of more than one child of the same
module is a circle; each is reported with one reference per edge in it.
The crate root's children (P = []) are the crate's top-level modules.

Not read: comments (block comments taken as unnested), string and char
literals, the file's trailing `#[cfg(test)] mod ... { ... }`, and code
`include!`d from elsewhere (such as the command table that strata-server's
build.rs generates into OUT_DIR for cmd/table.rs).

Standard library only; exits non-zero with a list of what is wrong.
"""
import os
import re
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
CRATES = os.path.join(ROOT, "crates")

# Comments and literals, in the order they must be tried at one position.
LEXEMES = re.compile(
    r"""//[^\n]*"""
    r"""|/\*.*?\*/"""
    r"""|\bb?r(\#*)".*?"\1"""
    r"""|(?:\bb)?"(?:\\.|[^"\\])*\""""
    r"""|(?:\bb)?'(?:\\[^\n]+?|[^\\'\n])'""",
    re.S,
)
USE = re.compile(r"\buse\s")
USE_TOKEN = re.compile(r"\s*(::|[{},;*]|(?:r#)?[A-Za-z_][A-Za-z0-9_]*)")
PATH = re.compile(r"\b(?:crate|super|self)(?:\s*::\s*(?:r#)?[A-Za-z_][A-Za-z0-9_]*)+")
INLINE_MOD = re.compile(r"\bmod\s+([A-Za-z_][A-Za-z0-9_]*)\s*\{")
ANCHORS = ("crate", "super", "self")


def rust_files(src):
    for dirpath, _, names in os.walk(src):
        for n in names:
            if n.endswith(".rs"):
                yield os.path.join(dirpath, n)


def non_test_code(text):
    """The text before the file's trailing test module (or all of it).

    Only the inline form `#[cfg(test)] mod x { ... }` counts: a declaration
    `#[cfg(test)] mod x;` is followed by more of the module's own code."""
    m = re.search(r"^#\[cfg\(test\)\]\s*\n\s*(pub(\(crate\))? )?mod \w+\s*\{", text, re.M)
    return text[: m.start()] if m else text


def blank(text, start=0, end=None):
    """`text` with [start, end) turned to spaces, its newlines kept, so that
    offsets and line numbers stay."""
    end = len(text) if end is None else end
    return text[:start] + re.sub(r"[^\n]", " ", text[start:end]) + text[end:]


def code_of(text):
    """The file's code outside its tests, comments and literals blanked."""
    return LEXEMES.sub(lambda m: blank(m.group()), non_test_code(text))


def line_of(code, offset):
    return code.count("\n", 0, offset) + 1


# The module tree.


def module_files(src):
    """{file: its module path (a tuple)} for every file of the crate at src."""
    files = {}
    for name in ("lib.rs", "main.rs"):
        if os.path.isfile(os.path.join(src, name)):
            files[os.path.join(src, name)] = ()
    add_children(src, (), files)
    return files


def add_children(directory, module, files):
    """Adds the files of the child modules of `module`, kept in `directory`."""
    for name in sorted(os.listdir(directory)):
        path = os.path.join(directory, name)
        if os.path.isdir(path):
            if os.path.isfile(os.path.join(path, "mod.rs")):
                files[os.path.join(path, "mod.rs")] = module + (name,)
                add_children(path, module + (name,), files)
            elif os.path.isfile(path + ".rs"):
                add_children(path, module + (name,), files)
        elif name.endswith(".rs") and name not in ("mod.rs", "lib.rs", "main.rs"):
            files[path] = module + (name[:-3],)


# The paths a file names.


def inline_modules(code):
    """[(start, end, name)] of each inline `mod name { ... }` in `code`."""
    spans = []
    for m in INLINE_MOD.finditer(code):
        depth = 0
        for i in range(m.end() - 1, len(code)):
            depth += {"{": 1, "}": -1}.get(code[i], 0)
            if depth == 0:
                spans.append((m.start(), i + 1, m.group(1)))
                break
    return spans


def use_tokens(code, start):
    """[(offset, token)] of the `use` tree at `start`, up to its `;`."""
    tokens = []
    m = USE_TOKEN.match(code, start)
    while m and m.group(1) != ";":
        tokens.append((m.start(1), m.group(1)))
        m = USE_TOKEN.match(code, m.end())
    return tokens, (m.end() if m else start)


def use_leaves(tokens, i, prefix, out):
    """Parses the use tree at tokens[i] under `prefix`; appends
    (offset, path) for each path it names; returns the index after it."""
    path = list(prefix)
    while True:
        offset, token = tokens[i]
        if token == "{":
            i += 1
            while tokens[i][1] != "}":
                i = use_leaves(tokens, i, path, out)
                if tokens[i][1] == ",":
                    i += 1
            return i + 1
        if token == "*":
            out.append((offset, path))
            return i + 1
        path.append(token)
        i += 1
        if i < len(tokens) and tokens[i][1] == "::":
            i += 1
            continue
        if i < len(tokens) and tokens[i][1] == "as":
            i += 2
        out.append((offset, path))
        return i


def named_paths(code):
    """[(offset, path as written)] of every path starting with crate, super
    or self: those of `use` trees, then those in the rest of the code."""
    found, rest = [], code
    for m in USE.finditer(code):
        tokens, end = use_tokens(code, m.end())
        leaves = []
        try:
            use_leaves(tokens, 0, [], leaves)
        except IndexError:
            continue  # not a use tree this script understands
        found += [(o, p) for o, p in leaves if p and p[0] in ANCHORS]
        rest = blank(rest, m.start(), end)
    for m in PATH.finditer(rest):
        found.append((m.start(), re.split(r"\s*::\s*", m.group())))
    return found


def absolute(path, here):
    """`path` (crate::…, super::…, self::…) named in module `here`, made
    absolute."""
    target = [] if path[0] == "crate" else list(here)
    for part in path:
        if part == "super":
            target = target[:-1]
        elif part not in ("crate", "self"):
            target.append(part[2:] if part.startswith("r#") else part)
    return tuple(target)


def references(path, module):
    """[(line, written path, absolute path)] that the file at `path`, of
    module `module`, names."""
    code = code_of(open(path, encoding="utf-8").read())
    spans = inline_modules(code)
    out = []
    for offset, written in sorted(named_paths(code)):
        here = module + tuple(n for s, e, n in spans if s <= offset < e)
        out.append((line_of(code, offset), "::".join(written), absolute(written, here)))
    return out


# Edges and circles.


def edge(source, target, modules):
    """(parent, f, t) when a reference from module `source` to `target`
    makes child f of parent depend on its sibling t, else None."""
    p = 0
    while p < min(len(source), len(target)) and source[p] == target[p]:
        p += 1
    if p < len(source) and p < len(target) and target[: p + 1] in modules:
        return source[:p], source[p], target[p]
    return None


def sibling_edges(src):
    """{parent: {(f, t): (file:line, written path)}} for the crate at src,
    with the first reference found for each edge."""
    files = module_files(src)
    modules = set(files.values())
    edges = {}
    for path in sorted(files):
        where = os.path.relpath(path, ROOT).replace(os.sep, "/")
        for line, written, target in references(path, files[path]):
            e = edge(files[path], target, modules)
            if e:
                edges.setdefault(e[0], {}).setdefault(e[1:], (f"{where}:{line}", written))
    return edges


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
    for parent, edges in sorted(sibling_edges(src).items()):
        graph = {}
        for f, t in edges:
            graph.setdefault(f, set()).add(t)
        for comp in cycles(graph):
            where = "/".join(("crates", crate, "src") + parent)
            lines = [f"{where}: import circle between {', '.join(comp)}"]
            for (f, t), (at, written) in sorted(edges.items()):
                if f in comp and t in comp:
                    lines.append(f"    {f} -> {t}: {at} names {written}")
            problems.append("\n".join(lines))


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
