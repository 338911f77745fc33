"""The type stubs and docstrings ship with the package and match it."""

import ast
import os
import pydoc

import stratakv


def stub_tree():
    pkg = os.path.dirname(stratakv.__file__)
    assert os.path.exists(os.path.join(pkg, "py.typed"))
    with open(os.path.join(pkg, "__init__.pyi")) as f:
        return ast.parse(f.read())


def test_stub_names_match_module():
    tree = stub_tree()
    top = set()
    classes = {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            top.add(node.name)
            classes[node.name] = {n.name for n in node.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            top.add(node.target.id)
    public = {n for n in dir(stratakv) if not n.startswith("_") and n != "stratakv"}
    assert public - top == set(), "missing from the stubs"
    assert {n for n in top if not n.startswith("_")} - public == set(), "stubs name what the module lacks"
    for cls in ("DB", "Snapshot", "WriteBatch", "Iterator", "Partition"):
        methods = {n for n in dir(getattr(stratakv, cls)) if not n.startswith("_")}
        assert methods - classes[cls] == set(), cls


def test_docstrings():
    text = pydoc.render_doc(stratakv.DB, renderer=pydoc.plaintext)
    for word in ("profile", "pm_dir", "write_batch", "iterator", "snapshot", "compact_range", "ClosedError"):
        assert word in text, word
    for cls in (stratakv.DB, stratakv.Snapshot, stratakv.WriteBatch, stratakv.Iterator, stratakv.Partition):
        assert cls.__doc__ and len(cls.__doc__) > 40
        for name in dir(cls):
            if not name.startswith("_"):
                assert getattr(cls, name).__doc__, f"{cls.__name__}.{name} has no docstring"
    assert stratakv.ClosedError.__doc__
