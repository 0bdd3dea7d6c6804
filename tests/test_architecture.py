"""The import graph of ``workbench/``, ``components/`` and ``studies/`` follows the layers of
``docs/architecture.md``.

Every module is parsed with :mod:`ast` (nothing is imported, no kernel is compiled).  The graph
has one edge per import statement, at module level or inside a function (an import moved into a
function to dodge a cycle still closes it), relative imports resolved.  Checked:

(a) no import cycle among the modules;
(b) no name (or module) starting with ``_`` imported from another top-level package
    (``workbench``, ``components``, ``studies``);
(c) the layer order: a module of layer k imports only modules of layers <= k (:data:`LAYERS`).

The implicit import of a package's ``__init__.py``, which Python runs before any submodule of
the package, is not an edge: ``workbench/__init__.py`` imports the whole public API.  That
every module can be imported first is ``tests/test_import_order.py``.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("workbench", "components", "studies")

#: Layer of every module, by dotted prefix (the longest matching prefix wins), lowest first.
#: ``docs/architecture.md`` describes the same table from the top down.
LAYERS: dict[str, int] = {
    # typed errors: imported by every layer
    "workbench.errors": 0,
    # the kernels' cache stamp (installed by workbench/__init__.py before any kernel exists)
    "workbench._numba_cache": 0,
    # scalar numba helpers shared by the model description (time functions) and the kernels
    "workbench.kernels.scalar": 1,
    # the model description proper: elements, units, writing a model back
    "workbench.model.units": 2,
    "workbench.model.elements": 2,
    "workbench.model.serialize": 2,
    # flat-array numba kernels and force laws (know nothing of Model objects)
    "workbench.kernels": 3,
    "workbench.forces": 3,
    # compiled models: Model -> immutable arrays, DOF choice, parameter columns
    "workbench.compiled": 4,
    # the Model builder, model files and the catalog (Model.compile() calls compile_model)
    "workbench.model": 5,
    # the formulations behind the Formulation seam
    "workbench.formulations": 6,
    # objectives and statics
    "workbench.objectives": 7,
    "workbench.statics": 7,
    # time integration
    "workbench.integrators": 8,
    # direct and adjoint sensitivities
    "workbench.sensitivities": 9,
    # vehicle maneuvers (steering drive, speed, parameters; measures the linkage by solving
    # position problems); registers the expander of the model files' [maneuver] tables
    "workbench.maneuvers": 9,
    # the public API (workbench/__init__.py only; see EXACT)
    "workbench": 10,
    # OpenMDAO components and optimisation studies, on the public API
    "components": 11,
    "studies": 12,
    # applications: the CLI (whose `study` and `report` commands run studies), reports, bench
    "workbench.apps": 13,
}
#: prefixes that classify only the module of that exact name, not its submodules
EXACT = {"workbench"}


def _modules() -> dict[str, Path]:
    mods = {}
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            if "__pycache__" in path.parts:
                continue
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            mods[".".join(parts)] = path
    return mods


MODULES = _modules()


def _known(name: str) -> str | None:
    """The longest prefix of the dotted ``name`` that is one of our modules."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _targets(module: str, node) -> list[tuple[str, str | None]]:
    """``(target module, imported name or None)`` of one import statement of ``module``."""
    out = []
    if isinstance(node, ast.Import):
        for alias in node.names:
            tgt = _known(alias.name)
            if tgt:
                out.append((tgt, None))
        return out
    base = node.module or ""
    if node.level:
        is_pkg = MODULES[module].name == "__init__.py"
        pkg = module if is_pkg else module.rpartition(".")[0]
        for _ in range(node.level - 1):
            pkg = pkg.rpartition(".")[0]
        base = f"{pkg}.{base}" if base else pkg
    for alias in node.names:
        sub = f"{base}.{alias.name}"
        if sub in MODULES:
            out.append((sub, None))
        else:
            tgt = _known(base)
            if tgt:
                out.append((tgt, alias.name))
    return out


def _imports() -> list[tuple[str, str, str | None, int]]:
    """Every import between our modules: ``(importer, target, name, line)``."""
    edges = []
    for module, path in MODULES.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                for tgt, name in _targets(module, node):
                    if tgt != module:
                        edges.append((module, tgt, name, node.lineno))
    return edges


IMPORTS = _imports()


def layer_of(module: str) -> int | None:
    best = None
    for prefix in LAYERS:
        if module == prefix or (module.startswith(prefix + ".") and prefix not in EXACT):
            if best is None or len(prefix) > len(best):
                best = prefix
    return None if best is None else LAYERS[best]


def test_the_graph_is_not_empty():
    assert len(MODULES) > 40
    assert len(IMPORTS) > 100
    # a relative import resolves like an absolute one
    assert _targets("workbench.model.catalog",
                    ast.parse("from .files import load_model").body[0]) == \
        [("workbench.model.files", "load_model")]
    assert _targets("workbench.model", ast.parse("from . import catalog").body[0]) == \
        [("workbench.model.catalog", None)]


def test_no_import_cycle():
    graph: dict[str, set[str]] = {m: set() for m in MODULES}
    for src, tgt, _, _ in IMPORTS:
        graph[src].add(tgt)
    # iterative depth-first search; a back edge to a module on the stack closes a cycle
    WHITE, GREY, BLACK = 0, 1, 2
    colour = dict.fromkeys(graph, WHITE)
    cycles = []
    for root in sorted(graph):
        if colour[root] != WHITE:
            continue
        stack = [(root, iter(sorted(graph[root])))]
        path = [root]
        colour[root] = GREY
        while stack:
            node, children = stack[-1]
            for child in children:
                if colour[child] == GREY:
                    cycles.append(path[path.index(child):] + [child])
                elif colour[child] == WHITE:
                    colour[child] = GREY
                    path.append(child)
                    stack.append((child, iter(sorted(graph[child]))))
                    break
            else:
                colour[node] = BLACK
                path.pop()
                stack.pop()
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)


def test_no_private_import_across_top_level_packages():
    bad = []
    for src, tgt, name, line in IMPORTS:
        if src.split(".")[0] == tgt.split(".")[0]:
            continue
        parts = tgt.split(".")[1:] + ([name] if name else [])
        if any(p.startswith("_") and not p.startswith("__") for p in parts):
            bad.append(f"{src}:{line} imports {tgt}{'.' + name if name else ''}")
    assert not bad, "private names imported across packages:\n" + "\n".join(bad)


def test_every_module_has_a_layer_and_every_layer_a_module():
    assert not [m for m in MODULES if layer_of(m) is None]
    stale = [p for p in LAYERS
             if not any(m == p or (m.startswith(p + ".") and p not in EXACT) for m in MODULES)]
    assert not stale, f"layer prefixes that match no module: {stale}"


def test_imports_follow_the_layers():
    bad = []
    for src, tgt, name, line in IMPORTS:
        ls, lt = layer_of(src), layer_of(tgt)
        if lt > ls:
            bad.append(f"{src} (layer {ls}):{line} imports {tgt}"
                       f"{'.' + name if name else ''} (layer {lt})")
    assert not bad, "imports against the layer order:\n" + "\n".join(sorted(set(bad)))
