"""The shipped studies: each is a builder function returning a :class:`StudySpec`."""

from __future__ import annotations

from workbench import catalog
from workbench.errors import ModelError, UnknownNameError
from workbench.sensitivity import objective_values  # noqa: F401  (re-exported for users)

from .core import StudySpec


def _bounds(model, names, rel=0.2):
    out = {}
    for nm in names:
        prm = model.parameters[nm]
        lo = prm.lower if prm.lower is not None else prm.value * (1 - rel)
        hi = prm.upper if prm.upper is not None else prm.value * (1 + rel)
        out[nm] = (float(min(lo, hi)), float(max(lo, hi)))
    return out


def _baseline(spec: StudySpec) -> dict:
    from workbench.sensitivity import sensitivity
    res = sensitivity(spec.model, spec.objectives, spec.parameters, method="adjoint",
                      t_end=spec.t_end, dt=spec.dt, formulation=spec.formulation)
    return dict(zip(res.objectives, res.psi))


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


def buggy_suspension(t_end: float = 4.5, dt: float = 1e-3) -> StudySpec:
    """Buggy (a RECONSTRUCTION): minimise the step-descent comfort objective over ``kf, cf,
    kr, cr`` (and ``mc`` within bounds); SLSQP adds the double-lane-change roll objective
    not worse than the baseline.  Needs the shipped model ``buggy``."""
    if "buggy" not in catalog.names():
        raise UnknownNameError("model", "buggy", catalog.names())
    model = catalog.load("buggy")
    names = [n for n in ("kf", "cf", "kr", "cr", "mc") if n in model.parameters]
    if len(names) < 4:
        raise ModelError("model 'buggy' lacks the suspension parameters kf, cf, kr, cr")
    spec = StudySpec(name="buggy-suspension", model="buggy", parameters=names,
                     bounds=_bounds(model, names, 0.3), objective={}, t_end=t_end, dt=dt,
                     description=buggy_suspension.__doc__.strip())
    base = _baseline(spec)
    first = next(iter(base))
    spec.objective = {first: 1.0 / base[first]}
    spec.constraints = {r: v for r, v in base.items() if r != first}
    return spec


STUDIES = {"five-bar-design": five_bar_design, "buggy-suspension": buggy_suspension}
