"""``workbench warm``: its groups of workloads reach every registered formulation, both
integrators and both gradient methods, so that a warmed cache serves the first run of each
(the compile-time claim itself is a measurement: docs/first-use.md)."""

from __future__ import annotations

import inspect

from workbench.apps import warm as W
from workbench.formulations import REGISTRY


def _source():
    return "\n".join(inspect.getsource(fn) for _, fn in W.GROUPS)


def test_every_registered_formulation_is_warmed():
    src = _source()
    missing = [name for name in REGISTRY if f'"{name}"' not in src]
    assert missing == [], f"formulations with no warm-up workload: {missing}"


def test_both_integrators_methods_and_variants_are_warmed():
    src = _source()
    for needle in ('integrator="rk4"', 'method="fd"', '"direct"', '"adjoint"',
                   'variant="continuous"', "equilibrium(", 'rods={"mode"',
                   'products="reverse"'):
        assert needle in src, needle


def test_a_group_runs_in_this_process_and_reports_what_it_compiled():
    # the lightest group; in a warm cache it compiles (almost) nothing: the count is an
    # integer >= 0 and the wall time covers the compile time
    i = [g for g, _ in W.GROUPS].index("global")
    r = W._run_group(i)
    assert r.group == "global" and r.kernels >= 0
    assert 0.0 <= r.compile_s <= r.wall_s
