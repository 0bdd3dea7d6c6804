"""Reader of TNO/ADAMS tyre property files (``.tir``) for the MF 5.2 law of
:mod:`workbench.forces.magic_formula`.

Format read
-----------
* ``[SECTION]`` headers (names upper-cased);
* ``NAME = value`` lines, the value a number (``1.2``, ``-3e-4``, Fortran ``1.0D+00``) or a
  quoted string (``'meter'``, ``"ASCII"``), names upper-cased;
* comments: everything from ``$`` or ``!`` to the end of the line (outside quotes);
  blank lines;
* tables, as in ``[SHAPE]``: a ``{column names}`` line followed by rows of numbers; kept in
  :attr:`TirData.tables`, not used by the law.

Anything else (a line that is neither a header, an assignment, a table line nor a comment;
an assignment before the first section; an unreadable value; a name given twice) raises
:class:`~workbench.errors.ModelError` with ``file:line`` and the offending text.

What is returned
----------------
:class:`TirData`: every ``NAME = value`` of the data sections in ``coefficients`` (units in
``units``, the ``[MDI_HEADER]`` in ``header``), the flat coefficient array ``array`` of the
MF 5.2 kernels (layout :data:`~workbench.forces.magic_formula.COEFFICIENT_NAMES`), the names
read that the law does not use (``unknown``: kept in ``coefficients``, reported) and the law's
coefficients the file does not give (``defaulted``: set to 0, scaling factors ``L*`` to 1).

Checks: the ``[UNITS]`` must be SI (meter, newton, radian(s), kg, second; no conversion is
done), ``FITTYP`` (when given) must name MF 5.2 (6 or 21) unless ``check_version=False``,
``FNOMIN`` must be given and, like ``LFZO``, positive, and ``UNLOADED_RADIUS`` must be given.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from workbench.errors import ModelError
from workbench.forces.magic_formula import COEFFICIENT_NAMES, coefficient_array

#: FITTYP values of MF 5.2 property files (TNO MF-Tyre 5.2 writes 6; 21 is also used for 5.2)
MF52_FITTYP = (6, 21)
#: accepted [UNITS] entries (lower case)
SI_UNITS = {"LENGTH": ("meter", "meters", "m"), "FORCE": ("newton", "newtons", "n"),
            "ANGLE": ("radian", "radians", "rad"), "MASS": ("kg", "kilogram"),
            "TIME": ("second", "seconds", "s", "sec")}
#: sections whose entries are not tyre data
HEADER_SECTION = "MDI_HEADER"
UNITS_SECTION = "UNITS"

_HEADER = re.compile(r"^\[\s*([A-Za-z0-9_ ]+?)\s*\]$")
_ASSIGN = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.*)$")
_NUMBER_ROW = re.compile(r"^[-+0-9.eEdD\s]+$")


@dataclass
class TirData:
    """Contents of a ``.tir`` file (module docstring)."""

    #: path of the file read (or the ``source`` name given to :func:`parse_tir`)
    source: str
    #: ``NAME -> value`` of the data sections (floats, or str for quoted values)
    coefficients: dict = field(default_factory=dict)
    #: ``NAME -> section`` of every entry of ``coefficients``
    sections: dict = field(default_factory=dict)
    #: ``[MDI_HEADER]`` entries
    header: dict = field(default_factory=dict)
    #: ``[UNITS]`` entries (lower-cased strings)
    units: dict = field(default_factory=dict)
    #: ``section -> (column names, rows)`` of table sections such as ``[SHAPE]``
    tables: dict = field(default_factory=dict)
    #: flat coefficient array of the MF 5.2 kernels
    array: np.ndarray = field(default_factory=lambda: np.zeros(0))
    #: names read that the MF 5.2 kernels do not use (kept in ``coefficients``)
    unknown: list = field(default_factory=list)
    #: kernel coefficients the file does not give, set to their default (0, or 1 for L*)
    defaulted: list = field(default_factory=list)

    def value(self, name: str):
        """The value read for ``name`` (any case); KeyError if the file does not give it."""
        return self.coefficients[name.upper()]


def _strip_comment(line: str) -> str:
    """The line up to the first ``$`` or ``!`` outside quotes."""
    quote = None
    for i, ch in enumerate(line):
        if quote:
            if ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
        elif ch in "$!":
            return line[:i]
    return line


def _parse_value(text: str):
    """A quoted string (returned without its quotes) or a number; None if neither."""
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1].strip()
    try:
        return float(text.replace("D", "E").replace("d", "e"))
    except ValueError:
        return None


def parse_tir(text: str, source: str = "<string>", check_version: bool = True) -> TirData:
    """Read the ``.tir`` text ``text`` (``source`` names it in error messages)."""
    data = TirData(source=source)
    section = None
    table_section = None
    where = {}
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = _strip_comment(raw).strip()
        if not line:
            continue
        pos = f"{source}:{lineno}"
        m = _HEADER.match(line)
        if m:
            section = m.group(1).strip().upper()
            table_section = None
            continue
        if line.startswith("{"):
            if section is None or not line.endswith("}"):
                raise ModelError(f"{pos}: malformed table header {raw.strip()!r}")
            table_section = section
            data.tables[section] = (line[1:-1].split(), [])
            continue
        m = _ASSIGN.match(line)
        if m:
            if section is None:
                raise ModelError(f"{pos}: {raw.strip()!r} comes before the first [SECTION]")
            name, rest = m.group(1).upper(), m.group(2)
            value = _parse_value(rest)
            if value is None:
                raise ModelError(f"{pos}: cannot read the value {rest.strip()!r} of {name} "
                                 "(a number or a quoted string is expected)")
            if section == HEADER_SECTION:
                data.header[name] = value
                continue
            if section == UNITS_SECTION:
                data.units[name] = str(value).lower()
                continue
            if name in where:
                raise ModelError(f"{pos}: {name} is given twice (first at {where[name]})")
            where[name] = pos
            data.coefficients[name] = value
            data.sections[name] = section
            continue
        if table_section == section and _NUMBER_ROW.match(line):
            try:
                row = [float(x.replace("D", "E").replace("d", "e")) for x in line.split()]
            except ValueError:
                raise ModelError(f"{pos}: malformed table row {raw.strip()!r}") from None
            data.tables[section][1].append(row)
            continue
        raise ModelError(f"{pos}: cannot read {raw.strip()!r} (expected [SECTION], "
                         "NAME = value, a table row or a comment)")
    _check(data, where, check_version)
    known = set(COEFFICIENT_NAMES)
    values = {}
    for name, value in data.coefficients.items():
        if name in known:
            if not isinstance(value, float):
                raise ModelError(f"{where[name]}: {name} must be a number, got {value!r}")
            values[name] = value
        else:
            data.unknown.append(name)
    data.defaulted = [name for name in COEFFICIENT_NAMES if name not in values]
    try:
        data.array = coefficient_array(values)
    except ModelError as exc:
        raise ModelError(f"{source}: {exc}") from None
    return data


def _check(data: TirData, where: dict, check_version: bool) -> None:
    for name, value in data.units.items():
        accepted = SI_UNITS.get(name)
        if accepted is not None and value not in accepted:
            raise ModelError(f"{data.source}: [UNITS] {name} = {value!r}: only SI units are "
                             f"read ({accepted[0]!r}); convert the file")
    fittyp = data.coefficients.get("FITTYP")
    if check_version and fittyp is not None and fittyp not in MF52_FITTYP:
        raise ModelError(f"{where['FITTYP']}: FITTYP = {fittyp:g} is not a Magic Formula 5.2 "
                         "file (6 or 21); the MF 5.2 equations would misread its coefficients "
                         "(pass check_version=False to read it anyway)")
    for name in ("FNOMIN", "UNLOADED_RADIUS"):
        if name not in data.coefficients:
            raise ModelError(f"{data.source}: {name} is missing (needed by the Magic Formula)")
    for name in ("FNOMIN", "UNLOADED_RADIUS", "LFZO"):
        value = data.coefficients.get(name, 1.0)
        if isinstance(value, float) and not value > 0.0:
            raise ModelError(f"{where[name]}: {name} must be positive, got {value:g}")


def read_tir(path, check_version: bool = True) -> TirData:
    """Read the ``.tir`` file at ``path`` (:func:`parse_tir`)."""
    path = Path(path)
    return parse_tir(path.read_text(encoding="utf-8", errors="replace"), source=str(path),
                     check_version=check_version)


#: the directory of the coefficient sets shipped with the workbench
DATA_DIR = Path(__file__).resolve().parent / "data"
#: the coefficient set shipped with the workbench (Pacejka 2006, Table A3.1, 205/60R15;
#: provenance in the file header and docs/magic-formula.md)
EXAMPLE_TIR = DATA_DIR / "mf52_205_60R15.tir"


def shipped_tir_names() -> tuple[str, ...]:
    """Names of the ``.tir`` files shipped in ``workbench/forces/data`` (without ``.tir``)."""
    return tuple(sorted(p.stem for p in DATA_DIR.glob("*.tir")))


def resolve_tir(spec, base=None) -> Path:
    """The ``.tir`` file of ``spec``: the name of a shipped set (:func:`shipped_tir_names`,
    with or without ``.tir``) or a path (relative paths are taken from ``base`` when given,
    e.g. the directory of a model file).  A missing file raises
    :class:`~workbench.errors.ModelError` listing the shipped names."""
    text = str(spec)
    name = text[:-4] if text.endswith(".tir") else text
    if "/" not in text and "\\" not in text and name in shipped_tir_names():
        return DATA_DIR / (name + ".tir")
    path = Path(text).expanduser()
    if not path.is_absolute() and base is not None:
        path = Path(base) / path
    if not path.is_file():
        raise ModelError(f"tir {text!r}: no such file and not a shipped coefficient set "
                         f"(shipped: {', '.join(shipped_tir_names())})")
    return path
