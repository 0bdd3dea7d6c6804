"""Integral objectives ``psi = int_t0^tF g dt`` (seed 001 eq 30) built from model measures.

An :class:`Objective` is a named sum of :class:`Term` s; each term is

    weight * (m(t) - [m(t0) if relative]) ** power

where ``m`` is one scalar *measure* of the model: a component of a point's position,
velocity or acceleration, a body's angular velocity (global or body-frame component, e.g.
the roll rate), a joint coordinate or its first/second time derivative, or a design
parameter itself (an explicit parameter term, constant in time).  Several objectives are
evaluated in one run (a vector ``psi``); an objective can also serve as an optimisation
constraint (seed 001 eq 73, *extended objectives*).

Examples
--------
The three objectives of the five-bar benchmark (seed 001 eq 74)::

    psi1 = point_position("psi1", "bar_12.2", components="xy", relative=True)
    psi2 = point_velocity("psi2", "bar_12.2", components="xy")
    psi3 = point_acceleration("psi3", "bar_12.2", components="xy")

In a model file::

    [objectives.psi3]
    kind = "acceleration"
    point = "bar_12.2"
    components = "xy"

    [objectives.roll]
    terms = [{kind = "angular_velocity", body = "chassis", components = "x", frame = "body"}]
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from workbench.errors import ModelError, UnknownNameError
from workbench.kernels import layout as AR
from workbench.kernels import measures as MS

KINDS = ("position", "velocity", "acceleration", "angular_velocity", "coordinate", "rate",
         "coordinate_acceleration", "reaction", "parameter")
_POINT_KINDS = {"position": MS.MS_POS, "velocity": MS.MS_VEL, "acceleration": MS.MS_ACC}
_COORD_KINDS = {"coordinate": MS.MS_COORD, "rate": MS.MS_RATE,
                "coordinate_acceleration": MS.MS_COORD_ACC}


@dataclass(frozen=True)
class Term:
    """One term ``weight * (m - relative * m(t0)) ** power`` of an integrand."""

    kind: str
    target: str
    component: str = ""
    frame: str = "global"
    power: int = 2
    weight: float = 1.0
    relative: bool = False

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ModelError(f"objective term: unknown kind {self.kind!r}; choose one of {KINDS}")
        if self.power not in (1, 2):
            raise ModelError(f"objective term on {self.target!r}: power must be 1 or 2")
        if self.frame not in ("global", "body"):
            raise ModelError(f"objective term on {self.target!r}: frame must be 'global' or 'body'")
        if self.kind in _POINT_KINDS or self.kind == "angular_velocity":
            if self.component not in ("x", "y", "z"):
                raise ModelError(f"objective term on {self.target!r}: component must be x, y or z")
        if self.kind == "reaction" and not (self.component in ("x", "y", "z")
                                            or str(self.component).isdigit()):
            raise ModelError(f"reaction term on joint {self.target!r}: component must be x, y, "
                             f"z (a force component) or an equation index 0, 1, ..., got "
                             f"{self.component!r}")

    def label(self) -> str:
        base = f"{self.kind}[{self.target}{'.' + self.component if self.component else ''}]"
        if self.relative:
            base = f"({base} - initial)"
        return f"{self.weight:g}*{base}^{self.power}" if self.weight != 1 else f"{base}^{self.power}"


@dataclass(frozen=True)
class Objective:
    """A named integral objective: ``int sum(terms) dt``."""

    name: str
    terms: tuple = field(default_factory=tuple)

    def describe(self) -> str:
        return f"{self.name} = int ( " + " + ".join(t.label() for t in self.terms) + " ) dt"


def _vector(kind, name, target, components, relative, power, weight, frame="global"):
    return Objective(name, tuple(Term(kind, target, c, frame, power, weight, relative)
                                 for c in components))


def point_position(name, point, components="xyz", relative=False, power=2, weight=1.0):
    """``int sum_c w (x_c - [x_c(t0)]) ** power dt`` of a point ``"body.point"``."""
    return _vector("position", name, point, components, relative, power, weight)


def point_velocity(name, point, components="xyz", power=2, weight=1.0):
    return _vector("velocity", name, point, components, False, power, weight)


def point_acceleration(name, point, components="xyz", power=2, weight=1.0):
    return _vector("acceleration", name, point, components, False, power, weight)


def angular_velocity(name, body, components="xyz", frame="body", power=2, weight=1.0):
    """Angular velocity components of a body (``frame="body"``: along the body's own axes,
    e.g. the roll rate is the body-x component of a vehicle chassis)."""
    return _vector("angular_velocity", name, body, components, False, power, weight, frame)


def coordinate(name, coord, level=0, relative=False, power=2, weight=1.0):
    kind = ("coordinate", "rate", "coordinate_acceleration")[level]
    return Objective(name, (Term(kind, coord, "", "global", power, weight, relative),))


def reaction(name, joint, components="xyz", power=2, weight=1.0):
    """Reaction of a cut joint (the Lagrange multipliers of its closure equations, seed
    000 eq 61): components ``"x"``, ``"y"``, ``"z"`` are the force (N) the joint applies to
    its ``body2`` along the global axes (the multipliers of its point-coincidence equations
    ``Phi = x_1 - x_2``); an index ``"0"``, ``"1"``, ... is the multiplier of the joint's
    k-th equation (``compiled.constraint_names``), e.g. the moment of a cut prismatic's
    rotation equations.  Exact gradients in the semi-recursive formulations."""
    return Objective(name, tuple(Term("reaction", joint, str(c), "global", power, weight, False)
                                 for c in components))


def parameter_term(name, param, power=2, weight=1.0):
    """An explicit parameter term ``w * rho ** power`` (constant integrand)."""
    return Objective(name, (Term("parameter", param, "", "global", power, weight, False),))


def from_table(name: str, table: dict) -> Objective:
    """An objective from a model-file table (``[objectives.NAME]``)."""
    specs = table.get("terms", [table])
    terms = []
    for spec in specs:
        kind = spec.get("kind")
        if kind not in KINDS:
            raise ModelError(f"[objectives.{name}]: unknown kind {kind!r}; choose one of {KINDS}")
        target = (spec.get("point") or spec.get("body") or spec.get("coordinate")
                  or spec.get("parameter") or spec.get("joint") or spec.get("target"))
        if not target:
            raise ModelError(f"[objectives.{name}]: missing point/body/coordinate/joint/"
                             "parameter")
        common = dict(power=int(spec.get("power", 2)), weight=float(spec.get("weight", 1.0)))
        if kind in _POINT_KINDS or kind in ("angular_velocity", "reaction"):
            comps = spec.get("components", "xyz")
            if kind == "reaction":
                target = spec.get("joint") or target
            frame = spec.get("frame", "body" if kind == "angular_velocity" else "global")
            rel = bool(spec.get("relative", False))
            terms += [Term(kind, target, c, frame, relative=rel, **common) for c in comps]
        else:
            terms.append(Term(kind, target, relative=bool(spec.get("relative", False)), **common))
    return Objective(name, tuple(terms))


def model_objectives(model) -> list:
    """The objectives declared in a model (file section ``[objectives]``)."""
    return [from_table(k, v) for k, v in model.objectives.items()]


@dataclass
class CompiledObjectives:
    """Measures as index arrays for the kernels plus the term bookkeeping."""

    names: tuple
    ms_type: np.ndarray
    ms_a: np.ndarray
    ms_c: np.ndarray
    term_obj: np.ndarray       # objective of each kernel measure
    power: np.ndarray
    weight: np.ndarray
    relative: np.ndarray
    param_terms: list          # (objective index, parameter name, power, weight)

    @property
    def n_measures(self) -> int:
        return len(self.ms_type)

    @property
    def reaction_columns(self) -> np.ndarray:
        """Boolean mask of the reaction measures (closure multipliers)."""
        return np.asarray(self.ms_type) == MS.MS_REACTION

    @property
    def has_reactions(self) -> bool:
        return bool(self.reaction_columns.any())

    def integrand_partials(self, MV, base=None):
        """``GM[n, t, k] = d g_k / d m_t`` at every step and the values of the integrands
        ``g[n, k]`` (parameter terms excluded).  Relative terms subtract ``base`` (the
        measures at the initial time; default ``MV[0]``)."""
        N = MV.shape[0]
        no = len(self.names)
        base = MV[0] if base is None else base
        delta = MV - self.relative[None, :] * base[None, :]
        g = np.zeros((N, no))
        GM = np.zeros((N, self.n_measures, no))
        for t in range(self.n_measures):
            k = self.term_obj[t]
            w, pw = self.weight[t], self.power[t]
            g[:, k] += w * delta[:, t] ** pw
            GM[:, t, k] = w * pw * delta[:, t] ** (pw - 1)
        return g, GM


def compile_objectives(cm, objectives) -> CompiledObjectives:
    """Resolve names against a compiled model."""
    objectives = list(objectives)
    if not objectives:
        raise ModelError(f"model {cm.name!r}: no objectives given")
    names = [o.name for o in objectives]
    if len(set(names)) != len(names):
        raise ModelError(f"duplicate objective names: {names}")
    ms_type, ms_a, ms_c, obj, pw, wt, rel, pterms = [], [], [], [], [], [], [], []
    for k, o in enumerate(objectives):
        if not o.terms:
            raise ModelError(f"objective {o.name!r} has no terms")
        for t in o.terms:
            comp = "xyz".index(t.component) if t.component in ("x", "y", "z") else 0
            if t.kind in _POINT_KINDS:
                code, idx = _POINT_KINDS[t.kind], cm.point(t.target)
            elif t.kind == "angular_velocity":
                if t.target not in cm.body_names:
                    raise UnknownNameError(f"body (objective {o.name!r})", t.target,
                                           cm.body_names)
                code = MS.MS_ANGVEL_BODY if t.frame == "body" else MS.MS_ANGVEL
                idx = cm.body_names.index(t.target)
            elif t.kind in _COORD_KINDS:
                code, idx = _COORD_KINDS[t.kind], cm.coordinate(t.target)
            elif t.kind == "reaction":
                code, idx, comp = MS.MS_REACTION, reaction_row(cm, t.target, t.component), 0
            else:
                if t.target not in cm.param_names:
                    raise UnknownNameError(f"parameter (objective {o.name!r})", t.target,
                                           cm.param_names)
                pterms.append((k, t.target, t.power, t.weight))
                continue
            ms_type.append(code)
            ms_a.append(idx)
            ms_c.append(comp)
            obj.append(k)
            pw.append(t.power)
            wt.append(t.weight)
            rel.append(1.0 if t.relative else 0.0)
    i64 = lambda v: np.asarray(v, dtype=np.int64)
    return CompiledObjectives(tuple(names), i64(ms_type), i64(ms_a), i64(ms_c), i64(obj),
                              np.asarray(pw, float), np.asarray(wt, float),
                              np.asarray(rel, float), pterms)


def reaction_row(cm, joint: str, component: str) -> int:
    """The closure equation (row of ``Phi``) whose multiplier is the reaction ``component``
    of cut joint ``joint``: ``"x"``/``"y"``/``"z"`` its point-coincidence equation of that
    global component, an index its k-th equation.  Unknown names raise
    UnknownNameError listing what exists."""
    names = list(cm.constraint_names)
    rows = [k for k, nm in enumerate(names) if nm == joint]
    if not rows:
        raise UnknownNameError("cut joint or closure (reaction objective)", joint,
                               tuple(dict.fromkeys(names)))
    if str(component).isdigit():
        i = int(component)
        if i >= len(rows):
            raise ModelError(f"reaction of {joint!r}: equation index {i} out of range, the "
                             f"joint has {len(rows)} closure equations")
        return rows[i]
    c = "xyz".index(component)
    ma = cm.arrays
    for k in rows:
        if ma.c_type[k] == AR.C_PTCOMP and ma.c_i[k, 2] == c:
            return k
    raise ModelError(f"reaction of {joint!r}: no point-coincidence equation along {component} "
                     "(a planar model keeps the in-plane components only; other equations are "
                     f"selected by index 0..{len(rows) - 1})")


def resolve_objectives(cm, objectives):
    if objectives is None:
        objectives = model_objectives(cm.model)
    elif isinstance(objectives, Objective):
        objectives = [objectives]
    return compile_objectives(cm, objectives)

