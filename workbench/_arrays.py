"""The compiled, immutable array form of a model, as handed to the numba kernels.

:func:`ModelArrays` builds the flat numpy arrays of a model into one numba *StructRef*
(:class:`KernelArrays`).  All numeric data that can be bound to a design parameter live in
the *field vector* ``p`` and are read through index arrays, so a parameter change is a
change of ``p`` only and derivatives with respect to parameters are derivatives with
respect to entries of ``p``.

Why a StructRef and not a named tuple: numba passes a tuple argument by value, flattened
into its arrays, and reference-counts every member array on each call that LLVM does not
inline.  With ~40 arrays that cost ~0.8 us per kernel call (measured: a point-kinematics
call 1.4 us through the tuple, 0.01 us through a StructRef), which dominated the time
step.  A StructRef is passed as one pointer.  Python code reads the fields as attributes
as before (they are served from the named-tuple copy kept on the proxy).
"""

from __future__ import annotations

from collections import namedtuple

from numba import njit, typeof, types
from numba.experimental import structref

# frame (tree node) types
FIXED, REVOLUTE, PRISMATIC = 0, 1, 2
# primitive constraint equation types
C_PTCOMP, C_DOTVV, C_DOTVP, C_DIST, C_DRIVE = 0, 1, 2, 3, 4
# degree-of-freedom kinds
DOF_COORD, DOF_POINT = 0, 1
# time-function kinds
TF_CONST, TF_POLY, TF_SINE, TF_SMOOTHSTEP, TF_STEPS = 0, 1, 2, 3, 4
# applied load kinds
AF_FORCE, AF_TORQUE = 0, 1

ModelArraysTuple = namedtuple(
    "ModelArraysTuple",
    [
        "p",            # float[nfield]: numeric fields (geometry, inertia, force data)
        "gravity",      # float[3]
        "planar",       # int: 1 for planar models
        # frames (tree nodes); parents come before children
        "fr_parent", "fr_type", "fr_coord", "fr_off", "fr_axis", "fr_C",
        "fr_body",      # int[nf]: body attached to the frame or -1
        # bodies
        "b_frame", "b_org", "b_mass", "b_com", "b_inr",
        # points (body -1 = ground, coordinates in the body frame) and unit vectors
        "pt_body", "pt_fld", "vc_body", "vc_val",
        # primitive constraint equations
        "c_type", "c_i", "c_fld",
        # degrees of freedom
        "dof_type", "dof_i",
        # point-to-point spring-dampers
        "sp_pt", "sp_k", "sp_c", "sp_L0",
        # joint spring-dampers
        "js_coord", "js_k", "js_c", "js_z0",
        # applied forces / torques
        "af_type", "af_idx", "af_dir", "af_tf",
        # time functions
        "tf_kind", "tf_par",
        # tire-ground contacts (workbench/_tire.py): wheel-centre point, spin-axis vector,
        # first of the TY_NPAR consecutive parameter fields in p
        "ty_pt", "ty_vc", "ty_par",
        # road: (first field, number of fields) of the road array in p (length 0: flat z=0)
        "rd_fld",
    ],
)


@structref.register
class ModelArraysType(types.StructRef):
    """Numba type of :class:`KernelArrays` (one field per entry of ModelArraysTuple)."""

    def preprocess_fields(self, fields):
        return tuple((name, types.unliteral(typ)) for name, typ in fields)


class KernelArrays(structref.StructRefProxy):
    """Python handle of the kernel arrays: passed to the numba kernels as one pointer;
    attribute access and iteration read the named-tuple copy ``tuple``."""

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self.tuple, name)

    def __iter__(self):
        return iter(self.tuple)

    def __reduce__(self):
        return (_from_tuple, (tuple(self.tuple),))


structref.define_boxing(ModelArraysType, KernelArrays)

_CTORS: dict = {}


def _constructor(kinds, tuple_cls=None, st_cls=None):
    """A jitted constructor for one combination of field types (compiled once per
    process; the kernels themselves are cached on disk)."""
    tuple_cls = ModelArraysTuple if tuple_cls is None else tuple_cls
    st_cls = ModelArraysType if st_cls is None else st_cls
    key = (st_cls, kinds)
    ctor = _CTORS.get(key)
    if ctor is None:
        st_type = st_cls(list(zip(tuple_cls._fields, kinds)))
        names = tuple_cls._fields
        src = (f"def ctor({', '.join(names)}):\n    st = new(T)\n"
               + "".join(f"    st.{n} = {n}\n" for n in names) + "    return st\n")
        ns = {"new": structref.new, "T": st_type}
        exec(src, ns)
        ctor = _CTORS[key] = njit(ns["ctor"])
    return ctor


def struct_from_tuple(tup, st_cls):
    """One StructRef (numba type ``st_cls``, boxed to its registered proxy) holding the
    fields of the named tuple ``tup`` (arrays made read-only); the proxy serves Python
    attribute reads from ``tup``."""
    for v in tup:
        if hasattr(v, "flags"):
            v.flags.writeable = False      # immutable: the kernels see read-only arrays
    kinds = tuple(typeof(v) for v in tup)
    obj = _constructor(kinds, type(tup), st_cls)(*tup)
    obj.__dict__["tuple"] = tup
    return obj


def _from_tuple(values) -> KernelArrays:
    return struct_from_tuple(ModelArraysTuple(*values), ModelArraysType)


def ModelArrays(**fields) -> KernelArrays:
    """Kernel arrays from keyword fields (the names of :data:`ModelArraysTuple`)."""
    tup = ModelArraysTuple(**fields)
    return _from_tuple(tuple(tup))
