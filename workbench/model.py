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
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from .errors import ModelError, UnknownNameError
from .units import dimension_of, to_si

GROUND = "ground"

JOINT_TYPES = ("revolute", "prismatic", "cylindrical", "universal", "spherical", "floating",
               "fixed")
CUT_TYPES = ("revolute", "prismatic", "cylindrical", "universal", "spherical", "fixed")

_COORD_SUFFIX = {
    "revolute": [""], "prismatic": [""], "cylindrical": [".s", ".phi"],
    "universal": [".a1", ".a2"], "spherical": [".rz", ".ry", ".rx"],
    "floating": [".x", ".y", ".z", ".rz", ".ry", ".rx"], "fixed": [],
}


# ----------------------------------------------------------------------------------------
# time functions
# ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TimeFunction:
    """A scalar function of time with analytic first and second derivatives.

    kinds: ``constant(value)``, ``polynomial(coefficients)`` (ascending powers),
    ``sine(amplitude, omega, phase=0, offset=0, t_start=0)``,
    ``smoothstep(t0, t1, y0, y1)`` (quintic, C2) and
    ``steps(initial, [(t0, t1, dy), ...])`` (a sum of quintic steps).
    """

    kind: str
    params: tuple

    @staticmethod
    def constant(value: float) -> "TimeFunction":
        return TimeFunction("constant", (float(value),))

    @staticmethod
    def polynomial(coefficients: Sequence[float]) -> "TimeFunction":
        return TimeFunction("polynomial", tuple(float(c) for c in coefficients))

    @staticmethod
    def sine(amplitude, omega, phase=0.0, offset=0.0, t_start=0.0) -> "TimeFunction":
        return TimeFunction("sine", (float(amplitude), float(omega), float(phase), float(offset),
                                     float(t_start)))

    @staticmethod
    def smoothstep(t0, t1, y0, y1) -> "TimeFunction":
        if not t1 > t0:
            raise ModelError(f"smoothstep needs t1 > t0, got t0={t0}, t1={t1}")
        return TimeFunction("smoothstep", (float(t0), float(t1), float(y0), float(y1)))

    @staticmethod
    def steps(initial: float, steps: Sequence[Sequence[float]]) -> "TimeFunction":
        flat = [float(len(steps)), float(initial)]
        for s in steps:
            t0, t1, dy = (float(v) for v in s)
            if not t1 > t0:
                raise ModelError(f"steps: each step needs t1 > t0, got {s}")
            flat += [t0, t1, dy]
        return TimeFunction("steps", tuple(flat))

    @staticmethod
    def from_spec(spec: Any) -> "TimeFunction":
        """Build from a number or a mapping ``{type = "sine", amplitude = ..., ...}``."""
        if isinstance(spec, TimeFunction):
            return spec
        if isinstance(spec, (int, float)):
            return TimeFunction.constant(spec)
        if not isinstance(spec, dict) or "type" not in spec:
            raise ModelError(f"time function must be a number or a table with 'type': {spec!r}")
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

    def __call__(self, t: float) -> float:
        from ._kernels import _smoothstep
        k, c = self.kind, self.params
        if k == "constant":
            return c[0]
        if k == "polynomial":
            return float(sum(ci * t ** i for i, ci in enumerate(c)))
        if k == "sine":
            return c[3] + c[0] * math.sin(c[1] * max(t - c[4], 0.0) + c[2])
        if k == "smoothstep":
            return _smoothstep(c[0], c[1], c[2], c[3], t)[0]
        val = c[1]
        for i in range(int(c[0])):
            val += _smoothstep(c[2 + 3 * i], c[3 + 3 * i], 0.0, c[4 + 3 * i], t)[0]
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


@dataclass
class Distance:
    name: str
    body1: str
    point1: Any
    body2: str
    point2: Any
    length: Any


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
    """Tire-ground contact of a wheel body (force law: :mod:`workbench._tire`)."""

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


def _as_vec3(v, where) -> list:
    if isinstance(v, str):
        raise ModelError(f"{where}: expected three coordinates, got the name {v!r}")
    try:
        vals = list(v)
    except TypeError:
        raise ModelError(f"{where}: expected three coordinates, got {v!r}") from None
    if len(vals) != 3:
        raise ModelError(f"{where}: expected three coordinates, got {len(vals)}")
    return vals


def _unit(v, where) -> np.ndarray:
    a = np.asarray(_as_vec3(v, where), dtype=float)
    nrm = np.linalg.norm(a)
    if not np.isfinite(nrm) or nrm < 1e-12:
        raise ModelError(f"{where}: axis {v!r} has zero length")
    return a / nrm


def _perpendiculars(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    t = np.array([1.0, 0.0, 0.0]) if abs(a[0]) < 0.9 else np.array([0.0, 1.0, 0.0])
    v = np.cross(a, t)
    v /= np.linalg.norm(v)
    w = np.cross(a, v)
    return v, w


class Model:
    """Builder of a multibody model in relative (joint) coordinates.

    Parameters
    ----------
    name : str
        Model name.
    gravity : sequence of 3 floats
        Gravity acceleration vector in m/s^2 (global frame).
    planar : bool
        Declare a planar model (all revolute axes along global z, prismatic axes in the
        xy plane).  Cut joints then produce only their in-plane equations, so no
        constraint is redundant.
    description, provenance : str
        Free text; ``provenance`` says where the model data come from.
    """

    def __init__(self, name: str, gravity=(0.0, 0.0, -9.81), planar: bool = False,
                 description: str = "", provenance: str = ""):
        self.name = name
        self.gravity = [float(g) for g in _as_vec3(gravity, "gravity")]
        self.planar = bool(planar)
        self.description = description
        self.provenance = provenance
        self.parameters: dict[str, Parameter] = {}
        self.bodies: dict[str, Body] = {GROUND: Body(GROUND, 0.0, (0, 0, 0), (0, 0, 0))}
        self.joints: dict[str, Joint] = {}
        self.cuts: dict[str, CutJoint] = {}
        self.distances: dict[str, Distance] = {}
        self.drives: dict[str, Drive] = {}
        self.springs: dict[str, Spring] = {}
        self.joint_springs: dict[str, JointSpring] = {}
        self.loads: dict[str, Load] = {}
        self.tires: dict[str, Tire] = {}
        self.road_spec: Road | None = None
        self.dof_spec: list | None = None
        self.objectives: dict[str, dict] = {}
        self.meta: dict[str, Any] = {}

    # -- names --------------------------------------------------------------------------
    def _new_name(self, name: str, kind: str):
        for table in (self.joints, self.cuts, self.distances, self.drives, self.springs,
                      self.joint_springs, self.loads, self.tires):
            if name in table:
                raise ModelError(f"{kind} name {name!r} is already used in model {self.name!r}")

    def _body(self, name: str) -> Body:
        if name not in self.bodies:
            raise UnknownNameError("body", name, self.bodies)
        return self.bodies[name]

    # -- parameters ---------------------------------------------------------------------
    def parameter(self, name: str, value: float, unit: str | None = None, provenance: str = "",
                  lower: float | None = None, upper: float | None = None) -> str:
        """Declare a named scalar parameter; returns its name for use in fields."""
        if name in self.parameters:
            raise ModelError(f"parameter {name!r} is declared twice")
        if unit is not None:
            dimension_of(unit)
        if not np.isfinite(float(value)):
            raise ModelError(f"parameter {name!r} has a non-finite value {value!r}")
        self.parameters[name] = Parameter(name, float(value), unit, provenance, lower, upper)
        return name

    # -- bodies, points, vectors --------------------------------------------------------
    def body(self, name: str, mass, com=(0.0, 0.0, 0.0), inertia=(0.0, 0.0, 0.0),
             points: dict | None = None, vectors: dict | None = None,
             provenance: str = "") -> str:
        """Add a rigid body.

        ``inertia`` is about the centre of mass in body axes: ``(Ixx, Iyy, Izz)`` or
        ``(Ixx, Iyy, Izz, Ixy, Ixz, Iyz)``.
        """
        if name in self.bodies:
            raise ModelError(f"body {name!r} is declared twice")
        inertia = list(inertia)
        if len(inertia) == 3:
            inertia = inertia + [0.0, 0.0, 0.0]
        if len(inertia) != 6:
            raise ModelError(f"body {name!r}: inertia needs 3 or 6 components")
        self.bodies[name] = Body(name, mass, _as_vec3(com, f"body {name} com"), inertia,
                                 provenance=provenance)
        for pn, pv in (points or {}).items():
            self.point(name, pn, pv)
        for vn, vv in (vectors or {}).items():
            self.vector(name, vn, vv)
        return name

    def point(self, body: str, name: str, coords) -> str:
        """Named point on ``body`` (body-frame coordinates; global for ground)."""
        b = self._body(body)
        b.points[name] = _as_vec3(coords, f"point {body}.{name}")
        return name

    def vector(self, body: str, name: str, direction) -> str:
        """Named unit vector on ``body`` (body-frame components)."""
        b = self._body(body)
        b.vectors[name] = list(_unit(direction, f"vector {body}.{name}"))
        return name

    # -- joints -------------------------------------------------------------------------
    def joint(self, name: str, type: str, parent: str, child: str, parent_point=(0, 0, 0),
              child_point=(0, 0, 0), axis=(0, 0, 1), axis2=(0, 1, 0), orientation=None,
              q0=None, qd0=None, provenance: str = "") -> str:
        """Add a tree joint from ``parent`` to ``child`` (see the module docstring)."""
        if type not in JOINT_TYPES:
            raise ModelError(f"joint {name!r}: unknown type {type!r}; known: {JOINT_TYPES}")
        self._new_name(name, "joint")
        self._body(parent)
        self._body(child)
        if child == GROUND:
            raise ModelError(f"joint {name!r}: ground cannot be a child")
        for j in self.joints.values():
            if j.child == child:
                raise ModelError(f"joint {name!r}: body {child!r} already has tree joint "
                                 f"{j.name!r}; close loops with a cut joint")
        ncoord = len(_COORD_SUFFIX[type])
        q0 = self._coord_list(q0, ncoord, f"joint {name} q0")
        qd0 = self._coord_list(qd0, ncoord, f"joint {name} qd0")
        if orientation is not None:
            R = np.asarray(orientation, dtype=float)
            if R.shape != (3, 3) or not np.allclose(R @ R.T, np.eye(3), atol=1e-9) \
                    or np.linalg.det(R) < 0:
                raise ModelError(f"joint {name!r}: orientation is not a rotation matrix")
            orientation = R.tolist()
        self.joints[name] = Joint(name, type, parent, child, parent_point, child_point,
                                  list(_unit(axis, f"joint {name} axis")),
                                  list(_unit(axis2, f"joint {name} axis2")), orientation,
                                  q0, qd0, provenance)
        return name

    @staticmethod
    def _coord_list(v, ncoord, where):
        if v is None:
            return [0.0] * ncoord
        if isinstance(v, (int, float)):
            v = [v]
        v = [float(x) for x in v]
        if len(v) != ncoord:
            raise ModelError(f"{where}: expected {ncoord} values, got {len(v)}")
        return v

    def revolute(self, name, parent, child, **kw):
        return self.joint(name, "revolute", parent, child, **kw)

    def prismatic(self, name, parent, child, **kw):
        return self.joint(name, "prismatic", parent, child, **kw)

    def cylindrical(self, name, parent, child, **kw):
        return self.joint(name, "cylindrical", parent, child, **kw)

    def universal(self, name, parent, child, **kw):
        return self.joint(name, "universal", parent, child, **kw)

    def spherical(self, name, parent, child, **kw):
        return self.joint(name, "spherical", parent, child, **kw)

    def floating(self, name, parent, child, **kw):
        return self.joint(name, "floating", parent, child, **kw)

    def fixed(self, name, parent, child, **kw):
        return self.joint(name, "fixed", parent, child, **kw)

    def cut(self, name: str, type: str, body1: str, body2: str, point1=(0, 0, 0),
            point2=(0, 0, 0), axis1=(0, 0, 1), axis2=None, provenance: str = "") -> str:
        """Loop-closure (cut) joint between ``body1`` and ``body2``.

        ``point1``/``point2`` must coincide; ``axis1`` (body1 frame) and ``axis2`` (body2
        frame, default: same components as axis1) must be parallel for revolute,
        prismatic and cylindrical joints, perpendicular for universal joints.
        """
        if type not in CUT_TYPES:
            raise ModelError(f"cut joint {name!r}: unknown type {type!r}; known: {CUT_TYPES}")
        self._new_name(name, "cut joint")
        self._body(body1)
        self._body(body2)
        a1 = list(_unit(axis1, f"cut joint {name} axis1"))
        a2 = list(_unit(axis2 if axis2 is not None else axis1, f"cut joint {name} axis2"))
        self.cuts[name] = CutJoint(name, type, body1, body2, point1, point2, a1, a2, provenance)
        return name

    def distance(self, name: str, body1: str, point1, body2: str, point2, length) -> str:
        """Rigid-rod (constant distance) constraint between two points."""
        self._new_name(name, "distance constraint")
        self._body(body1)
        self._body(body2)
        self.distances[name] = Distance(name, body1, point1, body2, point2, length)
        return name

    def drive(self, name: str, joint: str, function, index: int = 0) -> str:
        """Rheonomic constraint: coordinate ``index`` of ``joint`` follows ``function(t)``."""
        self._new_name(name, "drive")
        self.drives[name] = Drive(name, joint, TimeFunction.from_spec(function), int(index))
        return name

    # -- force elements -----------------------------------------------------------------
    def spring(self, name: str, body1: str, point1, body2: str, point2, k, c=0.0,
               length=0.0) -> str:
        """Point-to-point linear spring-damper: tension ``k (L - length) + c dL/dt``."""
        self._new_name(name, "spring")
        self._body(body1)
        self._body(body2)
        self.springs[name] = Spring(name, body1, point1, body2, point2, k, c, length)
        return name

    def joint_spring(self, name: str, joint: str, k, c=0.0, q0=0.0, index: int = 0) -> str:
        """Spring-damper on a joint coordinate: ``Q = -k (z - q0) - c zdot``."""
        self._new_name(name, "joint spring")
        self.joint_springs[name] = JointSpring(name, joint, k, c, q0, int(index))
        return name

    def force(self, name: str, body: str, point, direction, function) -> str:
        """Applied force ``function(t) * direction`` (global) at ``point`` of ``body``."""
        self._new_name(name, "force")
        self._body(body)
        self.loads[name] = Load(name, "force", body, point, list(_as_vec3(direction, name)),
                                TimeFunction.from_spec(function))
        return name

    def torque(self, name: str, body: str, direction, function) -> str:
        """Applied torque ``function(t) * direction`` (global) on ``body``."""
        self._new_name(name, "torque")
        self._body(body)
        self.loads[name] = Load(name, "torque", body, None, list(_as_vec3(direction, name)),
                                TimeFunction.from_spec(function))
        return name

    def tire(self, name: str, body: str, center, axis, radius, k, c=0.0, mu=0.8,
             v_eps=0.1, depth_ramp=1e-3, force_ramp=10.0, provenance: str = "") -> str:
        """Tire-ground contact of the wheel ``body``: a rigid disc of ``radius`` centred at
        the point ``center`` (name or body-frame coordinates) with the spin axis ``axis``
        (vector name or body-frame components) against the road (:meth:`road`).

        Normal force ``k delta + c delta_dot`` (penetration ``delta`` of the disc's lowest
        point below the road), switched on smoothly over ``depth_ramp`` (m) and kept
        non-negative by a C1 ramp over ``force_ramp`` (N); tangential force
        ``-mu N v_t / sqrt(|v_t|^2 + v_eps^2)`` from the slip velocity ``v_t`` of the
        contact point (regularised Coulomb).  The law and its analytic Jacobian are in
        :mod:`workbench._tire`.  Every numeric argument may be bound to a parameter.
        """
        self._new_name(name, "tire")
        self._body(body)
        if body == GROUND:
            raise ModelError(f"tire {name!r}: the wheel cannot be the ground")
        if isinstance(center, str):
            if center not in self.bodies[body].points:
                raise UnknownNameError(f"point on body {body!r}", center,
                                       self.bodies[body].points)
        else:
            center = _as_vec3(center, f"tire {name} center")
        if isinstance(axis, str):
            if axis not in self.bodies[body].vectors:
                raise UnknownNameError(f"vector on body {body!r}", axis,
                                       self.bodies[body].vectors)
        else:
            axis = list(_unit(axis, f"tire {name} axis"))
        self.tires[name] = Tire(name, body, center, axis, radius, k, c, mu, v_eps, depth_ramp,
                                force_ramp, provenance)
        return name

    def road(self, z0=0.0, steps=(), provenance: str = "") -> None:
        """Road surface for the tires: ``z = z0 + sum_i height_i s((x - x_i)/length_i + 1/2)``
        with the quintic step ``s`` (C2; :mod:`workbench._tire`).  ``steps`` is a list of
        ``{"x": centre, "height": signed change (negative = step down), "length": transition
        length}`` (or 3-tuples in that order).  Without a call the road is flat, ``z = 0``.
        """
        if self.road_spec is not None:
            raise ModelError(f"model {self.name!r}: the road is declared twice")
        out = []
        for i, st in enumerate(steps):
            if isinstance(st, dict):
                unknown = set(st) - {"x", "height", "length"}
                missing = {"x", "height", "length"} - set(st)
                if unknown or missing:
                    raise ModelError(f"road step #{i + 1}: needs keys x, height, length"
                                     + (f"; unknown: {sorted(unknown)}" if unknown else "")
                                     + (f"; missing: {sorted(missing)}" if missing else ""))
                out.append({"x": st["x"], "height": st["height"], "length": st["length"]})
            else:
                vals = list(st)
                if len(vals) != 3:
                    raise ModelError(f"road step #{i + 1}: expected (x, height, length), "
                                     f"got {st!r}")
                out.append({"x": vals[0], "height": vals[1], "length": vals[2]})
        self.road_spec = Road(z0, out, provenance)

    # -- degrees of freedom ------------------------------------------------------------
    def dof(self, *specs) -> None:
        """Choose the degrees of freedom (independent coordinates).

        Each item is a coordinate name (``"crank"``, ``"chassis.z"``) or a natural
        coordinate ``{"point": "body.point", "axis": "x", "velocity": 0.0}`` (seed 001
        §2.2.3, non-constant B).  Without a choice, :meth:`compile` picks the
        coordinates whose null-space rows are best conditioned at the initial guess.
        """
        self.dof_spec = list(specs)

    # -- compilation ---------------------------------------------------------------------
    def compile(self, parameters: dict[str, float] | None = None):
        """Compile into a :class:`~workbench.compiled.CompiledModel`.

        ``parameters`` overrides parameter values (in the parameter's own unit).
        """
        from .compiled import compile_model
        return compile_model(self, parameters or {})

    # -- serialisation -------------------------------------------------------------------
    def to_dict(self) -> dict:
        from .io import model_to_dict
        return model_to_dict(self)
