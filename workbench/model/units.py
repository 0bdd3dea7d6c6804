"""Minimal unit handling: SI conversion factors and dimension checks for model fields.

Values in model files and parameters may carry a unit; each numeric field of a model
has a dimension.  A unit of the wrong dimension raises :class:`UnitError`.
"""

from __future__ import annotations

from workbench.errors import UnitError

# unit -> (dimension, factor to SI)
UNITS: dict[str, tuple[str, float]] = {
    "m": ("length", 1.0), "mm": ("length", 1e-3), "cm": ("length", 1e-2), "km": ("length", 1e3),
    "kg": ("mass", 1.0), "g": ("mass", 1e-3), "t": ("mass", 1e3),
    "kg*m^2": ("inertia", 1.0), "kg m^2": ("inertia", 1.0), "kg*mm^2": ("inertia", 1e-6),
    "g*cm^2": ("inertia", 1e-7),
    "N/m": ("stiffness", 1.0), "N/mm": ("stiffness", 1e3), "kN/m": ("stiffness", 1e3),
    "N*s/m": ("damping", 1.0), "N s/m": ("damping", 1.0), "kN*s/m": ("damping", 1e3),
    "N*m/rad": ("rot_stiffness", 1.0), "N*m*s/rad": ("rot_damping", 1.0),
    "N": ("force", 1.0), "kN": ("force", 1e3), "N*m": ("torque", 1.0),
    "rad": ("angle", 1.0), "deg": ("angle", 3.141592653589793 / 180.0),
    "s": ("time", 1.0), "m/s": ("velocity", 1.0), "km/h": ("velocity", 1.0 / 3.6),
    "rad/s": ("angular_velocity", 1.0), "m/s^2": ("acceleration", 1.0),
    "1": ("dimensionless", 1.0), "-": ("dimensionless", 1.0),
    "m^2": ("area", 1.0), "cm^2": ("area", 1e-4), "mm^2": ("area", 1e-6),
    "m^3": ("volume", 1.0), "l": ("volume", 1e-3), "L": ("volume", 1e-3),
    "Pa": ("pressure", 1.0), "kPa": ("pressure", 1e3), "MPa": ("pressure", 1e6),
    "bar": ("pressure", 1e5),
}

#: The SI unit reported for each dimension.
SI_UNIT = {
    "length": "m", "mass": "kg", "inertia": "kg*m**2", "stiffness": "N/m", "damping": "N*s/m",
    "rot_stiffness": "N*m/rad", "rot_damping": "N*m*s/rad", "force": "N", "torque": "N*m",
    "angle": "rad", "time": "s", "velocity": "m/s", "angular_velocity": "rad/s",
    "acceleration": "m/s**2", "dimensionless": None, "area": "m**2", "volume": "m**3",
    "pressure": "Pa",
}


def dimension_of(unit: str) -> str:
    """Dimension name of ``unit``; raises :class:`UnitError` when the unit is unknown."""
    try:
        return UNITS[unit.strip()][0]
    except KeyError:
        raise UnitError(f"unknown unit {unit!r}; known units: {', '.join(sorted(UNITS))}") from None


def to_si(value: float, unit: str | None, dimension: str, where: str) -> float:
    """Convert ``value`` given in ``unit`` to SI, checking that it has ``dimension``.

    ``where`` names the model field, for the error message.
    """
    if unit is None:
        return float(value)
    dim, factor = UNITS.get(unit.strip(), (None, None))
    if dim is None:
        raise UnitError(f"{where}: unknown unit {unit!r}")
    # stiffness/damping of joint springs may be rotational or translational
    compatible = {dimension}
    if dimension == "joint_stiffness":
        compatible = {"stiffness", "rot_stiffness"}
    elif dimension == "joint_damping":
        compatible = {"damping", "rot_damping"}
    elif dimension == "coordinate":
        compatible = {"length", "angle"}
    if dim not in compatible and not (dim == "dimensionless" and dimension == "dimensionless"):
        raise UnitError(f"{where}: unit {unit!r} is a {dim}, but this field needs a {dimension}")
    return float(value) * factor
