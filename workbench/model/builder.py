"""The :class:`Model` builder: named bodies, joints, constraints, force elements and
parameters (the elements of :mod:`workbench.model.elements`), compiled by
:func:`workbench.compiled.compile_model` into the immutable array form of the kernels."""

from __future__ import annotations

from typing import Any

import numpy as np

from workbench.compiled.build import compile_model
from workbench.errors import ModelError, UnknownNameError
from workbench.forces.magic_formula import (COEFFICIENT_NAMES, DEFAULT_V_EPS, SCALING_NAMES,
                                            coefficient_index)
from workbench.forces.tir import read_tir, resolve_tir
from workbench.forces.tire_mf import LAW_NAMES
from workbench.model.elements import (COORD_SUFFIX, CUT_TYPES, GROUND, JOINT_TYPES, Body, CutJoint,
                                      Distance, Drive, Joint, JointSpring, Load, Parameter, Road,
                                      Spring, TimeFunction, Tire, as_vec3, unit_vector)
from workbench.model.serialize import model_to_dict
from workbench.model.units import dimension_of


def _function(spec, where: str) -> TimeFunction:
    """:meth:`TimeFunction.from_spec` with the element named in its errors."""
    try:
        return TimeFunction.from_spec(spec)
    except ModelError as exc:
        raise ModelError(f"{where}: {exc}") from None


def _tire_law(name: str, law, tir, coefficients, radius, v_eps):
    """Checked law data of tire ``name``: ``(law, tir, mf_base, coefficients, radius,
    v_eps)`` (the Magic Formula coefficients of the ``.tir`` file read now, so that a bad
    file or name is reported by the call that gives it)."""
    where = f"tire {name!r}"
    if law not in LAW_NAMES:
        raise ModelError(f"{where}: unknown law {law!r} (known: {', '.join(LAW_NAMES)})")
    if law == "disc":
        if tir is not None or coefficients:
            raise ModelError(f"{where}: tir and coefficients need law='magic-formula'")
        if radius is None:
            raise ModelError(f"{where}: radius is required")
        return law, None, None, {}, radius, 0.1 if v_eps is None else v_eps
    if coefficients is None:
        coefficients = {}
    if not isinstance(coefficients, dict):
        raise ModelError(f"{where}: coefficients must be a mapping NAME -> value, got "
                         f"{coefficients!r}")
    index = coefficient_index()
    values = {}
    for key, spec in coefficients.items():
        if not isinstance(key, str) or key.upper() not in index:
            exc = UnknownNameError("Magic Formula coefficient", key, COEFFICIENT_NAMES)
            exc.args = (f"{where}: {exc.args[0]}",) + tuple(exc.args[1:])
            raise exc
        values[key.upper()] = spec
    if tir is None:
        base = [1.0 if nm in SCALING_NAMES else 0.0 for nm in COEFFICIENT_NAMES]
    else:
        try:
            base = [float(v) for v in read_tir(resolve_tir(tir)).array]
        except ModelError as exc:
            raise ModelError(f"{where}: {exc}") from None
    if radius is None:
        radius = base[index["UNLOADED_RADIUS"]]
    return (law, None if tir is None else str(tir), tuple(base), values, radius,
            DEFAULT_V_EPS if v_eps is None else v_eps)


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
        self.gravity = [float(g) for g in as_vec3(gravity, "gravity")]
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
        self.bodies[name] = Body(name, mass, as_vec3(com, f"body {name} com"), inertia,
                                 provenance=provenance)
        for pn, pv in (points or {}).items():
            self.point(name, pn, pv)
        for vn, vv in (vectors or {}).items():
            self.vector(name, vn, vv)
        return name

    def point(self, body: str, name: str, coords) -> str:
        """Named point on ``body`` (body-frame coordinates; global for ground)."""
        b = self._body(body)
        b.points[name] = as_vec3(coords, f"point {body}.{name}")
        return name

    def vector(self, body: str, name: str, direction) -> str:
        """Named unit vector on ``body`` (body-frame components)."""
        b = self._body(body)
        b.vectors[name] = list(unit_vector(direction, f"vector {body}.{name}"))
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
        ncoord = len(COORD_SUFFIX[type])
        q0 = self._coord_list(q0, ncoord, f"joint {name} q0")
        qd0 = self._coord_list(qd0, ncoord, f"joint {name} qd0")
        if orientation is not None:
            R = np.asarray(orientation, dtype=float)
            if R.shape != (3, 3) or not np.allclose(R @ R.T, np.eye(3), atol=1e-9) \
                    or np.linalg.det(R) < 0:
                raise ModelError(f"joint {name!r}: orientation is not a rotation matrix")
            orientation = R.tolist()
        self.joints[name] = Joint(name, type, parent, child, parent_point, child_point,
                                  list(unit_vector(axis, f"joint {name} axis")),
                                  list(unit_vector(axis2, f"joint {name} axis2")), orientation,
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
        a1 = list(unit_vector(axis1, f"cut joint {name} axis1"))
        a2 = list(unit_vector(axis2 if axis2 is not None else axis1, f"cut joint {name} axis2"))
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
        self.drives[name] = Drive(name, joint, _function(function, f"drive {name!r}"),
                                  int(index))
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
        """Applied force ``function(t) * direction`` (global) at ``point`` of ``body``.

        The coefficients of ``function`` (a number, a parameter name, ``(name, scale)`` or a
        :class:`TimeFunction` table) and the components of ``direction`` may be bound to
        parameters like every numeric field."""
        self._new_name(name, "force")
        self._body(body)
        where = f"force {name!r}"
        self.loads[name] = Load(name, "force", body, point,
                                list(as_vec3(direction, f"{where} direction")),
                                _function(function, where))
        return name

    def torque(self, name: str, body: str, direction, function) -> str:
        """Applied torque ``function(t) * direction`` (global) on ``body`` (function and
        direction bindable to parameters as in :meth:`force`)."""
        self._new_name(name, "torque")
        self._body(body)
        where = f"torque {name!r}"
        self.loads[name] = Load(name, "torque", body, None,
                                list(as_vec3(direction, f"{where} direction")),
                                _function(function, where))
        return name

    def tire(self, name: str, body: str, center, axis, radius, k, c=0.0, mu=0.8,
             v_eps=None, depth_ramp=1e-3, force_ramp=10.0, provenance: str = "",
             law: str = "disc", tir=None, coefficients=None) -> str:
        """Tire-ground contact of the wheel ``body``: a rigid disc of ``radius`` centred at
        the point ``center`` (name or body-frame coordinates) with the spin axis ``axis``
        (vector name or body-frame components) against the road (:meth:`road`).

        Normal force ``k delta + c delta_dot`` (penetration ``delta`` of the disc's lowest
        point below the road), switched on smoothly over ``depth_ramp`` (m) and kept
        non-negative by a C1 ramp over ``force_ramp`` (N); tangential force
        ``-mu N v_t / sqrt(|v_t|^2 + v_eps^2)`` from the slip velocity ``v_t`` of the
        contact point (regularised Coulomb).  The law and its analytic Jacobian are in
        :mod:`workbench.forces.tire`.  Every numeric argument may be bound to a parameter.
        ``v_eps`` defaults to 0.1 m/s.

        ``law="magic-formula"`` replaces the friction law by the steady-state Magic Formula
        5.2 (:mod:`workbench.forces.tire_mf`; docs/magic-formula.md): same contact point and
        normal force, tangential force and aligning moment from the coefficients of the
        ``.tir`` file ``tir`` (a shipped name such as ``"mf52_205_60R15"``, or a path) with the
        overrides ``coefficients = {NAME: field}`` (each a number or a parameter binding,
        like the other fields, so any coefficient can be a design parameter).  ``v_eps`` is
        then the slip regularisation speed (default 0.5 m/s), ``mu`` is not used, and
        ``radius=None`` takes the file's ``UNLOADED_RADIUS``; ``axis`` must point to the left
        of the direction of travel (ISO-W).
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
            center = as_vec3(center, f"tire {name} center")
        if isinstance(axis, str):
            if axis not in self.bodies[body].vectors:
                raise UnknownNameError(f"vector on body {body!r}", axis,
                                       self.bodies[body].vectors)
        else:
            axis = list(unit_vector(axis, f"tire {name} axis"))
        law, tir, mf_base, coefficients, radius, v_eps = _tire_law(name, law, tir, coefficients,
                                                                   radius, v_eps)
        self.tires[name] = Tire(name, body, center, axis, radius, k, c, mu, v_eps, depth_ramp,
                                force_ramp, provenance, law, tir, mf_base, coefficients)
        return name

    def road(self, z0=0.0, steps=(), provenance: str = "") -> None:
        """Road surface for the tires: ``z = z0 + sum_i height_i s((x - x_i)/length_i + 1/2)``
        with the quintic step ``s`` (C2; :mod:`workbench.forces.tire`).  ``steps`` is a list of
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
        return compile_model(self, parameters or {})

    # -- serialisation -------------------------------------------------------------------
    def to_dict(self) -> dict:
        return model_to_dict(self)
