"""Model description: a Python builder whose data compile into immutable arrays.

A :class:`Model` holds bodies (mass, centre of mass, inertia about the centre of mass,
named points and unit vectors), tree joints, loop-closure (cut) joints, distance
constraints, driven joints, force elements and named parameters.  ``Model.compile()``
returns a :class:`~workbench.compiled.CompiledModel`, the immutable array form used by
the numerical kernels.

Any numeric field may be given as a number, as the name of a parameter (``"mA1"``), or
as ``("LA1", -1.0)`` meaning ``-1.0 * LA1``; parameters carry a value, a unit and a
provenance string, and later issues differentiate with respect to them.

Joint coordinates
-----------------
=============  ==========================================  ============================
type           motion of the child relative to the parent  coordinates (suffixes)
=============  ==========================================  ============================
revolute       rotation about ``axis`` (parent frame)      1
prismatic      translation along ``axis`` (parent frame)   1
cylindrical    translation along and rotation about axis   2 (``.s``, ``.phi``)
universal      rotation about ``axis`` then ``axis2``       2 (``.a1``, ``.a2``)
spherical      rotations about z, y', x'' (parent frame)   3 (``.rz``, ``.ry``, ``.rx``)
floating       translations x, y, z then rotations z,y,x   6 (``.x`` ... ``.rx``)
fixed          none                                        0
=============  ==========================================  ============================

At zero coordinates the child frame has orientation ``orientation`` (a 3x3 rotation,
identity by default) relative to the parent, and the joint point ``child_point`` of the
child coincides with ``parent_point`` of the parent.  Spherical and floating joints use a
z-y-x angle sequence, singular at ``ry = +-pi/2``.

Two elements of seed 000 App. B are *expanded* by the builder into the joints above
(:data:`JOINT_MACROS`): the point-to-line joint (``Model.point_to_line``: a prismatic
joint ``<name>.s`` along the line to a massless body ``<name>.slider``, then a revolute
joint ``<name>.phi``) and the cam-follower (``Model.cam_follower``: massless arm and pin
bodies on a revolute, a prismatic and a revolute joint, closed by a :class:`CamRelation`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from workbench.errors import ModelError, UnknownNameError
from workbench.kernels.scalar import smoothstep as smoothstep_kernel
from workbench.model.units import UNITS, dimension_of, to_si

GROUND = "ground"

JOINT_TYPES = ("revolute", "prismatic", "cylindrical", "universal", "spherical", "floating",
               "fixed")
CUT_TYPES = ("revolute", "prismatic", "cylindrical", "universal", "spherical", "fixed",
             "point-to-line")
#: joint types the builder expands into primitive joints and massless bodies
JOINT_MACROS = ("point-to-line",)

COORD_SUFFIX = {
    "revolute": [""], "prismatic": [""], "cylindrical": [".s", ".phi"],
    "universal": [".a1", ".a2"], "spherical": [".rz", ".ry", ".rx"],
    "floating": [".x", ".y", ".z", ".rz", ".ry", ".rx"], "fixed": [],
}


# ----------------------------------------------------------------------------------------
# time functions
# ----------------------------------------------------------------------------------------


def _is_num(v) -> bool:
    return isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool)


def _coef(v, label: str):
    """One coefficient of a time function: a number (kept as a float), a parameter name
    (``"mom"``), ``(name, scale)`` / ``{"param": name, "scale": s}`` (kept as ``(name,
    scale)``) or ``{"value": v, "unit": u}`` (kept as given; the compiler converts it with
    the field's dimension).  Anything else raises :class:`ModelError` naming ``label``."""
    if _is_num(v):
        return float(v)
    if isinstance(v, str):
        if not v:
            raise ModelError(f"{label}: empty parameter name")
        return v
    if isinstance(v, (tuple, list)) and len(v) == 2 and isinstance(v[0], str) \
            and _is_num(v[1]):
        return (v[0], float(v[1]))
    if isinstance(v, dict):
        if "param" in v and set(v) <= {"param", "scale"} and isinstance(v["param"], str) \
                and _is_num(v.get("scale", 1.0)):
            return (v["param"], float(v.get("scale", 1.0)))
        if "value" in v and set(v) <= {"value", "unit"} and _is_num(v["value"]):
            if v.get("unit") is None:
                return float(v["value"])
            return {"value": float(v["value"]), "unit": v["unit"]}
    raise ModelError(f"{label}: expected a number or a parameter name (\"name\", "
                     f"(\"name\", scale), {{param, scale}} or {{value, unit}}), got {v!r}")


def _coef_value(v, values, label: str) -> float:
    """SI value of a coefficient of :func:`_coef` (``values``: parameter name -> SI value)."""
    if isinstance(v, float):
        return v
    if isinstance(v, dict):
        unit = str(v["unit"]).strip()
        if unit not in UNITS:
            raise ModelError(f"{label}: unknown unit {v['unit']!r}")
        return v["value"] * UNITS[unit][1]
    name, scale = (v, 1.0) if isinstance(v, str) else v
    if values is None or name not in values:
        raise ModelError(f"{label}: the coefficient is the parameter {name!r}; evaluate "
                         "the function with the parameter values (or through a compiled "
                         "model)")
    return scale * float(values[name])


@dataclass(frozen=True)
class TimeFunction:
    """A scalar function of time with analytic first and second derivatives.

    kinds: ``constant(value)``, ``polynomial(coefficients)`` (ascending powers),
    ``sine(amplitude, omega, phase=0, offset=0, t_start=0)``:
    ``offset + amplitude sin(omega max(t - t_start, 0) + phase)``,
    ``smoothstep(t0, t1, y0, y1)`` (quintic, C2) and
    ``steps(initial, [(t0, t1, dy), ...])`` (a sum of quintic steps).

    Every coefficient may be a number or bound to a named parameter like any other
    numeric field of a model (``"mom"``, ``("mom", -2.0)``, ``{"param": "mom", "scale":
    -2.0}``, ``{"value": 3, "unit": "N*m"}``): the compiled model puts the coefficients in
    its field vector ``p``, so they are differentiable design parameters.  A bare number,
    parameter name or ``(name, scale)`` given where a function is expected is a constant.
    """

    kind: str
    params: tuple

    @staticmethod
    def constant(value) -> "TimeFunction":
        return TimeFunction("constant", (_coef(value, "constant value"),))

    @staticmethod
    def polynomial(coefficients: Sequence) -> "TimeFunction":
        if isinstance(coefficients, (str, dict)) or not hasattr(coefficients, "__len__"):
            raise ModelError(f"polynomial: coefficients must be a list, got {coefficients!r}")
        if len(coefficients) == 0:
            raise ModelError("polynomial: needs at least one coefficient")
        return TimeFunction("polynomial", tuple(_coef(c, f"polynomial coefficients[{i}]")
                                                for i, c in enumerate(coefficients)))

    @staticmethod
    def sine(amplitude, omega, phase=0.0, offset=0.0, t_start=0.0) -> "TimeFunction":
        vals = (amplitude, omega, phase, offset, t_start)
        labels = ("amplitude", "omega", "phase", "offset", "t_start")
        return TimeFunction("sine", tuple(_coef(v, f"sine {k}") for v, k in zip(vals, labels)))

    @staticmethod
    def smoothstep(t0, t1, y0, y1) -> "TimeFunction":
        c = tuple(_coef(v, f"smoothstep {k}")
                  for v, k in zip((t0, t1, y0, y1), ("t0", "t1", "y0", "y1")))
        if isinstance(c[0], float) and isinstance(c[1], float) and not c[1] > c[0]:
            raise ModelError(f"smoothstep needs t1 > t0, got t0={t0}, t1={t1}")
        return TimeFunction("smoothstep", c)

    @staticmethod
    def steps(initial, steps: Sequence[Sequence]) -> "TimeFunction":
        if isinstance(steps, (str, dict)) or not hasattr(steps, "__len__"):
            raise ModelError(f"steps: expected a list of (t0, t1, dy), got {steps!r}")
        flat = [float(len(steps)), _coef(initial, "steps initial")]
        for i, s in enumerate(steps):
            if isinstance(s, (str, dict)) or not hasattr(s, "__len__") or len(s) != 3:
                raise ModelError(f"steps[{i}]: expected (t0, t1, dy), got {s!r}")
            t0, t1, dy = (_coef(v, f"steps[{i}] {k}") for v, k in zip(s, ("t0", "t1", "dy")))
            if isinstance(t0, float) and isinstance(t1, float) and not t1 > t0:
                raise ModelError(f"steps: each step needs t1 > t0, got {s}")
            flat += [t0, t1, dy]
        return TimeFunction("steps", tuple(flat))

    @staticmethod
    def from_spec(spec: Any) -> "TimeFunction":
        """Build from a number, a parameter reference (a constant: ``"mom"``, ``("mom",
        2.0)``, ``{"param": "mom", "scale": 2.0}``, ``{"value": .., "unit": ..}``) or a
        mapping ``{type = "sine", amplitude = ..., ...}``."""
        if isinstance(spec, TimeFunction):
            return spec
        if not isinstance(spec, dict) or "type" not in spec:
            try:
                return TimeFunction.constant(spec)
            except ModelError:
                raise ModelError(f"time function must be a number, a parameter name or a "
                                 f"table with 'type': {spec!r}") from None
        kw = {k: v for k, v in spec.items() if k != "type"}
        kind = spec["type"]
        makers = {"constant": TimeFunction.constant, "polynomial": TimeFunction.polynomial,
                  "sine": TimeFunction.sine, "smoothstep": TimeFunction.smoothstep,
                  "steps": TimeFunction.steps}
        if kind not in makers:
            raise ModelError(f"unknown time function type {kind!r}; known: {sorted(makers)}")
        try:
            return makers[kind](**kw)
        except TypeError as exc:
            raise ModelError(f"time function {kind!r}: {exc}") from None

    def to_spec(self) -> dict:
        names = {"constant": ["value"], "polynomial": None,
                 "sine": ["amplitude", "omega", "phase", "offset", "t_start"],
                 "smoothstep": ["t0", "t1", "y0", "y1"]}
        if self.kind == "polynomial":
            return {"type": "polynomial", "coefficients": list(self.params)}
        if self.kind == "steps":
            nst = int(self.params[0])
            return {"type": "steps", "initial": self.params[1],
                    "steps": [list(self.params[2 + 3 * i: 5 + 3 * i]) for i in range(nst)]}
        return {"type": self.kind, **dict(zip(names[self.kind], self.params))}

    def fields(self) -> list:
        """The coefficients in the order the kernels read them from the field vector, as
        ``(label, coefficient, role)``; ``role`` is ``"y"`` (the dimension of the function
        itself), ``"time"``, ``"omega"``, ``"phase"`` or ``"free"`` (not checked: the
        higher polynomial coefficients).  The count of a ``steps`` function is not a
        field (the kernels take it from the number of fields)."""
        c = self.params
        if self.kind == "constant":
            return [("value", c[0], "y")]
        if self.kind == "polynomial":
            return [(f"coefficients[{i}]", ci, "y" if i == 0 else "free")
                    for i, ci in enumerate(c)]
        if self.kind == "sine":
            return list(zip(("amplitude", "omega", "phase", "offset", "t_start"), c,
                            ("y", "omega", "phase", "y", "time")))
        if self.kind == "smoothstep":
            return list(zip(("t0", "t1", "y0", "y1"), c, ("time", "time", "y", "y")))
        out = [("initial", c[1], "y")]
        for i in range(int(c[0])):
            out += [(f"steps[{i}] t0", c[2 + 3 * i], "time"),
                    (f"steps[{i}] t1", c[3 + 3 * i], "time"),
                    (f"steps[{i}] dy", c[4 + 3 * i], "y")]
        return out

    def parameter_names(self) -> set:
        """Names of the parameters the coefficients are bound to."""
        out = set()
        for _, v, _ in self.fields():
            if isinstance(v, str):
                out.add(v)
            elif isinstance(v, tuple):
                out.add(v[0])
        return out

    def __call__(self, t: float, parameters: dict | None = None) -> float:
        """Value at ``t``; ``parameters`` (name -> SI value) resolves the coefficients
        bound to parameters."""
        k = self.kind
        if k == "steps":
            c = (self.params[0],) + tuple(_coef_value(v, parameters, f"steps {lab}")
                                          for lab, v, _ in self.fields())
        else:
            c = tuple(_coef_value(v, parameters, f"{k} {lab}") for lab, v, _ in self.fields())
        if k == "constant":
            return c[0]
        if k == "polynomial":
            return float(sum(ci * t ** i for i, ci in enumerate(c)))
        if k == "sine":
            return c[3] + c[0] * math.sin(c[1] * max(t - c[4], 0.0) + c[2])
        if k == "smoothstep":
            return smoothstep_kernel(c[0], c[1], c[2], c[3], t)[0]
        val = c[1]
        for i in range(int(c[0])):
            val += smoothstep_kernel(c[2 + 3 * i], c[3 + 3 * i], 0.0, c[4 + 3 * i], t)[0]
        return val


# ----------------------------------------------------------------------------------------
# model elements
# ----------------------------------------------------------------------------------------


@dataclass
class Parameter:
    """A named scalar design parameter (value in ``unit``, converted to SI on use)."""

    name: str
    value: float
    unit: str | None = None
    provenance: str = ""
    lower: float | None = None
    upper: float | None = None

    @property
    def si_value(self) -> float:
        return to_si(self.value, self.unit, dimension_of(self.unit) if self.unit else
                     "dimensionless", f"parameter {self.name}")


@dataclass
class Body:
    name: str
    mass: Any
    com: Any
    inertia: Any
    points: dict = field(default_factory=dict)
    vectors: dict = field(default_factory=dict)
    provenance: str = ""


@dataclass
class Joint:
    name: str
    type: str
    parent: str
    child: str
    parent_point: Any
    child_point: Any
    axis: Any
    axis2: Any
    orientation: Any
    q0: list
    qd0: list
    provenance: str = ""


@dataclass
class CutJoint:
    name: str
    type: str
    body1: str
    body2: str
    point1: Any
    point2: Any
    axis1: Any
    axis2: Any
    provenance: str = ""
    #: point-to-line only: the rotation axis in body1's and body2's frames
    normal: Any = None
    normal2: Any = None


@dataclass
class CamRelation:
    """Cam relation ``z_radial = s(z_polar)`` between the coordinate of the prismatic joint
    ``radial`` and that of the revolute joint ``polar``: ``s(u) = a0 + sum_k (cos[k-1]
    cos(k u) + sin[k-1] sin(k u))``, the cam's pitch curve in polar form (parametric
    length fields; ``cos`` and ``sin`` padded with zeros to the same length)."""

    name: str
    radial: str
    polar: str
    a0: Any
    cos: list
    sin: list
    provenance: str = ""


@dataclass
class Distance:
    """Constant distance ``length`` between two body points; with a ``mass`` it is a ROD
    element (seed 002): a uniform slender bar between the two points, removed from the
    tree, whose inertia, velocity-dependent inertia forces and weight are transferred to
    the two bodies (:func:`workbench.kernels.tree.rod_forces`)."""

    name: str
    body1: str
    point1: Any
    body2: str
    point2: Any
    length: Any
    mass: Any = None


@dataclass
class Drive:
    name: str
    joint: str
    function: TimeFunction
    index: int = 0


@dataclass
class Spring:
    name: str
    body1: str
    point1: Any
    body2: str
    point2: Any
    k: Any
    c: Any
    length: Any
    #: air-spring gas law (``workbench.forces.spring_laws``, LAW_K_AIR): ``area``,
    #: ``volume``, ``pressure`` (absolute, at ``length``), optional ``exponent``, ``ambient``
    air: Any = None
    #: piecewise-linear damper replacing ``c`` (LAW_C_PIECEWISE): ``slopes`` (K + 1),
    #: ``knees`` (K increasing velocities), optional ``width``
    damper: Any = None


@dataclass
class SpeedControl:
    """A stateless speed controller (vehicle kit): drive torque ``T = T_max tanh(K (v_set(t)
    - v) / T_max)`` with ``v`` the velocity of ``point`` of ``body`` along its vector
    ``heading``, shared over driven wheels ``(wheel, carrier, axis, share)``: ``share T``
    about the wheel's ``axis`` on the wheel, the reaction on the carrier."""
    name: str
    body: str
    point: Any
    heading: Any
    speed: Any            # TimeFunction of the set speed (m/s)
    gain: Any             # K, N*m per m/s
    torque_max: Any       # T_max, N*m
    wheels: tuple = ()    # ((wheel, carrier, axis, share), ...)


@dataclass
class PathFollower:
    """A stateless path-following steering servo (vehicle kit, driver): lateral error
    ``e = y_P - f(x_P)`` of the preview ``point`` P of ``body`` from the path ``y = f(x)``
    (a TimeFunction evaluated at the argument ``x_P``), commanded steering coordinate
    ``delta = -gain e`` and the generalised force ``Q_c = stiffness (delta - z_c) - damping
    zd_c`` on coordinate ``index`` of ``joint``."""
    name: str
    body: str
    point: Any
    joint: str
    path: Any             # TimeFunction y = f(x) (m), argument x in m
    gain: Any             # steering coordinate per m of lateral error
    stiffness: Any        # like a joint spring of the joint
    damping: Any
    index: int = 0


@dataclass
class JointSpring:
    name: str
    joint: str
    k: Any
    c: Any
    q0: Any
    index: int = 0


@dataclass
class Tire:
    """Tire-ground contact of a wheel body (force law: :mod:`workbench.forces.tire`)."""

    name: str
    body: str
    center: Any
    axis: Any
    radius: Any
    k: Any
    c: Any
    mu: Any
    v_eps: Any
    depth_ramp: Any
    force_ramp: Any
    provenance: str = ""
    #: tire law: "disc" or "magic-formula" (workbench.forces.tire_mf)
    law: str = "disc"
    #: Magic Formula: the .tir given (shipped name or path), its coefficient values (in the
    #: order of workbench.forces.magic_formula.COEFFICIENT_NAMES) and the overrides
    #: ``{NAME: field}`` (numbers or parameter bindings)
    tir: Any = None
    mf_base: Any = None
    coefficients: dict = field(default_factory=dict)


@dataclass
class Road:
    """Road surface ``z = h(x)``: base height ``z0`` plus quintic (C2) steps, each a dict
    ``{"x": centre, "height": signed height change, "length": transition length}``."""

    z0: Any = 0.0
    steps: list = field(default_factory=list)
    provenance: str = ""


@dataclass
class Load:
    name: str
    kind: str  # "force" or "torque"
    body: str
    point: Any
    direction: Any
    function: TimeFunction


def as_vec3(v, where) -> list:
    if isinstance(v, str):
        raise ModelError(f"{where}: expected three coordinates, got the name {v!r}")
    try:
        vals = list(v)
    except TypeError:
        raise ModelError(f"{where}: expected three coordinates, got {v!r}") from None
    if len(vals) != 3:
        raise ModelError(f"{where}: expected three coordinates, got {len(vals)}")
    return vals


def unit_vector(v, where) -> np.ndarray:
    a = np.asarray(as_vec3(v, where), dtype=float)
    nrm = np.linalg.norm(a)
    if not np.isfinite(nrm) or nrm < 1e-12:
        raise ModelError(f"{where}: axis {v!r} has zero length")
    return a / nrm


def perpendiculars(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    t = np.array([1.0, 0.0, 0.0]) if abs(a[0]) < 0.9 else np.array([0.0, 1.0, 0.0])
    v = np.cross(a, t)
    v /= np.linalg.norm(v)
    w = np.cross(a, v)
    return v, w




def numeric_value(v, values: dict, where: str) -> float:
    """The SI value of a numeric field given as a number, a parameter name, ``(name,
    scale)``, ``{"param": .., "scale": ..}`` or ``{"value": .., "unit": ..}``, with
    ``values`` (parameter name -> SI value); for load-time guesses computed from fields."""
    c = _coef(v, where)
    name = c if isinstance(c, str) else (c[0] if isinstance(c, tuple) else None)
    if name is not None and name not in values:
        raise UnknownNameError("parameter", name, values)
    return _coef_value(c, values, where)


#: how rod elements enter the equations of motion (seed 002): ``exact`` keeps their
#: acceleration-dependent inertia forces on the left-hand side (eq 24), ``extrapolated``
#: moves all of them to the right-hand side with extrapolated accelerations (eqs 25-32),
#: ``partitioned`` keeps the body-diagonal blocks exact and extrapolates the coupling
#: blocks (eqs 47-51).  Extrapolation of the relative accelerations from the stored
#: history: ``point`` (O(h)), ``linear`` (O(h^2)), ``quadratic`` (O(h^3)), eqs 33-40.
ROD_MODES = ("exact", "extrapolated", "partitioned")
ROD_EXTRAPOLATIONS = ("point", "linear", "quadratic")
