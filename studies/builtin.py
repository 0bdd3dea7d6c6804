"""The shipped studies: each is a builder function returning a :class:`StudySpec`."""

from __future__ import annotations

import inspect

from workbench.errors import ModelError, UnknownNameError
from workbench.integrators.simulation import simulate
from workbench.model import catalog
from workbench.objectives import Objective, Term, resolve_objectives
from workbench.sensitivities import objective_values
from workbench.statics import static_responses

from .core import Case, StudySpec


def _bounds(model, names, rel=0.2, clip=False):
    """Bounds of each parameter: those declared in the model file, else +-``rel`` of its
    value; with ``clip`` the +-``rel`` box intersected with the declared bounds."""
    out = {}
    for nm in names:
        prm = model.parameters[nm]
        a, b = sorted((prm.value * (1 - rel), prm.value * (1 + rel)))
        lo = prm.lower if prm.lower is not None else a
        hi = prm.upper if prm.upper is not None else b
        if clip:
            lo, hi = max(lo, a), min(hi, b)
        out[nm] = (float(min(lo, hi)), float(max(lo, hi)))
    return out


def _baseline(spec: StudySpec) -> dict:
    """Responses at the shipped design, keyed by output name."""
    out = {}
    for case in spec.all_cases():
        cm = case.compiled()
        if case.kind == "static":
            res = static_responses(cm, case.objectives, spec.parameters)
            out.update({case.output(r): float(v) for r, v in zip(res.responses, res.values)})
            continue
        co = resolve_objectives(cm, case.objectives)
        sim = simulate(cm, *case.grid(cm), spec.formulation)
        out.update({case.output(r): float(v) for r, v in zip(co.names,
                                                             objective_values(sim, co))})
    return out


def five_bar_design(t_end: float = 2.0, dt: float = 1e-3,
                    formulation: str = "sr-com") -> StudySpec:
    """Five-bar (a RECONSTRUCTION of the IFToMM benchmark): minimise the combination
    ``psi1/psi1_0 + psi2/psi2_0 + psi3/psi3_0`` (each response normalised by its value at
    the shipped design) over ``Ls1, Ls2, mA1, xA1G, LA1`` within the bounds declared in
    the model file.  SLSQP additionally keeps ``psi3`` (the kinetic-energy-like response)
    at most 1.2 times its baseline."""
    model = catalog.load("five-bar")
    names = list(model.meta["design_parameters"])
    spec = StudySpec(name="five-bar-design", model="five-bar", parameters=names,
                     bounds=_bounds(model, names), objective={}, t_end=t_end, dt=dt,
                     formulation=formulation, description=inspect.cleandoc(five_bar_design.__doc__))
    base = _baseline(spec)
    spec.objective = {r: float(1.0 / v) for r, v in base.items()}
    spec.constraints = {"psi3": float(1.2 * base["psi3"])}
    return spec


def suspension_statics() -> list:
    """Static responses of the buggy at the equilibrium of a design: the chassis ride
    height (z of ``chassis.G``, m) and the static travel of the left front and left rear
    suspensions relative to the design ride height of the model file (wheel centre
    relative to the coil-over's chassis mount, vertical, m; positive = compressed, i.e.
    sag beyond the design position).  The vehicle is symmetric, so the right side
    equals the left."""

    def travel(name, top, wheel):
        return Objective(name, (Term("position", top, "z", power=1, weight=-1.0,
                                     relative=True),
                                Term("position", wheel, "z", power=1, weight=1.0,
                                     relative=True)))
    return [Objective("ride_height", (Term("position", "chassis.G", "z", power=1),)),
            travel("front_travel", "chassis.fl_coil_top", "fl_wheel.c"),
            travel("rear_travel", "chassis.rl_coil_top", "rl_wheel.c")]


#: static limits of the buggy study (m): suspension travel at equilibrium within
#: +-TRAVEL_LIMIT of the design ride height (sag and top-out), chassis at most
#: RIDE_DROP below the baseline ride height
TRAVEL_LIMIT = 0.025
RIDE_DROP = 0.02


def buggy_suspension(t_end: float | None = None, dt: float | None = None,
                     dlc_t_end: float | None = None, x0: float | None = None,
                     formulation: str = "sr-com") -> StudySpec:
    """Buggy (a RECONSTRUCTION): minimise the step-descent comfort objective (``step_psi``,
    int zdd^2 of a point on the front of the chassis, normalised by its baseline) over
    ``kf, cf, kr, cr`` and ``mc`` within +-30 % of the shipped values.  Every design starts
    both maneuvers from ITS OWN static equilibrium (exact derivative of the equilibrium
    included).  SLSQP adds constraints: the double-lane-change roll objective
    (``dlc_psi``, int roll rate^2) not worse than the baseline, the static suspension
    travel within +-25 mm of the design ride height (front and rear) and the static ride
    height at most 20 mm below the baseline.  Three analyses per design (the maneuvers
    ``buggy-step`` and ``buggy-dlc`` with exact adjoint gradients, and the static
    equilibrium with its implicit-function gradient).  ``t_end``/``x0`` shorten the step
    maneuver and move its start (tests), ``dlc_t_end`` shortens the lane change."""
    missing = [m for m in ("buggy-step", "buggy-dlc") if m not in catalog.names()]
    if missing:
        raise UnknownNameError("model", missing[0], catalog.names())
    model = catalog.load("buggy-step")
    names = [n for n in ("kf", "cf", "kr", "cr", "mc") if n in model.parameters]
    if len(names) < 4:
        raise ModelError("model 'buggy-step' lacks the suspension parameters kf, cf, kr, cr")
    load = {"x0": float(x0)} if x0 is not None else None
    cases = [Case("step", "buggy-step", t_end=t_end, dt=dt, load=load),
             Case("dlc", "buggy-dlc", t_end=dlc_t_end),
             Case("static", "buggy-step", objectives=suspension_statics(), kind="static")]
    spec = StudySpec(name="buggy-suspension", model="buggy-step", parameters=names,
                     bounds=_bounds(model, names, 0.3, clip=True), objective={}, t_end=t_end, dt=dt,
                     formulation=formulation, description=inspect.cleandoc(buggy_suspension.__doc__),
                     cases=cases)
    base = _baseline(spec)
    spec.objective = {k: float(1.0 / v) for k, v in base.items() if k.startswith("step_")}
    spec.constraints = {k: float(v) for k, v in base.items() if k.startswith("dlc_")}
    spec.constraints.update({"static_front_travel": (-TRAVEL_LIMIT, TRAVEL_LIMIT),
                             "static_rear_travel": (-TRAVEL_LIMIT, TRAVEL_LIMIT),
                             "static_ride_height": (base["static_ride_height"] - RIDE_DROP,
                                                    None)})
    return spec


STUDIES = {"five-bar-design": five_bar_design, "buggy-suspension": buggy_suspension}
