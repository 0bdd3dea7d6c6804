"""Model files: TOML / JSON documents mapped one-to-one onto the :class:`~workbench.model.Model`
builder.

:func:`load_model` reads a ``.toml`` (:mod:`tomllib`) or ``.json`` file, :func:`model_from_dict`
builds from an already parsed document, :func:`model_to_dict` / :func:`save_json` write a
model back (``load_model(save_json(m, p))`` compiles to the same arrays as ``m``).

File format
-----------
Every section maps onto one builder method; every key onto one argument of that method.
Unknown sections or keys raise :class:`~workbench.errors.ModelError` naming the key and the
file; references to unknown bodies, points, joints or parameters raise
:class:`~workbench.errors.UnknownNameError` when the file is loaded.

``[model]``  -> ``Model(...)`` and ``Model.dof(...)``
    ``name`` (default: the file stem), ``description``, ``provenance``, ``gravity``
    (three values, m/s^2, default ``[0, 0, -9.81]``), ``planar`` (bool), ``dof`` (list of
    coordinate names such as ``"crank"`` / ``"sph.rz"``, or tables
    ``{point = "body.point", axis = "x", velocity = ..., value = ...}``).
``[model.meta]``  -> ``Model.meta``
    Free-form table.  Keys used by the tools: ``title``, ``reconstruction`` (bool),
    ``t_end`` and ``dt`` (default simulation settings, s).
``[parameters.NAME]``  -> ``Model.parameter(NAME, ...)``
    ``value`` (a number, required), ``unit``, ``provenance``, ``lower``, ``upper``.
``[ground]``  -> ``Model.point("ground", ...)`` / ``Model.vector("ground", ...)``
    ``points = {NAME = [x, y, z]}``, ``vectors = {...}``, ``provenance``.
``[[bodies]]``  -> ``Model.body(...)``
    ``name``, ``mass``, ``com``, ``inertia`` (3 or 6 values about the centre of mass, body
    axes), ``points``, ``vectors``, ``provenance``.
``[[joints]]``  -> ``Model.joint(...)``
    ``name``, ``type``, ``parent``, ``child``, ``parent_point``, ``child_point`` (a point
    name of that body or three coordinates), ``axis``, ``axis2``, ``orientation``, ``q0``,
    ``qd0``, ``provenance``.  ``orientation`` (the child frame relative to the parent frame
    at zero coordinates) is a 3x3 matrix (rows), or ``{x = [..], y = [..]}`` (any two of
    the child axes x, y, z in parent components; normalised and orthogonalised, the first
    given axis is kept exactly), or ``{axis = [..], angle = ...}``.
    ``type = "point-to-line"`` (seed 000 App. B.1) is ``Model.point_to_line`` with the
    extra key ``normal`` (the rotation axis, default z): a prismatic joint ``<name>.s``
    along ``axis``, a massless body ``<name>.slider``, a revolute joint ``<name>.phi``.
``[[cuts]]``  -> ``Model.cut(...)``
    ``name``, ``type``, ``body1``, ``body2``, ``point1``, ``point2``, ``axis1``, ``axis2``,
    ``provenance``; ``normal``, ``normal2`` for ``type = "point-to-line"``.
``[[cam_followers]]``  -> ``Model.cam_follower(...)`` (seed 000 App. B.2): ``name, cam,
    follower, center, a0`` and optional ``cos, sin`` (Fourier coefficients of the pitch
    curve, parametric lengths), ``follower_point, normal, zero, orientation, q0, qd0``
    (two values: polar angle and follower angle), ``provenance``.
``[[anti_roll_bars]]``  -> ``Model.anti_roll_bar(...)``: ``name, body, pivots`` (two points),
    ``arms`` (two vectors), ``links`` (two ``[body, point]``), ``link_length``, ``k``,
    optional ``provenance``.
``[[cam_relations]]``  -> ``Model.cam_relation(...)``: ``name, radial, polar, a0`` and
    optional ``cos, sin, provenance`` (what a cam follower expands into).
``[[distances]]``  -> ``Model.distance(...)``: ``name, body1, point1, body2, point2, length``.
``[[rods]]``       -> ``Model.rod(...)``: the same keys plus ``mass`` (a rod element, seed 002);
                    ``[model] rod_mode`` / ``rod_extrapolation`` -> ``Model.rod_options``.
``[[drives]]``  -> ``Model.drive(...)``: ``name, joint, function, index``.
``[[springs]]``  -> ``Model.spring(...)``: ``name, body1, point1, body2, point2, k, c, length``,
optional tables ``air = {area, volume, pressure, exponent, ambient}`` (air spring) and
``damper = {slopes = [...], knees = [...], width}`` (piecewise-linear damper).
``[[joint_springs]]``  -> ``Model.joint_spring(...)``: ``name, joint, k, c, q0, index``.
``[[path_followers]]`` -> ``Model.path_follower(...)``: ``name, body, point, joint, path,
gain, stiffness, damping, index`` (``path``: a time-function spec of ``y(x)``).
``[[forces]]``  -> ``Model.force(...)``: ``name, body, point, direction, function``.
``[[torques]]``  -> ``Model.torque(...)``: ``name, body, direction, function``.
``[[tires]]``  -> ``Model.tire(...)``: ``name, body, center`` (point name or coordinates),
    ``axis`` (vector name of the body or three components), ``radius, k`` and optional
    ``c, mu, v_eps, depth_ramp, force_ramp, provenance`` (all parametric), and the law:
    ``law`` (``"disc"``, the default, or ``"magic-formula"``), ``tir`` (a shipped coefficient
    set such as ``"mf52_205_60R15"`` or a path, relative to the model file) and
    ``coefficients = {PDX1 = 1.1, PKY1 = "cornering", ...}`` (parametric overrides).
``[road]``  -> ``Model.road(...)``: ``z0`` (default 0), ``steps = [{x = .., height = ..,
    length = ..}, ...]`` (parametric; quintic steps centred at ``x``), ``provenance``.
    Without it the road is flat, ``z = 0``.
``[objectives.NAME]``  -> ``Model.objectives[NAME]`` (free-form tables, stored as given).
``[maneuver]``
    ``kind`` (``iso3888-1``, ``iso3888-2``, ``slalom``, ``sine-steer``, ``step-steer``,
    ``constant-radius``) plus its options (numbers in SI units or ``{value, unit}``): applied
    to the finished model by :func:`workbench.maneuvers.maneuver` (docs/maneuvers.md):
    the steering drive's time function, the initial speed, ``t_end``/``dt`` and the
    maneuver's parameters.  Parameters and ``[model.meta]`` keys that the file declares
    itself (for a derived file: not its base's) keep their values over the maneuver's
    defaults and derived values.
``[vehicle]``  -> vehicle templates (:mod:`workbench.model.vehicle`, docs/vehicle-templates.md):
    a compact vehicle description (chassis, steering, axles with suspension templates,
    wheels, tires, springs, anti-roll bars, speed control) expanded into ordinary
    ``[[bodies]]``, ``[[joints]]``, ... entries (before the file's own) and ``[model] dof``
    (unless given) when the file is loaded.
``[generator]``
    ``kind`` plus the options of a registered generator (:data:`GENERATORS`) that expands
    into bodies, joints and cuts before the explicit ``[[bodies]]`` etc. are added; its
    options can be overridden by the keyword arguments of :func:`load_model`.  Generator
    ``n-four-bar``: see :func:`_gen_n_four_bar`.

A *time function* (``function``) is a constant (a number or a parameter reference, e.g.
``"mom"``) or ``{type = "sine", amplitude = ..., omega = ..., phase = ..., offset = ...,
t_start = ...}`` (kinds ``constant`` (``value``), ``polynomial`` (``coefficients``),
``sine``, ``smoothstep`` (``t0, t1, y0, y1``), ``steps`` (``initial``, ``steps = [[t0, t1,
dy], ...]``); see :meth:`TimeFunction.from_spec`).  Its coefficients are parametric fields
(``{type = "constant", value = "mom"}``): the value-like ones are checked against the
element's dimension (the force or torque of a load, the angle or length of a driven
coordinate), times against ``s``, ``omega`` against ``rad/s``.

Numeric fields
--------------
*Parametric* fields (point coordinates, centre of mass, mass, inertia, distance and
spring lengths, spring/damper constants, joint-spring ``q0``, tire and road data, the
coefficients of the time functions of drives, forces and torques, the directions of
forces and torques) compile into the field vector and are differentiable with respect to
the parameters.  Each may be

* a number (SI units),
* a parameter name ``"LA1"``,
* ``{param = "LA1", scale = -0.5}`` (= -0.5 * LA1) or ``["LA1", -0.5]``,
* ``{value = 120, unit = "mm"}`` (checked against the field's dimension, stored in SI).

*Load-time* fields are plain numbers in the builder (``gravity``, joint ``axis``/``axis2``/
``orientation``/``q0``/``qd0``, cut axes, ``dof`` ``velocity``/``value``).  They accept the
same forms, and also ``{param = "v0", divide_by = "R", scale = ...}`` (= scale * v0 / R,
e.g. the spin rate of a wheel rolling at the speed ``v0``; the dimension of the quotient
is not checked; also accepted, as a load-time number, by time-function coefficients and
load directions); a parameter reference is replaced by
the parameter's SI value when the file is loaded (so it carries the parameter's provenance,
but a later compile-time override of that parameter does not change it; override it in
:func:`load_model` / :func:`workbench.model.catalog.load` instead).  :func:`model_to_dict` writes
load-time fields as numbers.

Derived files
-------------
A top-level ``base = "other.toml"`` (a file in the same folder) makes the file a
variant of ``other.toml`` (e.g. a maneuver of one vehicle: ``buggy-dlc.toml`` on
``buggy-step.toml``): ``[model]`` and ``[model.meta]`` keys, ``[parameters.X]`` and
``[objectives.X]`` entries and list entries with the same ``name`` (``[[drives]]``, ...)
replace the base's, new ones are added, ``[road]``/``[ground]`` replace the base's, a
``[vehicle]`` table is merged key by key (axles and springs by ``name``)
(:func:`_with_base`).
"""

from __future__ import annotations

import json
import math
import tomllib
from pathlib import Path
from typing import Any, Callable

import numpy as np

from workbench.errors import ModelError, UnitError, UnknownNameError
from workbench.forces.tir import shipped_tir_names
from workbench.forces.tire_mf import coefficient_dimension
from workbench.model.builder import Model
from workbench.model.elements import COORD_SUFFIX, GROUND, TimeFunction
from workbench.model.units import UNITS, dimension_of, to_si
from workbench.model.vehicle_templates import expand_document

__all__ = ["load_model", "model_from_dict", "GENERATORS", "register_maneuvers"]

# ----------------------------------------------------------------------------------------
# schema
# ----------------------------------------------------------------------------------------

_MODEL_KEYS = {"name", "description", "provenance", "gravity", "planar", "dof", "meta",
               "rod_mode", "rod_extrapolation"}
_PARAM_KEYS = {"value", "unit", "provenance", "lower", "upper"}
_GROUND_KEYS = {"points", "vectors", "provenance"}
_LIST_SECTIONS = {
    "bodies": ({"name", "mass"}, {"com", "inertia", "points", "vectors", "provenance"}),
    "joints": ({"name", "type", "parent", "child"},
               {"parent_point", "child_point", "axis", "axis2", "orientation", "q0", "qd0",
                "provenance", "normal"}),
    "cuts": ({"name", "type", "body1", "body2"},
             {"point1", "point2", "axis1", "axis2", "provenance", "normal", "normal2"}),
    "cam_followers": ({"name", "cam", "follower", "center", "a0"},
                      {"cos", "sin", "follower_point", "normal", "zero", "orientation", "q0",
                       "qd0", "provenance"}),
    "cam_relations": ({"name", "radial", "polar", "a0"}, {"cos", "sin", "provenance"}),
    "anti_roll_bars": ({"name", "body", "pivots", "arms", "links", "link_length", "k"},
                       {"provenance"}),
    "distances": ({"name", "body1", "point1", "body2", "point2", "length"}, set()),
    "rods": ({"name", "body1", "point1", "body2", "point2", "length", "mass"}, set()),
    "drives": ({"name", "joint", "function"}, {"index"}),
    "springs": ({"name", "body1", "point1", "body2", "point2", "k"},
                {"c", "length", "air", "damper"}),
    "joint_springs": ({"name", "joint", "k"}, {"c", "q0", "index"}),
    "forces": ({"name", "body", "point", "direction", "function"}, set()),
    "torques": ({"name", "body", "direction", "function"}, set()),
    "tires": ({"name", "body", "center", "axis", "radius", "k"},
              {"c", "mu", "v_eps", "depth_ramp", "force_ramp", "provenance", "law", "tir",
               "coefficients"}),
    "speed_controls": ({"name", "body", "point", "heading", "speed", "wheels", "gain",
                        "torque_max"}, set()),
    "path_followers": ({"name", "body", "point", "joint", "path", "gain", "stiffness",
                        "damping"}, {"index"}),
}
_SECTIONS = ({"model", "parameters", "ground", "generator", "objectives", "road", "maneuver",
              "vehicle"}
             | set(_LIST_SECTIONS))
_ROAD_KEYS = {"z0", "steps", "provenance"}
#: tire fields and their dimensions (see Model.tire)
_TIRE_FIELDS = (("radius", "length"), ("k", "stiffness"), ("c", "damping"),
                ("mu", "dimensionless"), ("v_eps", "velocity"), ("depth_ramp", "length"),
                ("force_ramp", "force"))

_ACCEL = {"acceleration"}
_COORD = {"length", "angle", "dimensionless"}
_RATE = {"velocity", "angular_velocity", "dimensionless"}


class _Ctx:
    """Load context: the source name (for messages) and the model under construction."""

    def __init__(self, source: str, model: Model):
        self.source = source
        self.model = model

    def err(self, where: str, msg: str) -> ModelError:
        return ModelError(f"{self.source}: {where}: {msg}")

    def param(self, name: str, where: str):
        if name not in self.model.parameters:
            exc = UnknownNameError("parameter", name, self.model.parameters)
            exc.args = (f"{self.source}: {where}: {exc.args[0]}",)
            raise exc
        return self.model.parameters[name]


def _rethrow(exc: ModelError, prefix: str):
    """Re-raise a builder error with the file/element prefixed (same type, same attributes)."""
    exc.args = (f"{prefix}: {exc.args[0]}",) + tuple(exc.args[1:])
    raise exc


def _check_keys(ctx: _Ctx, table: Any, where: str, required: set, optional: set) -> None:
    if not isinstance(table, dict):
        raise ctx.err(where, f"expected a table, got {type(table).__name__}")
    allowed = required | optional
    for key in table:
        if key not in allowed:
            raise ctx.err(where, f"unknown key {key!r}; allowed: {', '.join(sorted(allowed))}")
    for key in sorted(required):
        if key not in table:
            raise ctx.err(where, f"missing key {key!r}")


def _is_number(v) -> bool:
    return isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool)


def _finite(ctx, v, where) -> float:
    x = float(v)
    if not math.isfinite(x):
        raise ctx.err(where, f"non-finite value {v!r}")
    return x


def _string(ctx, v, where) -> str:
    if not isinstance(v, str):
        raise ctx.err(where, f"expected a string, got {v!r}")
    return v


# ---- parametric fields (kept symbolic for the compiler) ---------------------------------


_AIR_KEYS = {"area": "area", "volume": "volume", "pressure": "pressure",
             "exponent": "dimensionless", "ambient": "pressure"}


def _spring_air(ctx: _Ctx, t, where: str):
    """The ``air`` table of a spring (air-spring gas law), fields checked, or None."""
    if t is None:
        return None
    if not isinstance(t, dict):
        raise ctx.err(where, f"expected a table, got {t!r}")
    _check_keys(ctx, t, where, {"area", "volume", "pressure"}, {"exponent", "ambient"})
    return {k: _field(ctx, v, _AIR_KEYS[k], f"{where} {k}") for k, v in t.items()}


def _spring_damper(ctx: _Ctx, t, where: str):
    """The ``damper`` table of a spring (piecewise-linear damper), fields checked, or None."""
    if t is None:
        return None
    if not isinstance(t, dict):
        raise ctx.err(where, f"expected a table, got {t!r}")
    _check_keys(ctx, t, where, {"slopes"}, {"knees", "width"})
    out = {}
    for key, dim in (("slopes", "damping"), ("knees", "velocity")):
        vals = t.get(key, [])
        if not isinstance(vals, list):
            raise ctx.err(where, f"{key} must be a list, got {vals!r}")
        out[key] = [_field(ctx, v, dim, f"{where} {key}[{j}]") for j, v in enumerate(vals)]
    if "width" in t:
        out["width"] = _field(ctx, t["width"], "velocity", where + " width")
    return out


def _field(ctx: _Ctx, v, dimension: str, where: str):
    """A parametric scalar field: number, parameter name, (name, scale) or {value, unit}."""
    if _is_number(v):
        return _finite(ctx, v, where)
    if isinstance(v, str):
        ctx.param(v, where)
        return v
    if isinstance(v, (list, tuple)) and len(v) == 2 and isinstance(v[0], str) \
            and _is_number(v[1]):
        ctx.param(v[0], where)
        return (v[0], _finite(ctx, v[1], where))
    if isinstance(v, dict):
        if "param" in v:
            _check_keys(ctx, v, where, {"param"}, {"scale"})
            name = _string(ctx, v["param"], where + ".param")
            ctx.param(name, where)
            scale = v.get("scale", 1.0)
            if not _is_number(scale):
                raise ctx.err(where, f"scale must be a number, got {scale!r}")
            return (name, _finite(ctx, scale, where + ".scale"))
        if "value" in v:
            _check_keys(ctx, v, where, {"value"}, {"unit"})
            if not _is_number(v["value"]):
                raise ctx.err(where, f"value must be a number, got {v['value']!r}")
            try:
                return to_si(_finite(ctx, v["value"], where), v.get("unit"), dimension, where)
            except UnitError as exc:
                _rethrow(exc, ctx.source)
        raise ctx.err(where, f"cannot read field {v!r} (expected a number, a parameter name, "
                             f"{{param = ..., scale = ...}} or {{value = ..., unit = ...}})")
    raise ctx.err(where, f"expected a number or a parameter name, got {v!r}")


def _vec3(ctx, v, dimension, where) -> list:
    if not isinstance(v, (list, tuple)) or len(v) != 3:
        raise ctx.err(where, f"expected three values, got {v!r}")
    return [_field(ctx, x, dimension, f"{where}[{i}]") for i, x in enumerate(v)]


def _point(ctx, body: str, v, where):
    """A point given by name (must exist on ``body``) or by three parametric coordinates."""
    if isinstance(v, str):
        if body not in ctx.model.bodies:
            raise _unknown(ctx, "body", body, ctx.model.bodies, where)
        pts = ctx.model.bodies[body].points
        if v not in pts:
            raise _unknown(ctx, f"point on body {body!r}", v, pts, where)
        return v
    return _vec3(ctx, v, "length", where)


def _unknown(ctx, kind, name, known, where) -> UnknownNameError:
    exc = UnknownNameError(kind, name, known)
    exc.args = (f"{ctx.source}: {where}: {exc.args[0]}",)
    return exc


# ---- load-time fields (resolved to numbers) -------------------------------------------


def _static(ctx: _Ctx, v, dims: set | None, where: str) -> float:
    """A number now: parameter references are replaced by the parameter's SI value."""
    if _is_number(v):
        return _finite(ctx, v, where)
    name, scale, divisor = None, 1.0, None
    if isinstance(v, str):
        name = v
    elif isinstance(v, (list, tuple)) and len(v) == 2 and isinstance(v[0], str) \
            and _is_number(v[1]):
        name, scale = v[0], float(v[1])
    elif isinstance(v, dict) and "param" in v:
        _check_keys(ctx, v, where, {"param"}, {"scale", "divide_by"})
        name = _string(ctx, v["param"], where + ".param")
        scale = v.get("scale", 1.0)
        if not _is_number(scale):
            raise ctx.err(where, f"scale must be a number, got {scale!r}")
        scale = float(scale)
        if "divide_by" in v:
            dname = _string(ctx, v["divide_by"], where + ".divide_by")
            divisor = ctx.param(dname, where).si_value
            if divisor == 0.0:
                raise ctx.err(where, f"divide_by parameter {dname!r} is zero")
    elif isinstance(v, dict) and "value" in v:
        _check_keys(ctx, v, where, {"value"}, {"unit"})
        unit = v.get("unit")
        if not _is_number(v["value"]):
            raise ctx.err(where, f"value must be a number, got {v['value']!r}")
        if unit is None:
            return _finite(ctx, v["value"], where)
        try:
            dim = dimension_of(unit)
        except UnitError as exc:
            _rethrow(exc, f"{ctx.source}: {where}")
        if dims is not None and dim not in dims:
            raise UnitError(f"{ctx.source}: {where}: unit {unit!r} is a {dim}, expected "
                            f"{' or '.join(sorted(dims))}")
        return _finite(ctx, v["value"], where) * UNITS[unit.strip()][1]
    else:
        raise ctx.err(where, f"expected a number or a parameter name, got {v!r}")
    prm = ctx.param(name, where)
    if prm.unit is not None and dims is not None:
        dim = dimension_of(prm.unit)
        if dim not in dims:
            raise UnitError(f"{ctx.source}: {where}: parameter {name!r} has unit {prm.unit!r} "
                            f"({dim}), expected {' or '.join(sorted(dims))}")
    if divisor is not None:
        return scale * prm.si_value / divisor
    return scale * prm.si_value


def _static_list(ctx, v, dims, where, length: int | None = None) -> list:
    if _is_number(v) or isinstance(v, (str, dict)):
        v = [v]
    if not isinstance(v, (list, tuple)):
        raise ctx.err(where, f"expected a list of values, got {v!r}")
    if length is not None and len(v) != length:
        raise ctx.err(where, f"expected {length} values, got {len(v)}")
    return [_static(ctx, x, dims, f"{where}[{i}]") for i, x in enumerate(v)]


def _coefficient(ctx, v, where):
    """A time-function coefficient or a load-direction component: parametric like
    :func:`_field` (kept symbolic; the compiler checks its unit against the element's
    dimension, e.g. a torque's), or a load-time quotient ``{param, divide_by, scale}``
    (a number now, see :func:`_static`)."""
    if isinstance(v, dict) and "divide_by" in v:
        return _static(ctx, v, None, where)
    if isinstance(v, dict) and "value" in v:
        _check_keys(ctx, v, where, {"value"}, {"unit"})
        if not _is_number(v["value"]):
            raise ctx.err(where, f"value must be a number, got {v['value']!r}")
        val = _finite(ctx, v["value"], where)
        unit = v.get("unit")
        if unit is None:
            return val
        try:
            dimension_of(unit)
        except UnitError as exc:
            _rethrow(exc, f"{ctx.source}: {where}")
        return {"value": val, "unit": unit}
    return _field(ctx, v, None, where)


def _function(ctx, spec, where) -> TimeFunction:
    """A time function: a coefficient (a constant) or a table ``{type = ..., ...}`` whose
    coefficients (``coefficients`` and ``steps`` lists too) are parametric."""
    if isinstance(spec, dict) and "type" in spec:
        resolved = {}
        for k, x in spec.items():
            w = f"{where}.{k}"
            if k == "type":
                resolved[k] = x
            elif k == "coefficients" and isinstance(x, list):
                resolved[k] = [_coefficient(ctx, c, f"{w}[{i}]") for i, c in enumerate(x)]
            elif k == "steps" and isinstance(x, list):
                resolved[k] = [[_coefficient(ctx, c, f"{w}[{i}][{j}]") for j, c in enumerate(st)]
                               if isinstance(st, list) else st for i, st in enumerate(x)]
            else:
                resolved[k] = _coefficient(ctx, x, w)
    else:
        resolved = _coefficient(ctx, spec, where)
    try:
        return TimeFunction.from_spec(resolved)
    except ModelError as exc:
        _rethrow(exc, f"{ctx.source}: {where}")


def _direction(ctx, v, where) -> list:
    """The direction of an applied force or torque: three parametric components."""
    if not isinstance(v, (list, tuple)) or len(v) != 3:
        raise ctx.err(where, f"expected three values, got {v!r}")
    return [_coefficient(ctx, x, f"{where}[{i}]") for i, x in enumerate(v)]


def _orientation(ctx, v, where):
    if v is None:
        return None
    if isinstance(v, dict):
        if "axis" in v or "angle" in v:
            _check_keys(ctx, v, where, {"axis", "angle"}, set())
            a = np.asarray(_static_list(ctx, v["axis"], None, where + ".axis", 3))
            nrm = np.linalg.norm(a)
            if nrm < 1e-12:
                raise ctx.err(where, "axis has zero length")
            a = a / nrm
            q = _static(ctx, v["angle"], {"angle", "dimensionless"}, where + ".angle")
            c, s = math.cos(q), math.sin(q)
            K = np.array([[0, -a[2], a[1]], [a[2], 0, -a[0]], [-a[1], a[0], 0]])
            return (np.eye(3) * c + s * K + (1 - c) * np.outer(a, a)).tolist()
        _check_keys(ctx, v, where, set(), {"x", "y", "z"})
        given = [k for k in ("x", "y", "z") if k in v]
        if len(given) != 2:
            raise ctx.err(where, f"give exactly two of the child axes x, y, z; got {given}")
        vecs = {}
        for k in given:
            u = np.asarray(_static_list(ctx, v[k], None, f"{where}.{k}", 3))
            if np.linalg.norm(u) < 1e-12:
                raise ctx.err(where, f"axis {k} has zero length")
            vecs[k] = u
        k1, k2 = given
        e1 = vecs[k1] / np.linalg.norm(vecs[k1])
        e2 = vecs[k2] - (vecs[k2] @ e1) * e1
        if np.linalg.norm(e2) < 1e-9 * np.linalg.norm(vecs[k2]):
            raise ctx.err(where, f"axes {k1} and {k2} are parallel")
        e2 /= np.linalg.norm(e2)
        cols = {k1: e1, k2: e2}
        third = ({"x", "y", "z"} - set(given)).pop()
        # right-handed: z = x × y, x = y × z, y = z × x
        if third == "z":
            cols["z"] = np.cross(cols["x"], cols["y"])
        elif third == "x":
            cols["x"] = np.cross(cols["y"], cols["z"])
        else:
            cols["y"] = np.cross(cols["z"], cols["x"])
        return np.column_stack([cols["x"], cols["y"], cols["z"]]).tolist()
    if not isinstance(v, (list, tuple)) or len(v) != 3:
        raise ctx.err(where, "expected a 3x3 matrix, {x = .., y = ..} or {axis = .., angle = ..}")
    return [_static_list(ctx, row, None, f"{where}[{i}]", 3) for i, row in enumerate(v)]


# ----------------------------------------------------------------------------------------
# generators
# ----------------------------------------------------------------------------------------


def _scaled(L, s):
    """``s`` times the length field ``L`` of a generator (a parameter name, a ``(name,
    scale)`` pair or a number), in the same form."""
    if isinstance(L, str):
        return (L, float(s))
    if isinstance(L, tuple):
        return (L[0], L[1] * s)
    return L * s


def _gen_n_four_bar(ctx: _Ctx, opts: dict) -> None:
    """IFToMM A02 N-four-bar: ``N`` four-bar loops in a row (2N+1 moving links).

    Options: ``N`` (int >= 1), ``link_length``, ``link_mass``, ``link_inertia`` (centroidal,
    about the link's transverse axes), ``initial_speed`` (x-velocity of point B0), all
    parametric except ``N`` (``initial_speed`` and ``link_length`` also set the initial
    crank rate, a load-time field).

    Generated elements (``L`` = link length):

    * ground points ``P0 .. PN`` at ``(i L, 0, 0)``;
    * cranks ``crank0 .. crankN``: frame at the pivot, local y along the crank, points
      ``O = (0, 0, 0)`` and ``B = (0, L, 0)``, centre of mass ``(0, L/2, 0)``;
      revolute joints ``pivot0 .. pivotN`` ground -> crank about **-z**, so the crank angle
      is *clockwise* from the vertical-up position: ``B_i = (i L + L sin(th), L cos(th))``;
    * couplers ``coupler1 .. couplerN``: frame at the left end, local x along the link,
      points ``B = (0, 0, 0)`` and ``C = (L, 0, 0)``; revolute joints ``hinge1 .. hingeN``
      ``crank{j-1}.B`` -> ``coupler{j}.B`` about -z (angle relative to the crank);
    * cut revolute joints ``closure1 .. closureN`` ``coupler{j}.C`` = ``crank{j}.B`` (two
      planar equations each).

    Initial state: all coordinates 0 (cranks vertical up, couplers horizontal), rate of
    ``pivot0`` = ``initial_speed / link_length`` (B0 moves towards +x).  The degree of
    freedom is the coordinate ``pivot0`` (set ``dof = ["pivot0"]`` in ``[model]``).
    """
    N = opts["N"]
    if isinstance(N, bool) or not isinstance(N, (int, np.integer)) and not (
            _is_number(N) and float(N).is_integer()):
        raise ctx.err("[generator] N", f"N must be an integer, got {N!r}")
    N = int(N)
    if N < 1:
        raise ctx.err("[generator] N", f"N must be >= 1, got {N}")
    m = ctx.model
    L = _field(ctx, opts["link_length"], "length", "[generator] link_length")
    mass = _field(ctx, opts["link_mass"], "mass", "[generator] link_mass")
    inertia = _field(ctx, opts["link_inertia"], "inertia", "[generator] link_inertia")
    v0 = _static(ctx, opts["initial_speed"], {"velocity", "dimensionless"},
                 "[generator] initial_speed")
    L_si = _static(ctx, opts["link_length"], {"length", "dimensionless"},
                   "[generator] link_length")
    if not L_si > 0:
        raise ctx.err("[generator] link_length", f"must be positive, got {L_si}")
    prov = opts.get("provenance", "") or ""

    def scaled(s):
        return _scaled(L, s)

    minus_z = [0.0, 0.0, -1.0]
    for i in range(N + 1):
        m.point(GROUND, f"P{i}", [scaled(i), 0.0, 0.0])
    for i in range(N + 1):
        m.body(f"crank{i}", mass, com=[0.0, scaled(0.5), 0.0],
               inertia=[inertia, 0.0, inertia],
               points={"O": [0.0, 0.0, 0.0], "B": [0.0, scaled(1.0), 0.0]},
               provenance=prov)
        m.joint(f"pivot{i}", "revolute", GROUND, f"crank{i}", parent_point=f"P{i}",
                child_point="O", axis=minus_z, q0=0.0,
                qd0=(v0 / L_si if i == 0 else 0.0), provenance=prov)
    for j in range(1, N + 1):
        m.body(f"coupler{j}", mass, com=[scaled(0.5), 0.0, 0.0],
               inertia=[0.0, inertia, inertia],
               points={"B": [0.0, 0.0, 0.0], "C": [scaled(1.0), 0.0, 0.0]},
               provenance=prov)
        m.joint(f"hinge{j}", "revolute", f"crank{j - 1}", f"coupler{j}", parent_point="B",
                child_point="B", axis=minus_z, provenance=prov)
        m.cut(f"closure{j}", "revolute", f"coupler{j}", f"crank{j}", point1="C", point2="B",
              axis1=[0.0, 0.0, 1.0], provenance=prov)


def _gen_four_bar_grid(ctx: _Ctx, opts: dict) -> None:
    """Multiple four-bar linkage of seed 003 (its ref. [7]): a grid of ``ny`` x ``nz``
    quadrilaterals in the YZ plane, every joint a revolute parallel to X, the ``ny + 1``
    top joints on the ground, ``(2 ny + 1) nz`` bars (45, 135, 225 for 1x15, 4x15, 7x15),
    ``nz`` degrees of freedom; modelled in 3-D, so each cut revolute (5 equations) is
    redundant in the planar loop.

    Options: ``ny``, ``nz`` (ints >= 1), ``link_length``, ``link_mass``, ``link_inertia``
    (centroidal, about the transverse axes; zero about the bar's own axis: slender bars),
    ``initial_rate`` (rate of the first top joint ``pivot0``, rad/s).

    Generated elements (``L`` = link length; node ``(i, j)`` at ``y = i L``, ``z = -j L``):

    * ground points ``P0 .. P{ny}`` at ``(0, i L, 0)``;
    * vertical bars ``v{i}_{j}`` (``i = 0..ny``, ``j = 1..nz``) from node ``(i, j-1)`` down
      to ``(i, j)``: frame at the upper end, points ``O = (0, 0, 0)``, ``E = (0, 0, -L)``;
      revolute joints about x: ``pivot{i}`` ground -> ``v{i}_1``, ``knee{i}_{j}``
      ``v{i}_{j-1}.E`` -> ``v{i}_{j}``;
    * horizontal bars ``h{i}_{j}`` (``i = 0..ny-1``, ``j = 1..nz``) from node ``(i, j)`` to
      ``(i+1, j)``: frame at the left end, points ``O``, ``E = (0, L, 0)``; revolute joint
      ``hinge{i}_{j}`` ``v{i}_{j}.E`` -> ``h{i}_{j}`` about x;
    * cut revolute joints ``closure{i}_{j}``: ``h{i}_{j}.E = v{i+1}_{j}.E``, axes x.

    Initial state: the undeformed square grid hanging under gravity -z, every rate zero
    except ``pivot0`` (``initial_rate``).  Degrees of freedom: the joints of the left
    column, ``pivot0, knee0_2, .., knee0_{nz}`` (each level of the grid shears
    independently).
    """
    ints = {}
    for key in ("ny", "nz"):
        v = opts[key]
        if isinstance(v, bool) or not (_is_number(v) and float(v).is_integer()) \
                or int(v) < 1:
            raise ctx.err(f"[generator] {key}", f"{key} must be an integer >= 1, got {v!r}")
        ints[key] = int(v)
    ny, nz = ints["ny"], ints["nz"]
    m = ctx.model
    L = _field(ctx, opts["link_length"], "length", "[generator] link_length")
    mass = _field(ctx, opts["link_mass"], "mass", "[generator] link_mass")
    inertia = _field(ctx, opts["link_inertia"], "inertia", "[generator] link_inertia")
    w0 = _static(ctx, opts["initial_rate"], {"angular_velocity",
                                              "dimensionless"}, "[generator] initial_rate")
    prov = opts.get("provenance", "") or ""

    def scaled(s):
        return _scaled(L, s)

    x = [1.0, 0.0, 0.0]
    for i in range(ny + 1):
        m.point(GROUND, f"P{i}", [0.0, scaled(i), 0.0])
    for i in range(ny + 1):
        for j in range(1, nz + 1):
            m.body(f"v{i}_{j}", mass, com=[0.0, 0.0, scaled(-0.5)],
                   inertia=[inertia, inertia, 0.0],
                   points={"O": [0.0, 0.0, 0.0], "E": [0.0, 0.0, scaled(-1.0)]},
                   provenance=prov)
            if j == 1:
                m.joint(f"pivot{i}", "revolute", GROUND, f"v{i}_1", parent_point=f"P{i}",
                        child_point="O", axis=x, q0=0.0,
                        qd0=(w0 if i == 0 else 0.0), provenance=prov)
            else:
                m.joint(f"knee{i}_{j}", "revolute", f"v{i}_{j - 1}", f"v{i}_{j}",
                        parent_point="E", child_point="O", axis=x, provenance=prov)
    for j in range(1, nz + 1):
        for i in range(ny):
            m.body(f"h{i}_{j}", mass, com=[0.0, scaled(0.5), 0.0],
                   inertia=[inertia, 0.0, inertia],
                   points={"O": [0.0, 0.0, 0.0], "E": [0.0, scaled(1.0), 0.0]},
                   provenance=prov)
            m.joint(f"hinge{i}_{j}", "revolute", f"v{i}_{j}", f"h{i}_{j}", parent_point="E",
                    child_point="O", axis=x, provenance=prov)
            m.cut(f"closure{i}_{j}", "revolute", f"h{i}_{j}", f"v{i + 1}_{j}", point1="E",
                  point2="E", axis1=x, provenance=prov)
    m.dof(*(["pivot0"] + [f"knee0_{j}" for j in range(2, nz + 1)]))


#: Registered generators: kind -> (function, {option: default}) (``None`` = required).
GENERATORS: dict[str, tuple[Callable, dict]] = {
    "n-four-bar": (_gen_n_four_bar, {"N": 40, "link_length": None, "link_mass": None,
                                     "link_inertia": None, "initial_speed": None,
                                     "provenance": ""}),
    "four-bar-grid": (_gen_four_bar_grid, {"ny": 1, "nz": 15, "link_length": None,
                                           "link_mass": None, "link_inertia": None,
                                           "initial_rate": None, "provenance": ""}),
}


# ----------------------------------------------------------------------------------------
# loading
# ----------------------------------------------------------------------------------------


def load_model(path, **options) -> Model:
    """Read a model file (``.toml`` or ``.json``).

    ``options`` override generator options (``N=4`` for an ``n-four-bar`` generator) or
    parameter values (``mA1=3.5``, in the parameter's own unit) before the model is built.
    """
    path = Path(path)
    source = str(path)
    suffix = path.suffix.lower()
    if suffix not in (".toml", ".json"):
        raise ModelError(f"{source}: unknown model file type {path.suffix!r} "
                         f"(expected .toml or .json)")
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise ModelError(f"model file not found: {source}") from None
    except OSError as exc:
        raise ModelError(f"{source}: cannot read the model file: {exc}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ModelError(f"{source}: the model file is not UTF-8: {exc}") from None
    try:
        data = tomllib.loads(text) if suffix == ".toml" else json.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ModelError(f"{source}: malformed TOML: {exc}") from None
    except json.JSONDecodeError as exc:
        raise ModelError(f"{source}: malformed JSON: {exc}") from None
    keep = None
    if isinstance(data, dict) and "base" in data:
        # a maneuver keeps the parameters and meta keys the derived file declares itself
        own = data.get("parameters", {})
        head = data.get("model", {})
        keep = (tuple(own) if isinstance(own, dict) else (),
                tuple(head.get("meta", {})) if isinstance(head, dict)
                and isinstance(head.get("meta", {}), dict) else ())
        data = _with_base(data, path, source)
    return model_from_dict(data, source=source, default_name=path.stem, maneuver_keep=keep,
                           **options)


#: sections of a derived model file that are merged entry by entry with the base file
_MERGED_TABLES = ("parameters", "objectives")


def _with_base(data: dict, path: Path, source: str, chain: tuple = ()) -> dict:
    """Merge a derived model document (top-level key ``base = "other.toml"``, a file
    next to it) onto its base: ``[model]`` keys and ``[model.meta]`` keys override,
    ``[parameters.X]`` / ``[objectives.X]`` tables replace or add entries by name, list
    sections (``[[drives]]``, ...) replace or add entries by ``name``, ``[road]`` and
    ``[ground]`` replace the base's.  Used for maneuvers of one vehicle (the vehicle's
    data stay in one file)."""
    base_name = data["base"]
    if not isinstance(base_name, str):
        raise ModelError(f"{source}: base must be a file name, got {base_name!r}")
    base_path = path.parent / base_name
    if base_path.resolve() == path.resolve():
        raise ModelError(f"{source}: base refers to the file itself")
    chain = chain + (path.resolve(),)
    if base_path.resolve() in chain:
        raise ModelError(f"{source}: base {base_name!r} closes a cycle of base files: "
                         + " -> ".join(p.name for p in chain + (base_path.resolve(),)))
    try:
        text = base_path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ModelError(f"{source}: cannot read the base model file {base_name!r}: "
                         f"{exc}") from None
    try:
        base = (tomllib.loads(text) if base_path.suffix.lower() == ".toml"
                else json.loads(text))
    except (tomllib.TOMLDecodeError, json.JSONDecodeError) as exc:
        raise ModelError(f"{base_path}: malformed base model file: {exc}") from None
    if not isinstance(base, dict):
        raise ModelError(f"{base_path}: a base model file must hold a table (TOML) or an "
                         f"object (JSON), not a {type(base).__name__}")
    if "base" in base:
        base = _with_base(base, base_path, str(base_path), chain)
    out = dict(base)
    for key, val in data.items():
        if key == "base":
            continue
        if key == "model" and isinstance(val, dict):
            head = dict(base.get("model", {}))
            for k, v in val.items():
                if k == "meta" and isinstance(v, dict):
                    head["meta"] = {**head.get("meta", {}), **v}
                else:
                    head[k] = v
            out["model"] = head
        elif key in _MERGED_TABLES and isinstance(val, dict):
            out[key] = {**base.get(key, {}), **val}
        elif key == "vehicle" and isinstance(val, dict) and isinstance(base.get(key), dict):
            out[key] = _merge_vehicle(base[key], val)
        elif key in _LIST_SECTIONS and isinstance(val, list):
            entries = list(base.get(key, []))
            index = {e.get("name"): i for i, e in enumerate(entries) if isinstance(e, dict)}
            for e in val:
                nm = e.get("name") if isinstance(e, dict) else None
                if nm in index:
                    entries[index[nm]] = e
                else:
                    entries.append(e)
            out[key] = entries
        else:
            out[key] = val
    return out


def _merge_vehicle(base, over):
    """A derived file's ``[vehicle]`` on its base's: tables merge key by key (recursively),
    lists of named tables (``axles``, ``springs``) entry by entry by ``name``, anything
    else replaces the base's value."""
    if isinstance(base, dict) and isinstance(over, dict):
        out = dict(base)
        for k, v in over.items():
            out[k] = _merge_vehicle(base[k], v) if k in base else v
        return out
    if isinstance(base, list) and isinstance(over, list) and all(
            isinstance(e, dict) and "name" in e for e in base + over):
        out = list(base)
        index = {e["name"]: i for i, e in enumerate(out)}
        for e in over:
            if e["name"] in index:
                out[index[e["name"]]] = _merge_vehicle(out[index[e["name"]]], e)
            else:
                out.append(e)
        return out
    return over


def model_from_dict(data: dict, source: str = "<dict>", default_name: str = "model",
                    maneuver_keep: tuple | None = None, **options) -> Model:
    """Build a :class:`Model` from a parsed model document (see the module docstring).

    ``maneuver_keep = (parameter names, meta keys)`` that a ``[maneuver]`` keeps (default:
    every parameter and meta key of the document; :func:`load_model` passes those the
    derived file declares itself, not its base's)."""
    if not isinstance(data, dict):
        raise ModelError(f"{source}: a model document must be a table, got "
                         f"{type(data).__name__}")
    for key in data:
        if key not in _SECTIONS:
            raise ModelError(f"{source}: unknown section {key!r}; allowed: "
                             f"{', '.join(sorted(_SECTIONS))}")
    if "vehicle" in data:
        # vehicle templates: expanded into ordinary sections first (workbench.model.vehicle)
        data = expand_document(data, source, options)
    head = data.get("model", {})
    probe = _Ctx(source, Model("?"))
    _check_keys(probe, head, "[model]", set(), _MODEL_KEYS)
    name = head.get("name", default_name)
    _string(probe, name, "[model] name")
    planar = head.get("planar", False)
    if not isinstance(planar, bool):
        raise probe.err("[model] planar", f"expected true or false, got {planar!r}")
    model = Model(name, gravity=(0.0, 0.0, -9.81), planar=planar,
                  description=_string(probe, head.get("description", ""), "[model] description"),
                  provenance=_string(probe, head.get("provenance", ""), "[model] provenance"))
    ctx = _Ctx(source, model)
    for key in ("rod_mode", "rod_extrapolation"):
        if key in head:
            _guard(probe, "[model] " + key, model.rod_options,
                   **{key[4:]: _string(probe, head[key], "[model] " + key)})

    # ---- options: generator options or parameter overrides
    gen = data.get("generator")
    gen_defaults = {}
    if gen is not None:
        if not isinstance(gen, dict) or "kind" not in gen:
            raise ctx.err("[generator]", "needs a table with a 'kind'")
        if gen["kind"] not in GENERATORS:
            raise _unknown(ctx, "generator", gen["kind"], GENERATORS, "[generator] kind")
        gen_defaults = GENERATORS[gen["kind"]][1]
    params_raw = data.get("parameters", {})
    if not isinstance(params_raw, dict):
        raise ctx.err("[parameters]", "expected a table of parameter tables")
    gen_over, par_over = {}, {}
    for key, val in options.items():
        if key in gen_defaults and key != "provenance":
            gen_over[key] = val
        elif key in params_raw:
            par_over[key] = val
        else:
            known = sorted(set(k for k in gen_defaults if k != "provenance") | set(params_raw))
            raise ModelError(f"{source}: unknown option {key!r}; known options: "
                             f"{', '.join(known) if known else '(none)'}")

    # ---- parameters
    for pname, spec in params_raw.items():
        where = f"[parameters.{pname}]"
        if _is_number(spec):
            spec = {"value": spec}
        _check_keys(ctx, spec, where, {"value"}, _PARAM_KEYS - {"value"})
        value = par_over.get(pname, spec["value"])
        if not _is_number(value):
            raise ctx.err(where + " value", f"expected a number, got {value!r}")
        bounds = {}
        for b in ("lower", "upper"):
            if spec.get(b) is not None:
                if not _is_number(spec[b]):
                    raise ctx.err(f"{where} {b}", f"expected a number, got {spec[b]!r}")
                bounds[b] = float(spec[b])
        unit = spec.get("unit")
        if unit is not None:
            _string(ctx, unit, where + " unit")
        try:
            model.parameter(pname, float(value), unit,
                            _string(ctx, spec.get("provenance", ""), where + " provenance"),
                            **bounds)
        except ModelError as exc:
            _rethrow(exc, f"{source}: {where}")

    # ---- model header fields that need parameters
    if "gravity" in head:
        model.gravity = _static_list(ctx, head["gravity"], _ACCEL, "[model] gravity", 3)

    # ---- ground
    if "ground" in data:
        g = data["ground"]
        _check_keys(ctx, g, "[ground]", set(), _GROUND_KEYS)
        model.bodies[GROUND].provenance = _string(ctx, g.get("provenance", ""),
                                                  "[ground] provenance")
        for pn, pv in _table(ctx, g.get("points", {}), "[ground] points").items():
            _guard(ctx, f"[ground] points.{pn}", model.point, GROUND, pn,
                   _vec3(ctx, pv, "length", f"[ground] points.{pn}"))
        for vn, vv in _table(ctx, g.get("vectors", {}), "[ground] vectors").items():
            _guard(ctx, f"[ground] vectors.{vn}", model.vector, GROUND, vn,
                   _static_list(ctx, vv, None, f"[ground] vectors.{vn}", 3))

    # ---- generator
    if gen is not None:
        fn, defaults = GENERATORS[gen["kind"]]
        _check_keys(ctx, gen, "[generator]", {"kind"}, set(defaults))
        opts = {k: gen.get(k, d) for k, d in defaults.items()}
        opts.update(gen_over)
        for k, v in opts.items():
            if v is None:
                raise ctx.err("[generator]", f"missing option {k!r} for kind {gen['kind']!r}")
        try:
            fn(ctx, opts)
        except ModelError as exc:
            if str(exc).startswith(source):
                raise
            _rethrow(exc, f"{source}: [generator]")
        model.meta.setdefault("generator", {"kind": gen["kind"],
                                            **{k: v for k, v in opts.items()
                                               if k != "provenance"}})

    # ---- list sections
    for i, b in enumerate(_entries(ctx, data, "bodies")):
        where = _where("bodies", i, b)
        if b["name"] == GROUND:
            raise ctx.err(where, "use the [ground] section for ground points and vectors")
        _guard(ctx, where, model.body, _string(ctx, b["name"], where + " name"),
               _field(ctx, b["mass"], "mass", where + " mass"),
               com=_vec3(ctx, b.get("com", [0, 0, 0]), "length", where + " com"),
               inertia=_inertia(ctx, b.get("inertia", [0, 0, 0]), where + " inertia"),
               provenance=_string(ctx, b.get("provenance", ""), where + " provenance"))
        for pn, pv in _table(ctx, b.get("points", {}), where + " points").items():
            _guard(ctx, f"{where} points.{pn}", model.point, b["name"], pn,
                   _vec3(ctx, pv, "length", f"{where} points.{pn}"))
        for vn, vv in _table(ctx, b.get("vectors", {}), where + " vectors").items():
            _guard(ctx, f"{where} vectors.{vn}", model.vector, b["name"], vn,
                   _static_list(ctx, vv, None, f"{where} vectors.{vn}", 3))

    for i, j in enumerate(_entries(ctx, data, "joints")):
        where = _where("joints", i, j)
        parent, child = (_body_name(ctx, j[k], f"{where} {k}") for k in ("parent", "child"))
        jtype = _string(ctx, j["type"], where + " type")
        kw = dict(parent_point=_point(ctx, parent, j.get("parent_point", [0, 0, 0]),
                                      where + " parent_point"),
                  child_point=_point(ctx, child, j.get("child_point", [0, 0, 0]),
                                     where + " child_point"),
                  provenance=_string(ctx, j.get("provenance", ""), where + " provenance"))
        for k in ("axis", "axis2"):
            if k in j:
                kw[k] = _static_list(ctx, j[k], None, f"{where} {k}", 3)
        if "normal" in j:
            kw["normal"] = _static_list(ctx, j["normal"], None, f"{where} normal", 3)
        if "orientation" in j:
            kw["orientation"] = _orientation(ctx, j["orientation"], where + " orientation")
        if "q0" in j:
            kw["q0"] = _static_list(ctx, j["q0"], _COORD, where + " q0")
        if "qd0" in j:
            kw["qd0"] = _static_list(ctx, j["qd0"], _RATE, where + " qd0")
        _guard(ctx, where, model.joint, _string(ctx, j["name"], where + " name"), jtype,
               parent, child, **kw)

    for i, c in enumerate(_entries(ctx, data, "cam_followers")):
        where = _where("cam_followers", i, c)
        cam, fol = (_body_name(ctx, c[k], f"{where} {k}") for k in ("cam", "follower"))
        kw = dict(follower_point=_point(ctx, fol, c.get("follower_point", [0, 0, 0]),
                                        where + " follower_point"),
                  provenance=_string(ctx, c.get("provenance", ""), where + " provenance"))
        for k in ("normal", "zero"):
            if k in c:
                kw[k] = _static_list(ctx, c[k], None, f"{where} {k}", 3)
        if "orientation" in c:
            kw["orientation"] = _orientation(ctx, c["orientation"], where + " orientation")
        if "q0" in c:
            kw["q0"] = _static_list(ctx, c["q0"], _COORD, where + " q0", 2)
        if "qd0" in c:
            kw["qd0"] = _static_list(ctx, c["qd0"], _RATE, where + " qd0", 2)
        cos, sin = _profile(ctx, c, where)
        _guard(ctx, where, model.cam_follower, _string(ctx, c["name"], where + " name"), cam,
               fol, _point(ctx, cam, c["center"], where + " center"),
               _field(ctx, c["a0"], "length", where + " a0"), cos, sin, **kw)

    for i, c in enumerate(_entries(ctx, data, "cam_relations")):
        where = _where("cam_relations", i, c)
        radial, polar = (_joint_name(ctx, c[k], f"{where} {k}") for k in ("radial", "polar"))
        cos, sin = _profile(ctx, c, where)
        _guard(ctx, where, model.cam_relation, _string(ctx, c["name"], where + " name"),
               radial, polar, _field(ctx, c["a0"], "length", where + " a0"), cos, sin,
               provenance=_string(ctx, c.get("provenance", ""), where + " provenance"))

    for i, c in enumerate(_entries(ctx, data, "anti_roll_bars")):
        where = _where("anti_roll_bars", i, c)
        body = _body_name(ctx, c["body"], where + " body")
        pairs = {}
        for key in ("pivots", "arms", "links"):
            if not isinstance(c[key], list) or len(c[key]) != 2:
                raise ctx.err(where, f"{key} must be a list of two entries, got {c[key]!r}")
        pivots = [_static_list(ctx, v, None, f"{where} pivots[{j}]", 3)
                  for j, v in enumerate(c["pivots"])]
        arms = [_static_list(ctx, v, None, f"{where} arms[{j}]", 3)
                for j, v in enumerate(c["arms"])]
        for j, lk in enumerate(c["links"]):
            if not isinstance(lk, list) or len(lk) != 2:
                raise ctx.err(where, f"links[{j}] must be [body, point], got {lk!r}")
            b = _body_name(ctx, lk[0], f"{where} links[{j}] body")
            pairs[j] = (b, _point(ctx, b, lk[1], f"{where} links[{j}] point"))
        ll = c["link_length"]
        ll = ([_field(ctx, v, "length", f"{where} link_length") for v in ll]
              if isinstance(ll, list) else _field(ctx, ll, "length", where + " link_length"))
        _guard(ctx, where, model.anti_roll_bar, _string(ctx, c["name"], where + " name"), body,
               pivots, arms, (pairs[0], pairs[1]), ll,
               _field(ctx, c["k"], "rot_stiffness", where + " k"),
               provenance=_string(ctx, c.get("provenance", ""), where + " provenance"))

    for i, c in enumerate(_entries(ctx, data, "cuts")):
        where = _where("cuts", i, c)
        b1, b2 = (_body_name(ctx, c[k], f"{where} {k}") for k in ("body1", "body2"))
        kw = dict(point1=_point(ctx, b1, c.get("point1", [0, 0, 0]), where + " point1"),
                  point2=_point(ctx, b2, c.get("point2", [0, 0, 0]), where + " point2"),
                  provenance=_string(ctx, c.get("provenance", ""), where + " provenance"))
        if "axis1" in c:
            kw["axis1"] = _static_list(ctx, c["axis1"], None, where + " axis1", 3)
        if "axis2" in c:
            kw["axis2"] = _static_list(ctx, c["axis2"], None, where + " axis2", 3)
        for k in ("normal", "normal2"):
            if k in c:
                kw[k] = _static_list(ctx, c[k], None, f"{where} {k}", 3)
        _guard(ctx, where, model.cut, _string(ctx, c["name"], where + " name"),
               _string(ctx, c["type"], where + " type"), b1, b2, **kw)

    for i, d in enumerate(_entries(ctx, data, "distances")):
        where = _where("distances", i, d)
        b1, b2 = (_body_name(ctx, d[k], f"{where} {k}") for k in ("body1", "body2"))
        _guard(ctx, where, model.distance, _string(ctx, d["name"], where + " name"), b1,
               _point(ctx, b1, d["point1"], where + " point1"), b2,
               _point(ctx, b2, d["point2"], where + " point2"),
               _field(ctx, d["length"], "length", where + " length"))

    for i, d in enumerate(_entries(ctx, data, "rods")):
        where = _where("rods", i, d)
        b1, b2 = (_body_name(ctx, d[k], f"{where} {k}") for k in ("body1", "body2"))
        _guard(ctx, where, model.rod, _string(ctx, d["name"], where + " name"), b1,
               _point(ctx, b1, d["point1"], where + " point1"), b2,
               _point(ctx, b2, d["point2"], where + " point2"),
               _field(ctx, d["mass"], "mass", where + " mass"),
               _field(ctx, d["length"], "length", where + " length"))

    for i, d in enumerate(_entries(ctx, data, "drives")):
        where = _where("drives", i, d)
        joint = _joint_name(ctx, d["joint"], where + " joint")
        index = _index(ctx, d.get("index", 0), joint, where + " index")
        _guard(ctx, where, model.drive, _string(ctx, d["name"], where + " name"), joint,
               _function(ctx, d["function"], where + " function"), index)

    for i, s in enumerate(_entries(ctx, data, "springs")):
        where = _where("springs", i, s)
        b1, b2 = (_body_name(ctx, s[k], f"{where} {k}") for k in ("body1", "body2"))
        _guard(ctx, where, model.spring, _string(ctx, s["name"], where + " name"), b1,
               _point(ctx, b1, s["point1"], where + " point1"), b2,
               _point(ctx, b2, s["point2"], where + " point2"),
               _field(ctx, s["k"], "stiffness", where + " k"),
               c=_field(ctx, s.get("c", 0.0), "damping", where + " c"),
               length=_field(ctx, s.get("length", 0.0), "length", where + " length"),
               air=_spring_air(ctx, s.get("air"), where + " air"),
               damper=_spring_damper(ctx, s.get("damper"), where + " damper"))

    for i, s in enumerate(_entries(ctx, data, "joint_springs")):
        where = _where("joint_springs", i, s)
        joint = _joint_name(ctx, s["joint"], where + " joint")
        index = _index(ctx, s.get("index", 0), joint, where + " index")
        _guard(ctx, where, model.joint_spring, _string(ctx, s["name"], where + " name"), joint,
               _field(ctx, s["k"], "joint_stiffness", where + " k"),
               c=_field(ctx, s.get("c", 0.0), "joint_damping", where + " c"),
               q0=_field(ctx, s.get("q0", 0.0), "coordinate", where + " q0"), index=index)

    for i, f in enumerate(_entries(ctx, data, "forces")):
        where = _where("forces", i, f)
        body = _body_name(ctx, f["body"], where + " body")
        _guard(ctx, where, model.force, _string(ctx, f["name"], where + " name"), body,
               _point(ctx, body, f["point"], where + " point"),
               _direction(ctx, f["direction"], where + " direction"),
               _function(ctx, f["function"], where + " function"))

    for i, t in enumerate(_entries(ctx, data, "torques")):
        where = _where("torques", i, t)
        body = _body_name(ctx, t["body"], where + " body")
        _guard(ctx, where, model.torque, _string(ctx, t["name"], where + " name"), body,
               _direction(ctx, t["direction"], where + " direction"),
               _function(ctx, t["function"], where + " function"))

    for i, t in enumerate(_entries(ctx, data, "tires")):
        where = _where("tires", i, t)
        body = _body_name(ctx, t["body"], where + " body")
        axis = t["axis"]
        if isinstance(axis, str):
            vecs = ctx.model.bodies[body].vectors
            if axis not in vecs:
                raise _unknown(ctx, f"vector on body {body!r}", axis, vecs, where + " axis")
        else:
            axis = _static_list(ctx, axis, None, where + " axis", 3)
        kw = {key: _field(ctx, t[key], dim, f"{where} {key}")
              for key, dim in _TIRE_FIELDS if key in t}
        if "law" in t:
            kw["law"] = _string(ctx, t["law"], where + " law")
        if "tir" in t:
            tir = _string(ctx, t["tir"], where + " tir")
            # a relative path is read from the model file's directory
            here = Path(ctx.source).parent
            if tir not in shipped_tir_names() and (here / tir).is_file():
                tir = str(here / tir)
            kw["tir"] = tir
        if "coefficients" in t:
            coefs = t["coefficients"]
            if not isinstance(coefs, dict):
                raise ctx.err(where + " coefficients", f"expected a table NAME = value, got "
                              f"{coefs!r}")
            kw["coefficients"] = {
                name: _field(ctx, v, coefficient_dimension(str(name)),
                             f"{where} coefficients.{name}")
                for name, v in coefs.items()}
        _guard(ctx, where, model.tire, _string(ctx, t["name"], where + " name"), body,
               _point(ctx, body, t["center"], where + " center"), axis,
               provenance=_string(ctx, t.get("provenance", ""), where + " provenance"), **kw)

    for i, sc in enumerate(_entries(ctx, data, "speed_controls")):
        where = _where("speed_controls", i, sc)
        body = _body_name(ctx, sc["body"], where + " body")
        heading = sc["heading"]
        if not isinstance(heading, str):
            heading = _static_list(ctx, heading, None, where + " heading", 3)
        if not isinstance(sc["wheels"], list) or not sc["wheels"]:
            raise ctx.err(where, f"wheels must be a non-empty list, got {sc['wheels']!r}")
        wheels = []
        for j, row in enumerate(sc["wheels"]):
            wj = f"{where} wheels[{j}]"
            if not isinstance(row, list) or len(row) != 4:
                raise ctx.err(wj, f"expected [wheel, carrier, axis, share], got {row!r}")
            wheel = _body_name(ctx, row[0], wj + " wheel")
            carrier = _body_name(ctx, row[1], wj + " carrier")
            axis = row[2] if isinstance(row[2], str) else _static_list(ctx, row[2], None,
                                                                        wj + " axis", 3)
            wheels.append((wheel, carrier, axis, _field(ctx, row[3], "dimensionless",
                                                        wj + " share")))
        _guard(ctx, where, model.speed_control, _string(ctx, sc["name"], where + " name"),
               body, _point(ctx, body, sc["point"], where + " point"), heading,
               _function(ctx, sc["speed"], where + " speed"), wheels,
               _field(ctx, sc["gain"], None, where + " gain"),
               _field(ctx, sc["torque_max"], "torque", where + " torque_max"))

    for i, pf in enumerate(_entries(ctx, data, "path_followers")):
        where = _where("path_followers", i, pf)
        body = _body_name(ctx, pf["body"], where + " body")
        joint = _joint_name(ctx, pf["joint"], where + " joint")
        index = _index(ctx, pf.get("index", 0), joint, where + " index")
        _guard(ctx, where, model.path_follower, _string(ctx, pf["name"], where + " name"),
               body, _point(ctx, body, pf["point"], where + " point"), joint,
               _function(ctx, pf["path"], where + " path"),
               _field(ctx, pf["gain"], None, where + " gain"),
               _field(ctx, pf["stiffness"], "joint_stiffness", where + " stiffness"),
               _field(ctx, pf["damping"], "joint_damping", where + " damping"), index=index)

    if "road" in data:
        rd = data["road"]
        _check_keys(ctx, rd, "[road]", set(), _ROAD_KEYS)
        steps_raw = rd.get("steps", [])
        if not isinstance(steps_raw, list):
            raise ctx.err("[road] steps", "expected a list of tables {x, height, length}")
        steps = []
        for i, st in enumerate(steps_raw):
            w = f"[road] steps[{i}]"
            _check_keys(ctx, st, w, {"x", "height", "length"}, set())
            steps.append({key: _field(ctx, st[key], "length", f"{w} {key}")
                          for key in ("x", "height", "length")})
        _guard(ctx, "[road]", model.road, _field(ctx, rd.get("z0", 0.0), "length", "[road] z0"),
               steps, provenance=_string(ctx, rd.get("provenance", ""), "[road] provenance"))

    # ---- degrees of freedom, objectives, metadata
    if "dof" in head:
        model.dof(*_dof(ctx, head["dof"]))
    objectives = data.get("objectives", {})
    if not isinstance(objectives, dict) or not all(isinstance(v, dict)
                                                   for v in objectives.values()):
        raise ctx.err("[objectives]", "expected a table of tables [objectives.NAME]")
    model.objectives.update(objectives)
    meta = head.get("meta", {})
    if not isinstance(meta, dict):
        raise ctx.err("[model.meta]", "expected a table")
    model.meta.update(meta)

    # ---- maneuver (expanded last: it measures the finished vehicle)
    if "maneuver" in data:
        model = _maneuver(ctx, data["maneuver"], data, meta, maneuver_keep, par_over)
    return model


#: the maneuver expander ``(function, kinds)``, registered by :mod:`workbench.maneuvers`
#: (imported by ``workbench/__init__.py``; it solves position problems, a layer above this
#: one, so this module does not import it)
_MANEUVERS: list = []


def register_maneuvers(function: Callable, kinds: tuple) -> None:
    """Register the expander of ``[maneuver]`` tables: ``function(model, kind, keep=...,
    keep_meta=..., **options) -> Model`` for the maneuver ``kinds``."""
    _MANEUVERS[:] = [(function, tuple(kinds))]


def _maneuver(ctx: _Ctx, spec, data: dict, meta: dict, keep, par_over: dict) -> Model:
    """Apply the ``[maneuver]`` table (``kind`` + options) with the registered expander
    (:func:`workbench.maneuvers.maneuver`)."""
    if not _MANEUVERS:
        raise ctx.err("[maneuver]", "no maneuver expander is registered (import workbench)")
    maneuver, kinds = _MANEUVERS[0]
    if not isinstance(spec, dict) or "kind" not in spec:
        raise ctx.err("[maneuver]", "needs a table with a 'kind'")
    kind = spec["kind"]
    if kind not in kinds:
        raise _unknown(ctx, "maneuver", kind, kinds, "[maneuver] kind")
    bad = {"keep", "keep_meta"} & set(spec)
    if bad:
        raise ctx.err("[maneuver]", f"unknown option {sorted(bad)[0]!r} for maneuver {kind!r}")
    if keep is None:
        params = data.get("parameters", {})
        keep = (tuple(params) if isinstance(params, dict) else (), tuple(meta))
    opts = {k: v for k, v in spec.items() if k != "kind"}
    try:
        return maneuver(ctx.model, kind, keep=tuple(keep[0]) + tuple(par_over),
                        keep_meta=tuple(keep[1]), **opts)
    except ModelError as exc:
        _rethrow(exc, f"{ctx.source}: [maneuver]")


def _where(section: str, i: int, entry) -> str:
    name = entry.get("name") if isinstance(entry, dict) else None
    return f"[[{section}]] #{i + 1}" + (f" ({name!r})" if isinstance(name, str) else "")


def _entries(ctx, data, section):
    entries = data.get(section, [])
    if not isinstance(entries, list):
        raise ctx.err(f"[[{section}]]", "expected an array of tables")
    required, optional = _LIST_SECTIONS[section]
    for i, e in enumerate(entries):
        _check_keys(ctx, e, _where(section, i, e), required, optional)
    return entries


def _table(ctx, v, where) -> dict:
    if not isinstance(v, dict):
        raise ctx.err(where, "expected a table {name = [x, y, z], ...}")
    return v


def _guard(ctx, where, fn, *args, **kw):
    try:
        return fn(*args, **kw)
    except ModelError as exc:
        if str(exc).startswith(ctx.source):
            raise
        _rethrow(exc, f"{ctx.source}: {where}")


def _profile(ctx, entry, where) -> tuple:
    """The Fourier coefficients ``cos``, ``sin`` of a cam profile (lists of parametric
    lengths, default empty)."""
    out = []
    for k in ("cos", "sin"):
        v = entry.get(k, [])
        if not isinstance(v, list):
            raise ctx.err(f"{where} {k}", f"expected a list of coefficients, got {v!r}")
        out.append([_field(ctx, x, "length", f"{where} {k}[{i}]") for i, x in enumerate(v)])
    return tuple(out)


def _inertia(ctx, v, where):
    if not isinstance(v, (list, tuple)) or len(v) not in (3, 6):
        raise ctx.err(where, f"expected 3 or 6 values (Ixx, Iyy, Izz[, Ixy, Ixz, Iyz]), got {v!r}")
    return [_field(ctx, x, "inertia", f"{where}[{i}]") for i, x in enumerate(v)]


def _body_name(ctx, v, where) -> str:
    _string(ctx, v, where)
    if v not in ctx.model.bodies:
        raise _unknown(ctx, "body", v, ctx.model.bodies, where)
    return v


def _joint_name(ctx, v, where) -> str:
    _string(ctx, v, where)
    if v not in ctx.model.joints:
        raise _unknown(ctx, "joint", v, ctx.model.joints, where)
    return v


def _index(ctx, v, joint, where) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise ctx.err(where, f"expected an integer, got {v!r}")
    n = len(COORD_SUFFIX[ctx.model.joints[joint].type])
    if not 0 <= v < n:
        raise ctx.err(where, f"joint {joint!r} has {n} coordinates, index {v} is out of range")
    return v


def _coordinate_names(model: Model) -> list:
    return [j.name + s for j in model.joints.values() for s in COORD_SUFFIX[j.type]]


def _dof(ctx, spec) -> list:
    if not isinstance(spec, list):
        raise ctx.err("[model] dof", f"expected a list, got {spec!r}")
    coords = _coordinate_names(ctx.model)
    out = []
    for i, item in enumerate(spec):
        where = f"[model] dof[{i}]"
        if isinstance(item, str):
            if item not in coords:
                raise _unknown(ctx, "coordinate (dof)", item, coords, where)
            out.append(item)
            continue
        _check_keys(ctx, item, where, {"point"}, {"axis", "velocity", "value"})
        pname = _string(ctx, item["point"], where + " point")
        body, _, pt = pname.rpartition(".")
        if body not in ctx.model.bodies or pt not in ctx.model.bodies[body].points:
            known = [f"{b}.{p}" for b, bd in ctx.model.bodies.items() for p in bd.points]
            raise _unknown(ctx, "point (dof)", pname, known, where)
        d = {"point": pname}
        if "axis" in item:
            if item["axis"] not in ("x", "y", "z"):
                raise ctx.err(where + " axis", f"must be 'x', 'y' or 'z', got {item['axis']!r}")
            d["axis"] = item["axis"]
        if "velocity" in item:
            d["velocity"] = _static(ctx, item["velocity"], {"velocity", "dimensionless"},
                                    where + " velocity")
        if "value" in item:
            d["value"] = _static(ctx, item["value"], {"length", "dimensionless"},
                                 where + " value")
        out.append(d)
    return out


# ----------------------------------------------------------------------------------------
# saving
# ----------------------------------------------------------------------------------------


