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
from workbench.kernels.scalar import cam_profile
from workbench.model.elements import (COORD_SUFFIX, CUT_TYPES, GROUND, JOINT_MACROS, JOINT_TYPES,
                                      ROD_EXTRAPOLATIONS, ROD_MODES, Body, CamRelation, CutJoint,
                                      Distance, Drive, Joint, JointSpring, Load, Parameter,
                                      PathFollower, Road, SpeedControl, Spring, TimeFunction, Tire,
                                      as_vec3, numeric_value, unit_vector)
from workbench.model.serialize import model_to_dict
from workbench.model.units import dimension_of


def _function(spec, where: str) -> TimeFunction:
    """:meth:`TimeFunction.from_spec` with the element named in its errors."""
    try:
        return TimeFunction.from_spec(spec)
    except ModelError as exc:
        raise ModelError(f"{where}: {exc}") from None



def _options(table, where: str, required: set, optional: set):
    """A copy of an element's option table with its keys checked (None stays None)."""
    if table is None:
        return None
    if not isinstance(table, dict):
        raise ModelError(f"{where}: expected a table of options, got {table!r}")
    keys = set(table)
    if not required <= keys or not keys <= required | optional:
        raise ModelError(f"{where}: needs {sorted(required)}"
                         + (f", may have {sorted(optional)}" if optional else "")
                         + f"; got {sorted(keys)}")
    return dict(table)
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
        self.cams: dict[str, CamRelation] = {}
        self.drives: dict[str, Drive] = {}
        self.springs: dict[str, Spring] = {}
        self.joint_springs: dict[str, JointSpring] = {}
        self.loads: dict[str, Load] = {}
        self.tires: dict[str, Tire] = {}
        self.speed_controls: dict[str, SpeedControl] = {}
        self.path_followers: dict[str, PathFollower] = {}
        self.road_spec: Road | None = None
        self.dof_spec: list | None = None
        self.objectives: dict[str, dict] = {}
        self.meta: dict[str, Any] = {}
        #: default treatment of rod elements by explicit integrators (``ROD_MODES``,
        #: ``ROD_EXTRAPOLATIONS``; the implicit trapezoidal rule always keeps them exact)
        self.rod_mode = "exact"
        self.rod_extrapolation = "quadratic"

    # -- names --------------------------------------------------------------------------
    def _new_name(self, name: str, kind: str):
        for table in (self.joints, self.cuts, self.distances, self.cams, self.drives,
                      self.springs, self.joint_springs, self.loads, self.tires,
                      self.speed_controls, self.path_followers):
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
              q0=None, qd0=None, provenance: str = "", normal=None) -> str:
        """Add a tree joint from ``parent`` to ``child`` (see the module docstring).

        ``type = "point-to-line"`` is :meth:`point_to_line` (``axis``: the line,
        ``normal``: the rotation axis, default z); ``normal`` belongs to that type only."""
        if type == "point-to-line":
            return self.point_to_line(name, parent, child, axis, (0, 0, 1) if normal is None
                                      else normal, parent_point=parent_point,
                                      child_point=child_point, orientation=orientation,
                                      q0=q0, qd0=qd0, provenance=provenance)
        if normal is not None:
            raise ModelError(f"joint {name!r}: 'normal' belongs to point-to-line joints only")
        if type not in JOINT_TYPES:
            raise ModelError(f"joint {name!r}: unknown type {type!r}; known: "
                             f"{JOINT_TYPES + JOINT_MACROS}")
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
            point2=(0, 0, 0), axis1=(0, 0, 1), axis2=None, provenance: str = "",
            normal=None, normal2=None) -> str:
        """Loop-closure (cut) joint between ``body1`` and ``body2``.

        ``point1``/``point2`` must coincide; ``axis1`` (body1 frame) and ``axis2`` (body2
        frame, default: same components as axis1) must be parallel for revolute,
        prismatic and cylindrical joints, perpendicular for universal joints.

        ``point-to-line`` (seed 000 App. B.1 as a closure): ``point2`` of body2 stays on
        the line of body1 through ``point1`` along ``axis1``, and body2 turns freely about
        the rotation axis ``normal`` (body1 frame, default z; ``normal2``: the same axis in
        body2's frame, default the same components) kept parallel: in a planar model the one
        equation ``(x2 - x1) . (z x a1) = 0`` (the transverse row of the cut prismatic);
        in space two such rows (normals of ``axis1``) and two parallelism rows of the
        normals.  ``axis2`` is not used.
        """
        if type not in CUT_TYPES:
            raise ModelError(f"cut joint {name!r}: unknown type {type!r}; known: {CUT_TYPES}")
        self._new_name(name, "cut joint")
        self._body(body1)
        self._body(body2)
        a1 = list(unit_vector(axis1, f"cut joint {name} axis1"))
        a2 = list(unit_vector(axis2 if axis2 is not None else axis1, f"cut joint {name} axis2"))
        n1 = n2 = None
        if type == "point-to-line":
            n1 = list(unit_vector((0, 0, 1) if normal is None else normal,
                                  f"cut joint {name} normal"))
            n2 = list(unit_vector(n1 if normal2 is None else normal2,
                                  f"cut joint {name} normal2"))
            if np.linalg.norm(np.cross(a1, n1)) < 1e-9:
                raise ModelError(f"cut joint {name!r}: the line axis1 is parallel to the "
                                 "rotation axis normal (that is a cylindrical joint)")
        elif normal is not None or normal2 is not None:
            raise ModelError(f"cut joint {name!r}: 'normal'/'normal2' belong to "
                             "point-to-line cuts only")
        self.cuts[name] = CutJoint(name, type, body1, body2, point1, point2, a1, a2, provenance,
                                   n1, n2)
        return name

    # -- seed 000 App. B: point-to-line joint and cam-follower (expanded) ------------------
    def _free_child(self, child: str, where: str) -> None:
        """ModelError unless ``child`` (a body) can take a new tree joint: checked before a
        macro adds anything, so that a refused macro leaves the model as it was."""
        self._body(child)
        if child == GROUND:
            raise ModelError(f"{where}: ground cannot be a child")
        for j in self.joints.values():
            if j.child == child:
                raise ModelError(f"{where}: body {child!r} already has tree joint "
                                 f"{j.name!r}; close loops with a cut joint")

    def point_to_line(self, name: str, parent: str, child: str, axis, normal=(0, 0, 1),
                      parent_point=(0, 0, 0), child_point=(0, 0, 0), orientation=None,
                      q0=None, qd0=None, provenance: str = "") -> str:
        """Point-to-line joint (seed 000 App. B.1, Fig. B.9): the point ``child_point`` of
        ``child`` slides on the line of ``parent`` through ``parent_point`` along ``axis``
        (parent frame) while ``child`` turns about ``normal`` (parent frame, default z).

        Expanded, as the seed builds it, into a prismatic joint ``<name>.s`` along the
        line from ``parent`` to an implicit massless body ``<name>.slider`` (frame at the
        point, parallel to the parent's at zero slide; point ``P``), then a revolute joint
        ``<name>.phi`` at the point about ``normal`` to ``child`` (``orientation``: the
        child frame relative to the parent's at zero coordinates).  The coordinates are
        those two joints': ``<name>.s`` (slide, m) and ``<name>.phi`` (angle, rad);
        ``q0``/``qd0``: their two initial values (guesses) and rates.  A massless body
        adds no inertia: the projected mass matrix is positive definite when the child
        has mass.  Returns ``name``."""
        where = f"point-to-line joint {name!r}"
        a = unit_vector(axis, f"{where} axis")
        nv = unit_vector(normal, f"{where} normal")
        if np.linalg.norm(np.cross(a, nv)) < 1e-9:
            raise ModelError(f"{where}: the line axis is parallel to the rotation axis "
                             "normal (that is a cylindrical joint)")
        q0 = self._coord_list(q0, 2, f"{where} q0")
        qd0 = self._coord_list(qd0, 2, f"{where} qd0")
        slider = f"{name}.slider"
        for jn in (f"{name}.s", f"{name}.phi"):
            self._new_name(jn, "joint")
        self._body(parent)
        self._free_child(child, where)
        if slider in self.bodies:
            raise ModelError(f"{where}: body {slider!r} is declared twice")
        self.body(slider, 0.0, points={"P": (0.0, 0.0, 0.0)},
                  provenance=f"massless intermediate body of {where} (seed 000 App. B.1)")
        self.joint(f"{name}.s", "prismatic", parent, slider, parent_point=parent_point,
                   child_point="P", axis=list(a), q0=q0[0], qd0=qd0[0],
                   provenance=provenance or f"slide of {where} along its line")
        self.joint(f"{name}.phi", "revolute", slider, child, parent_point="P",
                   child_point=child_point, axis=list(nv), orientation=orientation,
                   q0=q0[1], qd0=qd0[1],
                   provenance=provenance or f"rotation of {where} about its normal")
        return name

    def anti_roll_bar(self, name: str, body: str, pivots, arms, links, link_length, k,
                      provenance: str = "") -> str:
        """Anti-roll bar: a torsion bar on ``body`` (a chassis or subframe) whose two halves
        twist against each other, linked to the suspension by two droplinks.

        Expanded into ordinary elements, all named after ``name``: massless bar halves
        ``<name>.left`` and ``<name>.right`` (frames at their bushings, parallel to
        ``body``'s at zero twist), the revolute joint ``<name>.bushing`` from ``body`` to the
        left half about the bar axis (the line through ``pivots = (left, right)``, points in
        ``body``'s frame), the revolute joint ``<name>.twist`` from the left half to the right
        half about the same axis at the right bushing, the joint spring ``<name>.torsion``
        (stiffness ``k``, N m/rad, on the twist: the angular spring between the two bar
        ends) and two distance constraints ``<name>.link_left``/``<name>.link_right`` of
        length ``link_length`` (one value or two) from the arm ends ``arms = (left, right)``
        (vectors from each bushing to its arm end, ``body`` frame at zero twist) to
        ``links = ((body, point), (body, point))`` on the suspension.  A heave motion turns
        the bar as a whole (no twist, no force); a roll motion twists it.  ``k`` and the
        link lengths may be parameters.  Returns ``name``."""
        where = f"anti-roll bar {name!r}"
        self._body(body)
        pl = np.asarray(as_vec3(pivots[0], f"{where} left pivot"), dtype=object)
        pr = np.asarray(as_vec3(pivots[1], f"{where} right pivot"), dtype=object)
        try:
            axis = np.asarray(pr, dtype=float) - np.asarray(pl, dtype=float)
        except (TypeError, ValueError):
            raise ModelError(f"{where}: the bushing points must be numbers (they fix the bar "
                             "axis)") from None
        if np.linalg.norm(axis) == 0.0:
            raise ModelError(f"{where}: the two bushing points coincide")
        axis = list(axis / np.linalg.norm(axis))
        if len(links) != 2 or any(len(lk) != 2 for lk in links):
            raise ModelError(f"{where}: links must be two (body, point) pairs")
        lengths = (list(link_length) if isinstance(link_length, (list, tuple))
                   and len(link_length) == 2 and not isinstance(link_length[0], str)
                   else [link_length, link_length])
        left, right = f"{name}.left", f"{name}.right"
        for b in (left, right):
            if b in self.bodies:
                raise ModelError(f"{where}: body {b!r} is declared twice")
        for lk_body, _ in links:
            self._body(lk_body)
        prov = provenance or f"{where}"
        self.body(left, 0.0, points={"end": as_vec3(arms[0], f"{where} left arm")},
                  provenance=f"massless left half of {prov}")
        self.body(right, 0.0, points={"end": as_vec3(arms[1], f"{where} right arm")},
                  provenance=f"massless right half of {prov}")
        self.joint(f"{name}.bushing", "revolute", body, left, parent_point=list(pl),
                   axis=axis, provenance=f"bushing of {prov}")
        offset = [float(b) - float(a) for a, b in zip(pl, pr)]
        self.joint(f"{name}.twist", "revolute", left, right, parent_point=offset, axis=axis,
                   provenance=f"twist of {prov}")
        self.joint_spring(f"{name}.torsion", f"{name}.twist", k)
        for side, half, (lk_body, lk_point), L in (("left", left, links[0], lengths[0]),
                                                   ("right", right, links[1], lengths[1])):
            self.distance(f"{name}.link_{side}", half, "end", lk_body, lk_point, L)
        return name

    def cam_relation(self, name: str, radial: str, polar: str, a0, cos=(), sin=(),
                     provenance: str = "") -> str:
        """Cam relation (a closure between two joint coordinates): the coordinate of the
        prismatic joint ``radial`` equals ``s(u)`` of the coordinate ``u`` of the revolute
        joint ``polar``, ``s(u) = a0 + sum_k (cos[k-1] cos(k u) + sin[k-1] sin(k u))`` (a
        Fourier series: the cam's pitch curve in polar form, seed 000 App. B.2).  The
        coefficients are parametric length fields: a cam design can be differentiated and
        optimised.  Constraint row ``z_radial - s(z_polar) = 0``
        (:func:`workbench.kernels.tree.constraints`); not supported by the global
        formulation."""
        self._new_name(name, "cam relation")
        for role, jn, want in (("radial", radial, "prismatic"), ("polar", polar, "revolute")):
            if jn not in self.joints:
                raise UnknownNameError("joint", jn, self.joints)
            if self.joints[jn].type != want:
                raise ModelError(f"cam relation {name!r}: the {role} joint {jn!r} is a "
                                 f"{self.joints[jn].type} joint; it must be {want}")
        cos, sin = list(cos), list(sin)
        N = max(len(cos), len(sin))
        cos += [0.0] * (N - len(cos))
        sin += [0.0] * (N - len(sin))
        self.cams[name] = CamRelation(name, radial, polar, a0, cos, sin, provenance)
        return name

    def cam_follower(self, name: str, cam: str, follower: str, center, a0, cos=(), sin=(),
                     follower_point=(0, 0, 0), normal=(0, 0, 1), zero=(1, 0, 0),
                     orientation=None, q0=None, qd0=None, provenance: str = "") -> str:
        """Cam-follower (seed 000 App. B.2, Fig. B.10): the follower is pinned, at its point
        ``follower_point``, to the point P of the cam's pitch curve at the polar angle
        ``u`` (measured in the cam's frame about ``normal`` from the direction ``zero``,
        both in the cam's frame, from the cam point ``center``), radius ``s(u) = a0 +
        sum_k (cos[k-1] cos(k u) + sin[k-1] sin(k u))``.

        The pitch curve is the locus of the follower's pin: for a roller follower of
        radius ``r`` it is the cam profile offset outwards by ``r`` (a roller of radius
        ``r`` touches the profile exactly when its centre lies on that offset curve).
        Expanded into: a massless arm ``<name>.arm`` on a revolute joint ``<name>.u`` (the
        polar angle) at ``center``, a massless pin body ``<name>.pin`` on a prismatic joint
        ``<name>.rho`` (the radius) along the arm, the follower on a revolute joint
        ``<name>.phi`` at P (``orientation``: the follower's frame relative to the arm's
        at zero angle; the arm's x axis is the radius), and the cam relation ``<name>``:
        ``rho = s(u)`` (:meth:`cam_relation`).  As the seed writes it the chain has 3
        degrees of freedom; the relation removes one; the follower's own guide (a cut
        prismatic for a translating follower, a cut revolute for an oscillating one) is
        added by the caller.  ``q0``/``qd0``: guesses of ``(u, phi)`` and their rates
        (``rho`` from the profile).  Returns ``name``."""
        where = f"cam-follower {name!r}"
        self._new_name(name, "cam relation")
        self._body(cam)
        self._free_child(follower, where)
        nv = unit_vector(normal, f"{where} normal")
        ex = unit_vector(zero, f"{where} zero")
        ex = ex - (ex @ nv) * nv
        if np.linalg.norm(ex) < 1e-9:
            raise ModelError(f"{where}: the polar direction zero is parallel to normal")
        ex /= np.linalg.norm(ex)
        C = np.column_stack([ex, np.cross(nv, ex), nv])
        q0 = self._coord_list(q0, 2, f"{where} q0")
        qd0 = self._coord_list(qd0, 2, f"{where} qd0")
        # the radius guess s(u0) and its rate from the profile at the parameters' values
        vals = {k: prm.si_value for k, prm in self.parameters.items()}
        Nh = max(len(cos), len(sin))
        coef = [a0]
        for k in range(Nh):
            coef += [cos[k] if k < len(cos) else 0.0, sin[k] if k < len(sin) else 0.0]
        coef = np.array([numeric_value(v, vals, f"{where} profile") for v in coef])
        rho0, rho1, _, _ = cam_profile(coef, 0, Nh, q0[0])
        arm, pin = f"{name}.arm", f"{name}.pin"
        for jn in (f"{name}.u", f"{name}.rho", f"{name}.phi"):
            self._new_name(jn, "joint")
        for b in (arm, pin):
            if b in self.bodies:
                raise ModelError(f"{where}: body {b!r} is declared twice")
        prov = provenance or f"{where} (seed 000 App. B.2)"
        self.body(arm, 0.0, points={"O": (0.0, 0.0, 0.0)},
                  provenance=f"massless polar arm of {where}")
        self.body(pin, 0.0, points={"P": (0.0, 0.0, 0.0)},
                  provenance=f"massless pin of {where} (the point P on the pitch curve)")
        self.joint(f"{name}.u", "revolute", cam, arm, parent_point=center, child_point="O",
                   axis=list(nv), orientation=C.tolist(), q0=q0[0], qd0=qd0[0],
                   provenance=f"polar angle of the pitch-curve point P: {prov}")
        self.joint(f"{name}.rho", "prismatic", arm, pin, parent_point="O", child_point="P",
                   axis=[1.0, 0.0, 0.0], q0=float(rho0), qd0=float(rho1 * qd0[0]),
                   provenance=f"radius of P, rho = s(u): {prov}")
        self.joint(f"{name}.phi", "revolute", pin, follower, parent_point="P",
                   child_point=follower_point, axis=[0.0, 0.0, 1.0], orientation=orientation,
                   q0=q0[1], qd0=qd0[1], provenance=f"follower angle at P: {prov}")
        return self.cam_relation(name, f"{name}.rho", f"{name}.u", a0, cos, sin, prov)

    def distance(self, name: str, body1: str, point1, body2: str, point2, length) -> str:
        """Rigid-rod (constant distance) constraint between two points."""
        self._new_name(name, "distance constraint")
        self._body(body1)
        self._body(body2)
        self.distances[name] = Distance(name, body1, point1, body2, point2, length)
        return name

    def rod(self, name: str, body1: str, point1, body2: str, point2, mass, length) -> str:
        """Rod element (seed 002): a uniform slender bar of ``mass`` (kg, parametric)
        between ``point1`` of ``body1`` and ``point2`` of ``body2`` (spherical ends), not a
        body of the tree: one constant-distance constraint ``|x2 - x1| = length`` plus the
        bar's inertia and weight transferred exactly to the two bodies (natural-coordinate
        mass matrix ``m [[I/3, I/6], [I/6, I/3]]``, spin about its own axis neglected).
        How its inertia enters the equations is set by :meth:`rod_options`."""
        self._new_name(name, "rod")
        self._body(body1)
        self._body(body2)
        if body1 == body2:
            raise ModelError(f"rod {name!r}: both ends are on body {body1!r}")
        if not isinstance(mass, (str, list, tuple, dict)) and float(mass) < 0.0:
            raise ModelError(f"rod {name!r}: mass must not be negative, got {mass!r}")
        self.distances[name] = Distance(name, body1, point1, body2, point2, length, mass)
        return name

    def rod_options(self, mode: str | None = None, extrapolation: str | None = None):
        """Default treatment of this model's rods by explicit integrators: ``mode`` in
        ``ROD_MODES`` (``exact``, ``extrapolated``, ``partitioned``), ``extrapolation`` in
        ``ROD_EXTRAPOLATIONS`` (``point``, ``linear``, ``quadratic``).  A run may override
        both (``simulate(..., rods={...})``)."""
        if mode is not None:
            if mode not in ROD_MODES:
                raise ModelError(f"model {self.name!r} rod_mode: {mode!r} is not one of "
                                 f"{', '.join(ROD_MODES)}")
            self.rod_mode = mode
        if extrapolation is not None:
            if extrapolation not in ROD_EXTRAPOLATIONS:
                raise ModelError(f"model {self.name!r} rod_extrapolation: {extrapolation!r} "
                                 f"is not one of {', '.join(ROD_EXTRAPOLATIONS)}")
            self.rod_extrapolation = extrapolation

    def drive(self, name: str, joint: str, function, index: int = 0) -> str:
        """Rheonomic constraint: coordinate ``index`` of ``joint`` follows ``function(t)``."""
        self._new_name(name, "drive")
        self.drives[name] = Drive(name, joint, _function(function, f"drive {name!r}"),
                                  int(index))
        return name

    # -- force elements -----------------------------------------------------------------
    def spring(self, name: str, body1: str, point1, body2: str, point2, k, c=0.0,
               length=0.0, air: dict | None = None, damper: dict | None = None) -> str:
        """Point-to-point spring-damper: tension ``k (L - length) + c dL/dt`` (``L`` the
        distance of the points, positive tension pulls them together).

        ``air``: an air spring's gas law added to the linear term, ``{"area": A,
        "volume": V0, "pressure": P0 (absolute, at L = length), "exponent": n (1.4),
        "ambient": Pa (101325 Pa)}``: tension ``- A (P0 (V0 / V)^n - Pa)`` with the gas
        volume ``V = V0 + A (L - length)``.  ``damper``: a piecewise-linear damper replacing
        ``c``, ``{"slopes": [c_0, ..., c_K], "knees": [v_1, ..., v_K], "width": w (0.01
        m/s)}``: slope ``c_0`` below the first knee velocity, ``c_j`` above knee ``j``
        (rates ``dL/dt > 0`` are rebound), corners rounded over ``w``; e.g. a bilinear
        damper ``{"slopes": [c_compression, c_rebound], "knees": [0.0]}``.  Every number
        may be a parameter.  Laws and their derivatives: :mod:`workbench.forces.spring_laws`.
        """
        self._new_name(name, "spring")
        self._body(body1)
        self._body(body2)
        self.springs[name] = Spring(name, body1, point1, body2, point2, k, c, length,
                                    _options(air, f"spring {name!r} air",
                                             {"area", "volume", "pressure"},
                                             {"exponent", "ambient"}),
                                    _options(damper, f"spring {name!r} damper", {"slopes"},
                                             {"knees", "width"}))
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

    def speed_control(self, name: str, body: str, point, heading, speed, wheels, gain,
                      torque_max) -> str:
        """A stateless speed controller (vehicle kit): the drive torque

            T = torque_max tanh(gain (v_set(t) - v) / torque_max)

        with ``v`` the velocity of ``point`` of ``body`` (e.g. the chassis centre) along its
        vector ``heading`` (name or body-frame components) and ``v_set = speed`` a time
        function (m/s: a number, a parameter or a table).  ``wheels``: ``(wheel, carrier,
        axis, share)`` per driven wheel: the torque ``share T`` about the wheel's ``axis``
        (vector name or wheel-frame components; with the axis pointing to the vehicle's
        left a positive torque drives forward) acts on the wheel, its reaction on the
        ``carrier`` (the upright or axle housing; ``"ground"``: none).  Proportional with a
        smooth saturation, no integral state: the speed settles below ``v_set`` by the
        torque the resistances need divided by ``gain`` (a stateless law: nothing is added
        to the integrated state, and its exact derivatives enter the sweeps like any
        force).  ``gain``, ``torque_max``, the shares and the speed's coefficients may be
        parameters."""
        self._new_name(name, "speed control")
        self._body(body)
        where = f"speed control {name!r}"
        rows = []
        for k, row in enumerate(wheels):
            if len(row) != 4:
                raise ModelError(f"{where}: wheel #{k + 1} must be (wheel, carrier, axis, "
                                 f"share), got {row!r}")
            wheel, carrier, axis, share = row
            self._body(wheel)
            self._body(carrier)
            if not isinstance(axis, str):
                axis = list(unit_vector(axis, f"{where} wheel #{k + 1} axis"))
            rows.append((wheel, carrier, axis, share))
        if not isinstance(heading, str):
            heading = list(unit_vector(heading, f"{where} heading"))
        self.speed_controls[name] = SpeedControl(name, body, point, heading,
                                                 _function(speed, where + " speed"), gain,
                                                 torque_max, tuple(rows))
        return name

    def path_follower(self, name: str, body: str, point, joint: str, path, gain, stiffness,
                      damping, index: int = 0) -> str:
        """A stateless path-following steering driver (vehicle kit): the preview ``point``
        P of ``body`` (e.g. on the chassis, some metres ahead of the front axle) and the
        path ``y = f(x)`` in the ground plane (``path``: a time-function spec, a number, a
        parameter or a table, evaluated at the ARGUMENT ``x_P``, in metres) give the
        lateral error and the commanded steering coordinate

            e = y_P - f(x_P),   delta_cmd = -gain e

        and a servo on coordinate ``index`` of ``joint`` (the steering coordinate ``z_c``)
        adds the generalised force ``Q_c = stiffness (delta_cmd - z_c) - damping zd_c``.
        ``gain``: steering coordinate per metre (rad/m for a revolute steering joint,
        m/m for a rack); ``stiffness``, ``damping``: like a joint spring of that joint
        (N*m/rad, N*m*s/rad for a revolute joint, N/m, N*s/m for a prismatic one).  No
        state is added; the law's exact derivatives (preview-point position, path slope,
        the fields) enter the sweeps like any force, and the model is not conservative.
        Every numeric argument and the path's coefficients may be parameters."""
        self._new_name(name, "path follower")
        self._body(body)
        where = f"path follower {name!r}"
        if body == GROUND:
            raise ModelError(f"{where}: the preview body cannot be the ground")
        if joint not in self.joints:
            exc = UnknownNameError("joint", joint, self.joints)
            exc.args = (f"{where} joint: {exc.args[0]}",) + tuple(exc.args[1:])
            raise exc
        if isinstance(index, bool) or int(index) != index or int(index) < 0:
            raise ModelError(f"{where}: index must be a non-negative integer, got {index!r}")
        self.path_followers[name] = PathFollower(name, body, point, joint,
                                                 _function(path, where + " path"), gain,
                                                 stiffness, damping, int(index))
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
