"""Compilation of a :class:`~workbench.model.Model` into immutable arrays.

The compiled form (:class:`CompiledModel`) holds a :class:`~workbench.kernels.layout.ModelArrays`
tuple, the names of every coordinate, body, point and constraint (for error messages),
and the *parameter binding*: the field vector is ``p = p_const + G @ rho`` where ``rho``
are the SI values of the named parameters.  Every parameter-dependent quantity in the
kernels is read from ``p``, so ``dp/drho = G`` exactly.
"""

from __future__ import annotations

from dataclasses import dataclass
from dataclasses import field as dc_field

import numpy as np

from workbench.compiled.dof import choose_dof, resolve_dof
from workbench.errors import ModelError, UnitError, UnknownNameError
from workbench.forces import spring_laws as SL
from workbench.forces.magic_formula import COEFFICIENT_NAMES
from workbench.forces.tire import TY_NPAR
from workbench.forces.tire_mf import LAW_MF, LAW_NAMES, TP_MF, coefficient_dimension
from workbench.kernels import layout as AR
from workbench.model.elements import (COORD_SUFFIX, GROUND, TimeFunction, perpendiculars,
                                      unit_vector)
from workbench.model.units import UNITS, dimension_of, to_si

_TF_KIND = {"constant": AR.TF_CONST, "polynomial": AR.TF_POLY, "sine": AR.TF_SINE,
            "smoothstep": AR.TF_SMOOTHSTEP, "steps": AR.TF_STEPS}
_AXES = {"x": 0, "y": 1, "z": 2}


@dataclass
class _Lin:
    """A linear expression ``const + sum(coef * parameter)`` in SI units."""

    const: float = 0.0
    terms: dict = dc_field(default_factory=dict)

    def __add__(self, other: "_Lin") -> "_Lin":
        t = dict(self.terms)
        for k, v in other.terms.items():
            t[k] = t.get(k, 0.0) + v
        return _Lin(self.const + other.const, t)

    def scale(self, s: float) -> "_Lin":
        return _Lin(self.const * s, {k: v * s for k, v in self.terms.items()})


class _Builder:
    """Accumulates fields, points, vectors and time functions during compilation."""

    def __init__(self, model: Model, overrides: dict):
        self.model = model
        self.param_names = list(model.parameters)
        for name in overrides:
            if name not in model.parameters:
                raise UnknownNameError("parameter", name, model.parameters)
        self.param_values = {}
        self.param_factor = {}
        for name, prm in model.parameters.items():
            val = float(overrides.get(name, prm.value))
            if not np.isfinite(val):
                raise ModelError(f"parameter {name!r} has a non-finite value {val!r}")
            factor = 1.0
            if prm.unit:
                factor = UNITS[prm.unit.strip()][1]
            self.param_values[name] = val
            self.param_factor[name] = factor
        self.const: list[float] = []
        self.terms: list[dict] = []
        self.where: list[str] = []
        self.points: dict = {}
        self.pt_body: list[int] = []
        self.pt_fld: list[int] = []
        self.pt_names: list[str] = []
        self.vectors: list = []
        self.vc_body: list[int] = []
        self.tfs: list[TimeFunction] = []
        self.tf_fld: list[int] = []
        self.tf_n: list[int] = []
        self.tf_where: list[str] = []
        self.body_index = {}

    # -- fields ------------------------------------------------------------------------
    def lin(self, value, dimension, where: str) -> _Lin:
        """Resolve a field specification into a linear expression of the parameters.

        ``dimension``: the field's dimension (a name of :mod:`workbench.model.units`), a
        tuple of accepted dimensions, or None (any unit accepted: e.g. the higher
        coefficients of a polynomial time function)."""
        if isinstance(value, _Lin):
            return value
        if dimension is not None and not isinstance(dimension, str):
            dims = tuple(dimension)
            dimension = dims[0] if len(dims) == 1 else dims
        scale = 1.0
        name = None
        if isinstance(value, str):
            name = value
        elif isinstance(value, (tuple, list)) and len(value) == 2 and isinstance(value[0], str):
            name, scale = value[0], float(value[1])
        elif isinstance(value, dict):
            if "param" in value:
                name, scale = value["param"], float(value.get("scale", 1.0))
            elif "value" in value:
                unit = value.get("unit")
                if unit is not None and not isinstance(dimension, str):
                    udim = dimension_of(unit)
                    if dimension is not None and udim not in dimension:
                        raise UnitError(f"{where}: unit {unit!r} is a {udim}, but this field "
                                        f"needs a {' or '.join(dimension)}")
                    return _Lin(float(value["value"]) * UNITS[unit.strip()][1])
                return _Lin(to_si(float(value["value"]), unit, dimension, where))
            else:
                raise ModelError(f"{where}: cannot read field {value!r}")
        elif isinstance(value, bool):
            raise ModelError(f"{where}: expected a number, got {value!r}")
        else:
            try:
                v = float(value)
            except (TypeError, ValueError):
                raise ModelError(f"{where}: expected a number or parameter name, got {value!r}") \
                    from None
            if not np.isfinite(v):
                raise ModelError(f"{where}: non-finite value {value!r}")
            return _Lin(v)
        if name not in self.model.parameters:
            raise UnknownNameError("parameter", name, self.model.parameters)
        prm = self.model.parameters[name]
        if prm.unit is not None and dimension is not None:
            pdim = dimension_of(prm.unit)
            ok = {dimension} if isinstance(dimension, str) else set(dimension)
            if dimension == "joint_stiffness":
                ok = {"stiffness", "rot_stiffness"}
            elif dimension == "joint_damping":
                ok = {"damping", "rot_damping"}
            elif dimension == "coordinate":
                ok = {"length", "angle"}
            if pdim not in ok:
                need = dimension if isinstance(dimension, str) else " or ".join(dimension)
                raise UnitError(f"{where}: parameter {name!r} has unit {prm.unit!r} "
                                f"({pdim}), but this field needs a {need}")
        return _Lin(0.0, {name: scale * self.param_factor[name]})

    def add_field(self, lin: _Lin, where: str) -> int:
        self.const.append(lin.const)
        self.terms.append(dict(lin.terms))
        self.where.append(where)
        return len(self.const) - 1

    def add_fields3(self, lins, where: str) -> int:
        k = self.add_field(lins[0], where + ".x")
        self.add_field(lins[1], where + ".y")
        self.add_field(lins[2], where + ".z")
        return k

    def vec3(self, value, dimension, where) -> list:
        if isinstance(value, str) or len(value) != 3:
            raise ModelError(f"{where}: expected three coordinates, got {value!r}")
        return [self.lin(v, dimension, where) for v in value]

    # -- points, vectors ---------------------------------------------------------------
    def point(self, body: str, spec, where: str) -> int:
        """Index of a point given by name (on ``body``) or by coordinates."""
        if body not in self.model.bodies:
            raise UnknownNameError("body", body, self.model.bodies)
        b = self.model.bodies[body]
        if isinstance(spec, str):
            if spec not in b.points:
                raise UnknownNameError(f"point on body {body!r}", spec, b.points)
            key = (body, spec)
            if key in self.points:
                return self.points[key]
            coords = b.points[spec]
            label = f"{body}.{spec}"
        else:
            key = None
            coords = spec
            label = f"{where}"
        lins = self.vec3(coords, "length", f"point {label}")
        k = len(self.pt_body)
        self.pt_body.append(self.body_index[body])
        self.pt_fld.append(self.add_fields3(lins, f"point {label}"))
        self.pt_names.append(label)
        if key is not None:
            self.points[key] = k
        return k

    def vector(self, body: str, direction, where: str) -> int:
        if isinstance(direction, str):
            b = self.model.bodies[body]
            if direction not in b.vectors:
                raise UnknownNameError(f"vector on body {body!r}", direction, b.vectors)
            direction = b.vectors[direction]
        self.vectors.append(unit_vector(direction, where))
        self.vc_body.append(self.body_index[body])
        return len(self.vectors) - 1

    def time_function(self, tf: TimeFunction, ydim, where: str, argdim=None) -> int:
        """Index of a new time function whose coefficients are fields of ``p`` (consecutive,
        in the order of :meth:`TimeFunction.fields`); ``ydim``: the dimension of the
        function's value (the coordinate of a drive, the force or torque of a load);
        ``where`` names the element in errors.  ``argdim``: the dimension of the argument
        when it is not a time (a path ``y(x)``: ``"length"``; the sine's ``omega`` is then
        per unit of the argument, unchecked)."""
        dims = {"y": ydim, "time": ("time",), "omega": ("angular_velocity",),
                "phase": ("angle", "dimensionless"), "free": None}
        if argdim is not None:
            dims["time"] = (argdim,)
            dims["omega"] = None
        first = len(self.const)
        lins = [self.named_lin(v, dims[role], f"{where} function {label}")
                for label, v, role in tf.fields()]
        for (label, _, _), lv in zip(tf.fields(), lins):
            self.add_field(lv, f"{where} function {label}")
        self.tfs.append(tf)
        self.tf_fld.append(first)
        self.tf_n.append(len(lins))
        self.tf_where.append(where)
        return len(self.tfs) - 1

    def named_lin(self, value, dimension, where: str) -> _Lin:
        """:meth:`lin` whose unknown-parameter errors name the field ``where`` too."""
        try:
            return self.lin(value, dimension, where)
        except UnknownNameError as exc:
            exc.args = (f"{where}: {exc.args[0]}",) + tuple(exc.args[1:])
            raise


def _tree_order(model: Model) -> list:
    """Tree joints ordered so that parents come before children (ground first)."""
    by_child = {j.child: j for j in model.joints.values()}
    order = []
    placed = {GROUND}
    remaining = dict(model.joints)
    while remaining:
        progress = False
        for name, j in list(remaining.items()):
            if j.parent in placed:
                order.append(j)
                placed.add(j.child)
                del remaining[name]
                progress = True
        if not progress:
            names = ", ".join(sorted(remaining))
            raise ModelError(f"joints {names} do not connect to ground (cycle of tree joints?)")
    for b in model.bodies:
        if b != GROUND and b not in by_child:
            raise ModelError(f"body {b!r} has no tree joint connecting it to ground")
    return order


def _frame_chain(j) -> list:
    """Primitive frames of a joint: list of (type, axis in the previous frame, C)."""
    a = np.asarray(j.axis, dtype=float)
    C0 = np.eye(3) if j.orientation is None else np.asarray(j.orientation, dtype=float)
    I3 = np.eye(3)
    ex, ey, ez = I3[0], I3[1], I3[2]
    R, P, F = AR.REVOLUTE, AR.PRISMATIC, AR.FIXED
    if j.type == "revolute":
        return [(R, a, C0)]
    if j.type == "prismatic":
        return [(P, a, C0)]
    if j.type == "cylindrical":
        return [(P, a, I3), (R, a, C0)]
    if j.type == "universal":
        return [(R, a, I3), (R, C0 @ np.asarray(j.axis2, dtype=float), C0)]
    if j.type == "spherical":
        return [(R, ez, I3), (R, ey, I3), (R, ex, C0)]
    if j.type == "floating":
        return [(P, ex, I3), (P, ey, I3), (P, ez, I3), (R, ez, I3), (R, ey, I3), (R, ex, C0)]
    return [(F, ez, C0)]


@dataclass(frozen=True)
class CompiledModel:
    """Immutable array form of a model plus the names needed to report on it.

    Attributes
    ----------
    arrays : ModelArrays
        Flat arrays for the kernels (``arrays.p`` is the field vector).
    p_const, G : ndarray
        Parameter binding ``p = p_const + G @ rho`` (``rho`` in SI units).
    param_names, param_units, param_values : tuple
        Named parameters with their SI units and current SI values.
    coord_names : tuple of str
        Name of every relative coordinate ``z``.
    coord_joint : tuple of str
        Joint that owns each coordinate.
    constraint_names : tuple of str
        Model element that produced each constraint equation.
    dof_names : tuple of str
        Names of the degrees of freedom (independent coordinates).
    spring_names : tuple of str
        Name of every point-to-point spring, in the order of ``arrays.sp_pt``.
    z_guess, zd_guess : ndarray
        Initial coordinates and velocities given in the model (guesses for the
        dependent ones).
    zi0, zdi0 : ndarray
        Initial values of the degrees of freedom and of their rates.
    conservative : bool
        True when there is no damping, no applied load, no drive and no tire, so the
        mechanical energy must be conserved.
    initial_state : str
        ``"given"``, ``"equilibrium"`` (re-solved for every design before a run) or
        ``"equilibrium (solved)"``.
    """

    model: Model
    arrays: AR.ModelArrays
    p_const: np.ndarray
    G: np.ndarray
    param_names: tuple
    param_units: tuple
    param_values: np.ndarray
    coord_names: tuple
    coord_joint: tuple
    body_names: tuple
    point_names: tuple
    constraint_names: tuple
    dof_names: tuple
    z_guess: np.ndarray
    zd_guess: np.ndarray
    zi0: np.ndarray
    zdi0: np.ndarray
    conservative: bool
    point_index: dict
    field_where: tuple
    spring_names: tuple = ()
    #: ``"given"``: start from ``zi0``/``z_guess``; ``"equilibrium"``: every simulation
    #: and sensitivity of this design first solves its static equilibrium and starts there
    #: (model meta ``initial_state = "equilibrium"``, see :func:`workbench.statics.
    #: equilibrium_start`); ``"equilibrium (solved)"``: ``zi0``/``z_guess`` are that
    #: equilibrium.
    initial_state: str = "given"

    @property
    def name(self) -> str:
        return self.model.name

    @property
    def n(self) -> int:
        return len(self.coord_names)

    @property
    def m(self) -> int:
        return len(self.constraint_names)

    @property
    def d(self) -> int:
        return len(self.dof_names)

    def coordinate(self, name: str) -> int:
        try:
            return self.coord_names.index(name)
        except ValueError:
            raise UnknownNameError("coordinate", name, self.coord_names) from None

    def point(self, name: str) -> int:
        """Index of a named point ``"body.point"``."""
        if name not in self.point_index:
            raise UnknownNameError("point", name, self.point_index)
        return self.point_index[name]

    def with_parameters(self, values: dict) -> "CompiledModel":
        """A copy with some parameters changed (values in the parameters' own units)."""
        return self.model.compile({**self._current_overrides(), **values})

    def _current_overrides(self) -> dict:
        # the values this model was compiled with (overrides included), in their own units
        return {k: float(v) for k, v in zip(self.param_names, self.param_values)}

    def joints_of_coordinates(self, cols) -> list:
        return sorted({self.coord_joint[c] for c in cols if 0 <= c < self.n})


#: relative tolerance of the inertia checks (rounding of tensors computed from geometry)
INERTIA_RTOL = 1e-9


def check_inertia(body: str, v, planar: bool) -> None:
    """ModelError unless the centroidal inertia ``(Ixx, Iyy, Izz, Ixy, Ixz, Iyz)`` of
    ``body`` is physical: a symmetric positive semi-definite tensor whose principal moments
    satisfy the triangle inequality ``I1 + I2 >= I3`` (every rigid mass distribution does).
    A planar model uses only ``Izz``, which must not be negative."""
    v = np.asarray(v, dtype=float)
    if planar:
        if v[2] < 0:
            raise ModelError(f"body {body!r}: negative moment of inertia Izz = {v[2]:g}")
        return
    J = np.array([[v[0], v[3], v[4]], [v[3], v[1], v[5]], [v[4], v[5], v[2]]])
    lam = np.linalg.eigvalsh(J)
    tol = INERTIA_RTOL * max(1.0e-300, float(np.abs(lam).max()))
    if lam[0] < -tol:
        raise ModelError(f"body {body!r}: inertia tensor (Ixx, Iyy, Izz, Ixy, Ixz, Iyz) = "
                         f"{tuple(float(x) for x in v)} is not positive semi-definite "
                         f"(principal moments {', '.join(f'{x:.4g}' for x in lam)})")
    if lam[0] + lam[1] < lam[2] - tol:
        raise ModelError(f"body {body!r}: principal moments of inertia "
                         f"{', '.join(f'{x:.4g}' for x in lam)} violate the triangle "
                         f"inequality I1 + I2 >= I3 that every rigid body satisfies")


def check_planar_joint(j) -> None:
    """ModelError unless tree joint ``j`` of a planar model keeps the motion in the x-y
    plane: revolute axes along z, prismatic axes in the plane."""
    if j.type not in ("revolute", "prismatic", "fixed"):
        raise ModelError(f"joint {j.name!r}: a {j.type} joint does not belong in a planar "
                         "model (revolute, prismatic or fixed only)")
    if j.type == "fixed" or not isinstance(j.axis, (list, tuple, np.ndarray)):
        return
    a = np.asarray(j.axis, dtype=float)
    a = a / np.linalg.norm(a)
    if j.type == "revolute" and abs(abs(a[2]) - 1.0) > 1e-9:
        raise ModelError(f"joint {j.name!r}: revolute axis {tuple(a)} leaves the plane of "
                         "this planar model (it must be along z)")
    if j.type == "prismatic" and abs(a[2]) > 1e-9:
        raise ModelError(f"joint {j.name!r}: prismatic axis {tuple(a)} leaves the plane of "
                         "this planar model (its z component must be 0)")


def _spring_law_fields(B, s, w) -> tuple:
    """``([stiffness law, damper law, knees], [first air field, first damper field])`` of
    a spring element and its extra fields (:mod:`workbench.forces.spring_laws`)."""
    law, x = [SL.LAW_K_LINEAR, SL.LAW_C_LINEAR, 0], [0, 0]
    if s.air is not None:
        a = s.air
        law[0] = SL.LAW_K_AIR
        specs = (("area", "area"), ("volume", "volume"), ("pressure", "pressure"),
                 ("exponent", "dimensionless"), ("ambient", "pressure"))
        defaults = {"exponent": SL.AIR_EXPONENT, "ambient": SL.AIR_AMBIENT}
        lins = [B.lin(a.get(key, defaults.get(key)), dim, f"{w} air {key}")
                for key, dim in specs]
        for key, lin in zip(("area", "volume", "pressure"), lins):
            if not lin.terms and lin.const <= 0.0:
                raise ModelError(f"{w} air {key}: must be positive, got {lin.const!r}")
        x[0] = B.add_field(lins[0], f"{w} air area")
        for (key, _), lin in zip(specs[1:], lins[1:]):
            B.add_field(lin, f"{w} air {key}")
    if s.damper is not None:
        d = s.damper
        slopes = list(d["slopes"])
        knees = list(d.get("knees", []))
        if len(slopes) != len(knees) + 1 or not slopes:
            raise ModelError(f"{w} damper: needs one slope more than knees, got "
                             f"{len(slopes)} slopes and {len(knees)} knees")
        kv = [B.lin(v, "velocity", f"{w} damper knee {j + 1}") for j, v in enumerate(knees)]
        consts = [v.const for v in kv if not v.terms]
        if any(b <= a for a, b in zip(consts, consts[1:])):
            raise ModelError(f"{w} damper: knee velocities must increase, got {knees}")
        width = B.lin(d.get("width", SL.DAMPER_WIDTH), "velocity", f"{w} damper width")
        if not width.terms and width.const <= 0.0:
            raise ModelError(f"{w} damper width: must be positive, got {width.const!r}")
        law[1], law[2] = SL.LAW_C_PIECEWISE, len(knees)
        x[1] = B.add_field(width, f"{w} damper width")
        B.add_field(B.lin(slopes[0], "damping", f"{w} damper slope 0"), f"{w} damper slope 0")
        for j, v in enumerate(kv):
            B.add_field(v, f"{w} damper knee {j + 1}")
            B.add_field(B.lin(slopes[j + 1], "damping", f"{w} damper slope {j + 1}"),
                        f"{w} damper slope {j + 1}")
    return law, x


def compile_model(model: Model, overrides: dict) -> CompiledModel:
    if not [b for b in model.bodies if b != GROUND]:
        raise ModelError(f"model {model.name!r} has no bodies: nothing to simulate")
    if model.planar:
        for j in model.joints.values():
            check_planar_joint(j)
    B = _Builder(model, overrides)
    order = _tree_order(model)
    # body indices: in tree order (ground = -1)
    B.body_index[GROUND] = -1
    bodies = [j.child for j in order]
    for i, b in enumerate(bodies):
        B.body_index[b] = i
    # ---- bodies: origin offset, mass, centre of mass, inertia
    b_org, b_mass, b_com, b_inr = [], [], [], []
    joint_of_body = {j.child: j for j in order}
    for bname in bodies:
        body = model.bodies[bname]
        j = joint_of_body[bname]
        where = f"body {bname}"
        cp = j.child_point
        if isinstance(cp, str):
            if cp not in body.points:
                raise UnknownNameError(f"point on body {bname!r}", cp, body.points)
            cp = body.points[cp]
        lins = [l.scale(-1.0) for l in B.vec3(cp, "length", f"joint {j.name} child_point")]
        b_org.append(B.add_fields3(lins, f"{where} origin"))
        b_mass.append(B.add_field(B.lin(body.mass, "mass", f"{where} mass"), f"{where} mass"))
        b_com.append(B.add_fields3(B.vec3(body.com, "length", f"{where} com"), f"{where} com"))
        inr = [B.lin(v, "inertia", f"{where} inertia") for v in body.inertia]
        k = B.add_field(inr[0], f"{where} Ixx")
        for lab, lv in zip(("Iyy", "Izz", "Ixy", "Ixz", "Iyz"), inr[1:]):
            B.add_field(lv, f"{where} {lab}")
        b_inr.append(k)
    # ---- frames
    fr_parent, fr_type, fr_coord, fr_off, fr_axis, fr_C, fr_body = [], [], [], [], [], [], []
    body_frame = {GROUND: -1}
    coord_names, coord_joint, z_guess, zd_guess = [], [], [], []
    joint_coords: dict[str, list[int]] = {}
    zero3 = [_Lin(), _Lin(), _Lin()]
    for j in order:
        pf = body_frame[j.parent]
        pbody = model.bodies[j.parent]
        pp = j.parent_point
        if isinstance(pp, str):
            if pp not in pbody.points:
                raise UnknownNameError(f"point on body {j.parent!r}", pp, pbody.points)
            pp = pbody.points[pp]
        s_lins = B.vec3(pp, "length", f"joint {j.name} parent_point")
        if j.parent != GROUND:
            o = b_org[B.body_index[j.parent]]
            org = [_Lin(B.const[o + i], dict(B.terms[o + i])) for i in range(3)]
            s_lins = [a + b for a, b in zip(org, s_lins)]
        chain = _frame_chain(j)
        coords = []
        for k, (typ, axis, C) in enumerate(chain):
            fidx = len(fr_parent)
            fr_parent.append(pf)
            fr_type.append(typ)
            fr_off.append(B.add_fields3(s_lins if k == 0 else zero3, f"joint {j.name} location"))
            fr_axis.append(np.asarray(axis, dtype=float))
            fr_C.append(np.asarray(C, dtype=float))
            fr_body.append(-1)
            if typ == AR.FIXED:
                fr_coord.append(-1)
            else:
                ci = len(coord_names)
                fr_coord.append(ci)
                coords.append(ci)
                coord_names.append(j.name + COORD_SUFFIX[j.type][len(coords) - 1])
                coord_joint.append(j.name)
                z_guess.append(j.q0[len(coords) - 1])
                zd_guess.append(j.qd0[len(coords) - 1])
            pf = fidx
        fr_body[pf] = B.body_index[j.child]
        body_frame[j.child] = pf
        joint_coords[j.name] = coords
    b_frame = [body_frame[b] for b in bodies]

    # named points are compiled eagerly so that measures and DOF can refer to them
    for bname, body in model.bodies.items():
        for pn in body.points:
            B.point(bname, pn, f"{bname}.{pn}")

    def coord_of(joint: str, index: int, where: str) -> int:
        if joint not in joint_coords:
            raise UnknownNameError("joint", joint, joint_coords)
        cs = joint_coords[joint]
        if not 0 <= index < len(cs):
            raise ModelError(f"{where}: joint {joint!r} has {len(cs)} coordinates, "
                             f"index {index} is out of range")
        return cs[index]

    # ---- constraints
    c_type, c_i, c_fld, c_names = [], [], [], []

    def add_c(typ, idx, fld, name):
        c_type.append(typ)
        c_i.append(list(idx) + [0] * (4 - len(idx)))
        c_fld.append(fld)
        c_names.append(name)

    zaxis = np.array([0.0, 0.0, 1.0])
    for cj in model.cuts.values():
        p1 = B.point(cj.body1, cj.point1, f"cut {cj.name} point1")
        p2 = B.point(cj.body2, cj.point2, f"cut {cj.name} point2")
        a1 = np.asarray(cj.axis1)
        a2 = np.asarray(cj.axis2)
        if cj.type == "point-to-line":
            # point2 on the line of body1 through point1 along a1 (the transverse rows of
            # the cut prismatic), the normals kept parallel (the rotation axis)
            n1 = np.asarray(cj.normal)
            n2 = np.asarray(cj.normal2)
            if model.planar:
                if abs(abs(n1 @ zaxis) - 1) > 1e-9 or abs(abs(n2 @ zaxis) - 1) > 1e-9 \
                        or abs(a1 @ zaxis) > 1e-9:
                    raise ModelError(f"cut joint {cj.name!r}: a planar point-to-line needs "
                                     "its normal along z and its line in the plane")
                add_c(AR.C_DOTVP, (B.vector(cj.body1, np.cross(zaxis, a1), cj.name), p1, p2),
                      0, cj.name)
                continue
            for e in perpendiculars(a1):
                add_c(AR.C_DOTVP, (B.vector(cj.body1, e, cj.name), p1, p2), 0, cj.name)
            u2 = B.vector(cj.body2, n2, cj.name)
            for e in perpendiculars(n1):
                add_c(AR.C_DOTVV, (B.vector(cj.body1, e, cj.name), u2), 0, cj.name)
            continue
        if model.planar:
            if cj.type in ("spherical", "revolute"):
                if cj.type == "revolute" and (abs(abs(a1 @ zaxis) - 1) > 1e-9
                                              or abs(abs(a2 @ zaxis) - 1) > 1e-9):
                    raise ModelError(f"cut joint {cj.name!r}: planar model needs axes along z")
                for ax in (0, 1):
                    add_c(AR.C_PTCOMP, (p1, p2, ax), 0, cj.name)
            elif cj.type in ("prismatic", "fixed"):
                n1 = B.vector(cj.body1, np.cross(zaxis, a1), cj.name)
                n2 = B.vector(cj.body2, np.cross(zaxis, a2), cj.name)
                v1 = B.vector(cj.body1, a1, cj.name)
                if cj.type == "prismatic":
                    add_c(AR.C_DOTVP, (n1, p1, p2), 0, cj.name)
                else:
                    for ax in (0, 1):
                        add_c(AR.C_PTCOMP, (p1, p2, ax), 0, cj.name)
                add_c(AR.C_DOTVV, (v1, n2), 0, cj.name)
            else:
                raise ModelError(f"cut joint {cj.name!r}: type {cj.type!r} is not planar")
            continue
        v1d, w1d = perpendiculars(a1)
        v2d, w2d = perpendiculars(a2)
        if cj.type in ("spherical", "revolute", "universal", "fixed"):
            for ax in range(3):
                add_c(AR.C_PTCOMP, (p1, p2, ax), 0, cj.name)
        if cj.type == "universal":
            add_c(AR.C_DOTVV, (B.vector(cj.body1, a1, cj.name), B.vector(cj.body2, a2, cj.name)),
                  0, cj.name)
        if cj.type in ("prismatic", "cylindrical"):
            v1 = B.vector(cj.body1, v1d, cj.name)
            w1 = B.vector(cj.body1, w1d, cj.name)
            add_c(AR.C_DOTVP, (v1, p1, p2), 0, cj.name)
            add_c(AR.C_DOTVP, (w1, p1, p2), 0, cj.name)
        if cj.type in ("revolute", "prismatic", "cylindrical", "fixed"):
            v1 = B.vector(cj.body1, v1d, cj.name)
            w1 = B.vector(cj.body1, w1d, cj.name)
            u2 = B.vector(cj.body2, a2, cj.name)
            add_c(AR.C_DOTVV, (v1, u2), 0, cj.name)
            add_c(AR.C_DOTVV, (w1, u2), 0, cj.name)
        if cj.type in ("prismatic", "fixed"):
            add_c(AR.C_DOTVV, (B.vector(cj.body1, v1d, cj.name),
                               B.vector(cj.body2, w2d, cj.name)), 0, cj.name)
    # rods (seed 002): a distance constraint, and the bar's end points and mass field for
    # its inertia and weight (workbench.kernels.tree.rod_forces)
    rd_pt, rd_m = [], []
    for ds in model.distances.values():
        kind = "distance" if ds.mass is None else "rod"
        p1 = B.point(ds.body1, ds.point1, f"{kind} {ds.name} point1")
        p2 = B.point(ds.body2, ds.point2, f"{kind} {ds.name} point2")
        fld = B.add_field(B.lin(ds.length, "length", f"{kind} {ds.name} length"),
                          f"{kind} {ds.name} length")
        add_c(AR.C_DIST, (p1, p2), fld, ds.name)
        if ds.mass is not None:
            ml = B.lin(ds.mass, "mass", f"rod {ds.name} mass")
            if not ml.terms and ml.const < 0.0:
                raise ModelError(f"rod {ds.name!r}: mass must not be negative, got "
                                 f"{ml.const!r}")
            rd_pt.append([p1, p2])
            rd_m.append(B.add_field(ml, f"rod {ds.name} mass"))
    for cr in model.cams.values():
        # z_radial - s(z_polar): the radial coordinate, the polar one, its (revolute) frame,
        # the number of harmonics; the 2N + 1 coefficients a0, a1, b1, ... consecutive in p
        w = f"cam relation {cr.name}"
        ca = coord_of(cr.radial, 0, w)
        cb = coord_of(cr.polar, 0, w)
        fb = fr_coord.index(cb)
        if fr_type[fr_coord.index(ca)] != AR.PRISMATIC or fr_type[fb] != AR.REVOLUTE:
            raise ModelError(f"{w}: needs a prismatic radial and a revolute polar joint")
        lins = [B.named_lin(cr.a0, "length", f"{w} a0")]
        for k in range(len(cr.cos)):
            lins.append(B.named_lin(cr.cos[k], "length", f"{w} cos[{k}]"))
            lins.append(B.named_lin(cr.sin[k], "length", f"{w} sin[{k}]"))
        first = B.add_field(lins[0], f"{w} a0")
        for k in range(len(cr.cos)):
            B.add_field(lins[1 + 2 * k], f"{w} cos[{k}]")
            B.add_field(lins[2 + 2 * k], f"{w} sin[{k}]")
        add_c(AR.C_CAM, (ca, cb, fb, len(cr.cos)), first, cr.name)
    for dr in model.drives.values():
        c = coord_of(dr.joint, dr.index, f"drive {dr.name}")
        # the driven coordinate's dimension: an angle (revolute) or a length (prismatic)
        cdim = "angle" if fr_type[fr_coord.index(c)] == AR.REVOLUTE else "length"
        add_c(AR.C_DRIVE, (c, B.time_function(dr.function, cdim, f"drive {dr.name!r}")), 0,
              dr.name)

    # ---- force elements
    sp_pt, sp_k, sp_c, sp_L0, sp_law, sp_x = [], [], [], [], [], []
    conservative = not model.loads and not model.drives
    for s in model.springs.values():
        w = f"spring {s.name}"
        sp_pt.append([B.point(s.body1, s.point1, w + " point1"),
                      B.point(s.body2, s.point2, w + " point2")])
        sp_k.append(B.add_field(B.lin(s.k, "stiffness", w + " k"), w + " k"))
        cl = B.lin(s.c, "damping", w + " c")
        sp_c.append(B.add_field(cl, w + " c"))
        sp_L0.append(B.add_field(B.lin(s.length, "length", w + " length"), w + " length"))
        if cl.const != 0.0 or cl.terms:
            conservative = False
        law, x = _spring_law_fields(B, s, w)
        if law[1] != SL.LAW_C_LINEAR:
            conservative = False
        sp_law.append(law)
        sp_x.append(x)
    js_coord, js_k, js_c, js_z0 = [], [], [], []
    for s in model.joint_springs.values():
        w = f"joint spring {s.name}"
        js_coord.append(coord_of(s.joint, s.index, w))
        js_k.append(B.add_field(B.lin(s.k, "joint_stiffness", w + " k"), w + " k"))
        cl = B.lin(s.c, "joint_damping", w + " c")
        js_c.append(B.add_field(cl, w + " c"))
        js_z0.append(B.add_field(B.lin(s.q0, "coordinate", w + " q0"), w + " q0"))
        if cl.const != 0.0 or cl.terms:
            conservative = False
    # applied loads ``f(t) d``: the direction ``d`` (three fields) and the coefficients of
    # ``f`` are fields of p (bindable to parameters)
    af_type, af_idx, af_dfld, af_tf = [], [], [], []
    for ld in model.loads.values():
        if ld.kind == "force":
            af_type.append(AR.AF_FORCE)
            af_idx.append(B.point(ld.body, ld.point, f"force {ld.name} point"))
        else:
            af_type.append(AR.AF_TORQUE)
            if ld.body == GROUND:
                raise ModelError(f"torque {ld.name!r} acts on ground")
            af_idx.append(B.body_index[ld.body])
        where = f"{ld.kind} {ld.name!r}"
        af_dfld.append(B.add_fields3([B.named_lin(v, None, f"{where} direction")
                                      for v in ld.direction], f"{where} direction"))
        af_tf.append(B.time_function(ld.function, ld.kind, where))

    # ---- speed controllers (stateless drive-torque law, workbench.kernels.tree.applied_forces)
    sc_pt, sc_vc, sc_tf, sc_fld = [], [], [], []
    sw_sc, sw_body, sw_carrier, sw_vc, sw_fld = [], [], [], [], []
    for s, sc in enumerate(model.speed_controls.values()):
        w = f"speed control {sc.name!r}"
        if sc.body == GROUND:
            raise ModelError(f"{w}: the measured body cannot be the ground")
        sc_pt.append(B.point(sc.body, sc.point, w + " point"))
        sc_vc.append(B.vector(sc.body, sc.heading, w + " heading"))
        sc_tf.append(B.time_function(sc.speed, "velocity", w + " speed"))
        gain = B.lin(sc.gain, None, w + " gain")
        tmax = B.lin(sc.torque_max, "torque", w + " torque_max")
        if not tmax.terms and tmax.const <= 0.0:
            raise ModelError(f"{w} torque_max: must be positive, got {tmax.const!r}")
        sc_fld.append(B.add_field(gain, w + " gain"))
        B.add_field(tmax, w + " torque_max")
        if not sc.wheels:
            raise ModelError(f"{w}: no driven wheels")
        for k, (wheel, carrier, axis, share) in enumerate(sc.wheels):
            ww = f"{w} wheel #{k + 1} ({wheel})"
            if wheel == GROUND:
                raise ModelError(f"{ww}: the wheel cannot be the ground")
            sw_sc.append(s)
            sw_body.append(B.body_index[wheel])
            sw_carrier.append(-1 if carrier == GROUND else B.body_index[carrier])
            sw_vc.append(B.vector(wheel, axis, ww + " axis"))
            sw_fld.append(B.add_field(B.lin(share, "dimensionless", ww + " share"),
                                      ww + " share"))
        conservative = False

    # ---- path followers (stateless steering servo, workbench.kernels.tree.applied_forces):
    # preview point, steering coordinate, path y(x), first of the fields (gain, stiffness,
    # damping)
    pf_pt, pf_coord, pf_tf, pf_fld = [], [], [], []
    for pf in model.path_followers.values():
        w = f"path follower {pf.name!r}"
        if pf.body == GROUND:
            raise ModelError(f"{w}: the preview body cannot be the ground")
        c_ = coord_of(pf.joint, pf.index, w)
        for dr in model.drives.values():
            if dr.joint == pf.joint and int(dr.index) == pf.index:
                raise ModelError(f"{w}: coordinate {pf.index} of joint {pf.joint!r} is "
                                 f"driven by drive {dr.name!r}; a path follower steers a "
                                 f"free coordinate")
        pf_pt.append(B.point(pf.body, pf.point, w + " point"))
        pf_coord.append(c_)
        pf_tf.append(B.time_function(pf.path, "length", w + " path", argdim="length"))
        lins = [B.lin(pf.gain, None, w + " gain"),
                B.lin(pf.stiffness, "joint_stiffness", w + " stiffness"),
                B.lin(pf.damping, "joint_damping", w + " damping")]
        for key, lv in zip(("stiffness", "damping"), lins[1:]):
            if not lv.terms and lv.const < 0.0:
                raise ModelError(f"{w} {key}: must be non-negative, got {lv.const!r}")
        pf_fld.append(B.add_field(lins[0], w + " gain"))
        B.add_field(lins[1], w + " stiffness")
        B.add_field(lins[2], w + " damping")
        conservative = False

    # ---- tire-ground contacts and road (the fields of each are consecutive in p)
    ty_pt, ty_vc, ty_par, ty_law = [], [], [], []
    tire_dims = ("length", "stiffness", "damping", "dimensionless", "velocity", "length",
                 "force")
    tire_keys = ("radius", "k", "c", "mu", "v_eps", "depth_ramp", "force_ramp")
    for ty in model.tires.values():
        w = f"tire {ty.name}"
        if ty.body == GROUND:
            raise ModelError(f"{w}: the wheel cannot be the ground")
        ty_pt.append(B.point(ty.body, ty.center, w + " center"))
        ty_vc.append(B.vector(ty.body, ty.axis, w + " axis"))
        lins = [B.lin(getattr(ty, key), dim, f"{w} {key}")
                for key, dim in zip(tire_keys, tire_dims)]
        first = B.add_field(lins[0], f"{w} radius")
        for key, lv in zip(tire_keys[1:], lins[1:]):
            B.add_field(lv, f"{w} {key}")
        law = LAW_NAMES.index(ty.law)
        if law == LAW_MF:
            # the Magic Formula coefficients follow (TP_MF): the .tir value or the override
            for j, nm in enumerate(COEFFICIENT_NAMES):
                spec = ty.coefficients.get(nm, ty.mf_base[j])
                B.add_field(B.named_lin(spec, coefficient_dimension(nm), f"{w} {nm}"),
                            f"{w} {nm}")
        ty_par.append(first)
        ty_law.append(law)
        conservative = False
    assert len(tire_keys) == TY_NPAR
    rd_fld = [0, 0]
    if model.road_spec is not None:
        rs = model.road_spec
        lins = [B.lin(rs.z0, "length", "road z0")]
        for i, st in enumerate(rs.steps):
            for key in ("x", "height", "length"):
                lins.append(B.lin(st[key], "length", f"road step #{i + 1} {key}"))
        first = len(B.const)
        B.add_field(lins[0], "road z0")
        for i in range(len(rs.steps)):
            for j, key in enumerate(("x", "height", "length")):
                B.add_field(lins[1 + 3 * i + j], f"road step #{i + 1} {key}")
        rd_fld = [first, len(lins)]

    # ---- parameter binding
    nfield = len(B.const)
    pnames = list(model.parameters)
    G = np.zeros((nfield, len(pnames)))
    for i, terms in enumerate(B.terms):
        for name, coef in terms.items():
            G[i, pnames.index(name)] += coef
    rho = np.array([B.param_values[nm] for nm in pnames], dtype=float)
    p_const = np.asarray(B.const, dtype=float)
    p = p_const + G @ rho if len(pnames) else p_const.copy()
    for i in range(nfield):
        if not np.isfinite(p[i]):
            raise ModelError(f"{B.where[i]}: non-finite value")
    for bi, bname in enumerate(bodies):
        if p[b_mass[bi]] < 0:
            raise ModelError(f"body {bname!r}: negative mass {p[b_mass[bi]]}")
        check_inertia(bname, p[b_inr[bi]:b_inr[bi] + 6], model.planar)
    for ti, ty in enumerate(model.tires.values()):
        vals = dict(zip(tire_keys, p[ty_par[ti]:ty_par[ti] + TY_NPAR]))
        for key in ("radius", "v_eps", "depth_ramp", "force_ramp"):
            if not vals[key] > 0:
                raise ModelError(f"tire {ty.name!r}: {key} must be positive, got {vals[key]}")
        for key in ("k", "c", "mu"):
            if vals[key] < 0:
                raise ModelError(f"tire {ty.name!r}: {key} must not be negative, "
                                 f"got {vals[key]}")
        if ty_law[ti] == LAW_MF:
            o = ty_par[ti] + TP_MF
            mf = dict(zip(COEFFICIENT_NAMES, p[o:o + len(COEFFICIENT_NAMES)]))
            for key in ("FNOMIN", "UNLOADED_RADIUS", "LFZO"):
                if not mf[key] > 0:
                    raise ModelError(f"tire {ty.name!r}: Magic Formula coefficient {key} must "
                                     f"be positive, got {mf[key]}")
    if model.road_spec is not None:
        for i in range(len(model.road_spec.steps)):
            L = p[rd_fld[0] + 3 + 3 * i]
            if not L > 0:
                raise ModelError(f"road step #{i + 1}: length must be positive, got {L}")

    tf_kind = np.array([_TF_KIND[tf.kind] for tf in B.tfs], dtype=np.int64)
    for i, tf in enumerate(B.tfs):
        # transition times of smoothstep / steps functions (parameters may move them)
        o = B.tf_fld[i]
        pairs = ([(o, o + 1, "t0", "t1")] if tf.kind == "smoothstep" else
                 [(o + 1 + 3 * s, o + 2 + 3 * s, f"steps[{s}] t0", f"steps[{s}] t1")
                  for s in range(int(tf.params[0]))] if tf.kind == "steps" else [])
        for a, b, la, lb in pairs:
            if not p[b] > p[a]:
                raise ModelError(f"{B.tf_where[i]} function: needs {lb} > {la}, got "
                                 f"{la} = {p[a]:g}, {lb} = {p[b]:g}")

    def i64(x, shape=None):
        a = np.asarray(x, dtype=np.int64)
        return a.reshape(shape) if shape is not None and a.size == 0 else a

    def f64(x, shape):
        a = np.asarray(x, dtype=np.float64)
        return a.reshape(shape) if a.size == 0 else a

    nf = len(fr_parent)
    ma_kwargs = dict(
        p=p, gravity=np.asarray(model.gravity, dtype=float), planar=int(model.planar),
        fr_parent=i64(fr_parent), fr_type=i64(fr_type), fr_coord=i64(fr_coord),
        fr_off=i64(fr_off), fr_axis=f64(fr_axis, (nf, 3)), fr_C=f64(fr_C, (nf, 3, 3)),
        fr_body=i64(fr_body),
        b_frame=i64(b_frame), b_org=i64(b_org), b_mass=i64(b_mass), b_com=i64(b_com),
        b_inr=i64(b_inr),
        pt_body=i64(B.pt_body), pt_fld=i64(B.pt_fld),
        vc_body=i64(B.vc_body), vc_val=f64(B.vectors, (0, 3)),
        c_type=i64(c_type), c_i=i64(c_i, (0, 4)), c_fld=i64(c_fld),
        dof_type=np.zeros(0, dtype=np.int64), dof_i=np.zeros((0, 2), dtype=np.int64),
        sp_pt=i64(sp_pt, (0, 2)), sp_k=i64(sp_k), sp_c=i64(sp_c), sp_L0=i64(sp_L0),
        sp_law=i64(sp_law, (0, 3)), sp_x=i64(sp_x, (0, 2)),
        js_coord=i64(js_coord), js_k=i64(js_k), js_c=i64(js_c), js_z0=i64(js_z0),
        af_type=i64(af_type), af_idx=i64(af_idx), af_dfld=i64(af_dfld),
        af_tf=i64(af_tf), tf_kind=tf_kind, tf_fld=i64(B.tf_fld), tf_n=i64(B.tf_n),
        ty_pt=i64(ty_pt), ty_vc=i64(ty_vc), ty_par=i64(ty_par), ty_law=i64(ty_law),
        rd_fld=i64(rd_fld),
        sc_pt=i64(sc_pt), sc_vc=i64(sc_vc), sc_tf=i64(sc_tf), sc_fld=i64(sc_fld),
        sw_sc=i64(sw_sc), sw_body=i64(sw_body), sw_carrier=i64(sw_carrier),
        sw_vc=i64(sw_vc), sw_fld=i64(sw_fld),
        pf_pt=i64(pf_pt), pf_coord=i64(pf_coord), pf_tf=i64(pf_tf), pf_fld=i64(pf_fld),
        rd_pt=i64(rd_pt, (0, 2)), rd_m=i64(rd_m),
    )
    point_index = {f"{b}.{pn}": k for (b, pn), k in B.points.items()}
    z_guess = np.asarray(z_guess, dtype=float)
    zd_guess = np.asarray(zd_guess, dtype=float)

    # ---- degrees of freedom
    ma0 = AR.ModelArrays(**ma_kwargs)
    if model.dof_spec is None:
        dof_type, dof_i, dof_names, zi0, zdi0 = choose_dof(ma0, z_guess, zd_guess, coord_names,
                                                           c_names)
    else:
        dof_type, dof_i, dof_names, zi0, zdi0 = resolve_dof(
            ma0, model.dof_spec, z_guess, zd_guess, coord_names, point_index)
    ma_kwargs["dof_type"] = dof_type
    ma_kwargs["dof_i"] = dof_i
    ma = AR.ModelArrays(**ma_kwargs)
    for a in ma:
        if isinstance(a, np.ndarray):
            a.flags.writeable = False

    units = tuple(model.parameters[nm].unit for nm in pnames)
    return CompiledModel(
        model=model, arrays=ma, p_const=p_const, G=G, param_names=tuple(pnames),
        param_units=units, param_values=rho, coord_names=tuple(coord_names),
        coord_joint=tuple(coord_joint), body_names=tuple(bodies),
        point_names=tuple(B.pt_names), constraint_names=tuple(c_names),
        dof_names=tuple(dof_names), z_guess=z_guess, zd_guess=zd_guess, zi0=zi0, zdi0=zdi0,
        conservative=conservative, point_index=point_index, field_where=tuple(B.where),
        spring_names=tuple(model.springs),
        initial_state=("equilibrium" if (model.meta or {}).get("initial_state") == "equilibrium"
                       else "given"))
