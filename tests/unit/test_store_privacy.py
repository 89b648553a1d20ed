"""Code outside services/common/store/ uses the results store through its public interface only:
no private attribute (``_rows``, ``_execute``, ``_conn`` ...) of a Store, its connection or its
parts, so the store may change inside without breaking its callers."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
STORE_PACKAGE = ROOT / "services" / "common" / "store"
#: What a Store holds: its connection and its parts (services/common/store/__init__.py).
HELD = frozenset({"db", "campaigns", "runs", "results", "parts", "workers", "transfer"})
#: Names that hold a store by convention even where nothing in the file binds them to one (a
#: parameter typed by a protocol, a fixture).
CONVENTIONAL = frozenset({"store", "_store"})


def _makes_store(expr: ast.AST | None) -> bool:
    """Whether ``expr`` makes a Store (``Store(...)``, ``Store(...).open()``, ``store.Store(...)``)."""
    for node in ast.walk(expr) if expr is not None else ():
        if isinstance(node, ast.Call):
            f = node.func
            if (isinstance(f, ast.Name) and f.id == "Store") or (isinstance(f, ast.Attribute) and f.attr == "Store"):
                return True
    return False


def _names(target: ast.AST) -> set[str]:
    if isinstance(target, ast.Name):
        return {target.id}
    if isinstance(target, ast.Attribute):  # self.store = Store(...)
        return {target.attr}
    if isinstance(target, (ast.Tuple, ast.List)):
        return set().union(*(_names(e) for e in target.elts))
    return set()


def store_names(tree: ast.AST) -> set[str]:
    """The names a module binds to a Store: made from Store(...), or annotated as one."""
    names = set(CONVENTIONAL)
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and _makes_store(node.value):
            for t in node.targets:
                names |= _names(t)
        elif isinstance(node, ast.AnnAssign) and (_makes_store(node.value) or "Store" in ast.unparse(node.annotation)):
            names |= _names(node.target)
        elif isinstance(node, ast.withitem) and _makes_store(node.context_expr) and node.optional_vars is not None:
            names |= _names(node.optional_vars)
        elif isinstance(node, ast.arg) and node.annotation is not None and "Store" in ast.unparse(node.annotation):
            names.add(node.arg)
    return names


def _holds_store(expr: ast.AST, names: set[str]) -> bool:
    """Whether ``expr`` is a store (a name bound to one, ``self.store``) or what a store holds."""
    if isinstance(expr, ast.Name):
        return expr.id in names
    if isinstance(expr, ast.Attribute):
        return expr.attr in names or (expr.attr in HELD and _holds_store(expr.value, names))
    return False


def private_uses(source: str) -> list[str]:
    """Each private attribute of a store (or of its connection or parts) the source touches."""
    tree = ast.parse(source)
    names = store_names(tree)
    found = [node for node in ast.walk(tree)
             if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__")
             and _holds_store(node.value, names)]
    return [f"line {node.lineno}: {ast.unparse(node)}" for node in sorted(found, key=lambda n: n.lineno)]


def _python_files() -> list[Path]:
    files = [p for d in ("services", "tests") for p in (ROOT / d).rglob("*.py") if STORE_PACKAGE not in p.parents]
    # The benchmarks and the studies' runner are scripts without the .py suffix.
    scripts = [p for p in (ROOT / "bench").rglob("*") if p.is_file() and p.suffix in ("", ".py")]
    scripts.append(ROOT / "examples" / "studies" / "run")
    for p in scripts:
        text = p.read_bytes()[:200]
        if p.suffix == ".py" or (text.startswith(b"#!") and b"python" in text.split(b"\n", 1)[0]):
            files.append(p)
    return files


def test_no_code_outside_the_store_touches_a_private_attribute_of_one():
    found = {str(p.relative_to(ROOT)): uses for p in _python_files()
             if (uses := private_uses(p.read_text(encoding="utf-8")))}
    assert not found, f"private attributes of the results store used outside services/common/store/: {found}"


def test_the_check_finds_private_uses_however_the_store_is_bound():
    """The check above would see a caller reaching into the store (else it could never fail)."""
    source = '''
from services.common.store import Store

def a(store):
    return store._rows("SELECT 1")

def b(settings):
    s = Store(settings).open()
    s.db._execute("SELECT 1")

def c(settings):
    with Store(settings) as st:
        return st.results._store_series

def d(ledger: "Store"):
    return ledger.db._conn

class Ledger:
    def __init__(self, settings):
        self.store = Store(settings)

    def lock(self):
        return self.store.campaigns._unknown

def fine(cur, other):
    return cur._rows, other._execute, Store.__init__
'''
    assert [u.split(":")[0] for u in private_uses(source)] == ["line 5", "line 9", "line 13", "line 16", "line 23"]
