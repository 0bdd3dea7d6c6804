"""The shipped studies: each is a builder function returning a :class:`StudySpec`."""

from __future__ import annotations

from workbench import catalog
from workbench.errors import ModelError, UnknownNameError
from workbench.sensitivity import objective_values  # noqa: F401  (re-exported for users)

from .core import Case, StudySpec


def _bounds(model, names, rel=0.2):
    out = {}
    for nm in names:
        prm = model.parameters[nm]
        lo = prm.lower if prm.lower is not None else prm.value * (1 - rel)
        hi = prm.upper if prm.upper is not None else prm.value * (1 + rel)
        out[nm] = (float(min(lo, hi)), float(max(lo, hi)))
    return out


def _baseline(spec: StudySpec) -> dict:
    """Responses at the shipped design, keyed by output name (simulations only)."""
    from workbench.sensitivity import _resolve_objectives, objective_values
    from workbench.simulate import _compiled, simulate
    out = {}
    for case in spec.all_cases():
        cm = _compiled(case.model)
        meta = getattr(cm.model, "meta", {}) or {}
        co = _resolve_objectives(cm, case.objectives)
        sim = simulate(cm, case.t_end or meta.get("t_end", 1.0), case.dt or meta.get("dt", 1e-3),
                       spec.formulation)
        out.update({case.output(r): float(v) for r, v in zip(co.names,
                                                             objective_values(sim, co))})
    return out


def five_bar_design(t_end: float = 2.0, dt: float = 1e-3) -> StudySpec:
    """Five-bar (a RECONSTRUCTION of the IFToMM benchmark): minimise the combination
    ``psi1/psi1_0 + psi2/psi2_0 + psi3/psi3_0`` (each response normalised by its value at
    the shipped design) over ``Ls1, Ls2, mA1, xA1G, LA1`` within the bounds declared in
    the model file.  SLSQP additionally keeps ``psi3`` (the kinetic-energy-like response)
    at most 1.2 times its baseline."""
    model = catalog.load("five-bar")
    names = list(model.meta["design_parameters"])
    spec = StudySpec(name="five-bar-design", model="five-bar", parameters=names,
                     bounds=_bounds(model, names), objective={}, t_end=t_end, dt=dt,
                     description=five_bar_design.__doc__.strip())
    base = _baseline(spec)
    spec.objective = {r: float(1.0 / v) for r, v in base.items()}
    spec.constraints = {"psi3": float(1.2 * base["psi3"])}
    return spec


def buggy_suspension(t_end: float | None = None, dt: float | None = None) -> StudySpec:
    """Buggy (a RECONSTRUCTION): minimise the step-descent comfort objective (``step_psi``,
    int zdd^2 of a point on the front of the chassis) over ``kf, cf, kr, cr`` and ``mc``
    within bounds; SLSQP adds the double-lane-change roll objective (``dlc_psi``, int roll
    rate^2) not worse than the baseline.  Two simulations per design (the maneuver models
    ``buggy-step`` and ``buggy-dlc``), both with exact adjoint gradients."""
    missing = [m for m in ("buggy-step", "buggy-dlc") if m not in catalog.names()]
    if missing:
        raise UnknownNameError("model", missing[0], catalog.names())
    model = catalog.load("buggy-step")
    names = [n for n in ("kf", "cf", "kr", "cr", "mc") if n in model.parameters]
    if len(names) < 4:
        raise ModelError("model 'buggy-step' lacks the suspension parameters kf, cf, kr, cr")
    cases = [Case("step", "buggy-step", t_end=t_end, dt=dt), Case("dlc", "buggy-dlc")]
    spec = StudySpec(name="buggy-suspension", model="buggy-step", parameters=names,
                     bounds=_bounds(model, names, 0.3), objective={}, t_end=t_end, dt=dt,
                     description=buggy_suspension.__doc__.strip(), cases=cases)
    base = _baseline(spec)
    spec.objective = {k: float(1.0 / v) for k, v in base.items() if k.startswith("step_")}
    spec.constraints = {k: float(v) for k, v in base.items() if k.startswith("dlc_")}
    return spec


STUDIES = {"five-bar-design": five_bar_design, "buggy-suspension": buggy_suspension}
