"""The report site: every report's Markdown rendered as a static HTML site under ``reports/``.

``workbench reproduce``, ``workbench study`` and ``workbench report`` write Markdown
(``README.md``, ``five-bar/report.md``, ``buggy-dlc/report.md``, ``NAME/report.md``, ...);
:func:`build_site` renders each of them, with the ``markdown`` library and the ``jinja2``
template ``templates/page.html``, into an HTML page beside it (``README.md`` ->
``index.html``), and writes the pages that only gather data of others
(``comparisons.md``/``comparisons.html``; the list of reports at the end of ``README.md``).
The Markdown files stay the diff-friendly record; the HTML is their rendering, with a
navigation bar, styled tables (numbers right-aligned), figure captions and, on every page,
the command that regenerates it and the commit, command, machine and date that produced it
(:func:`stamp`, recorded in ``provenance.json`` beside the Markdown).  Figures are relative
links to the PNG files and the stylesheet is inlined: no server and no network are needed.

Pages
-----
``index.html``
    ``README.md``: the simulations of ``workbench reproduce`` and the list of every report.
``five-bar/report.html``, ``buggy-dlc/report.html``, ``buggy-step/report.html``
    The reproduced tables of seed 001 (Tables 1, 3 and 2) beside the published numbers.
``comparisons.html``
    Semi-recursive vs global formulation (CPU time) and the agreement of the gradient
    methods and formulations, gathered from the reproduction reports' ``timings.json`` and
    ``gradients.csv``.
``NAME[/SUB]/report.html``, ``NAME/starts.html``
    Each optimisation study (``cases.db`` + ``report.md``) and multi-start ranking.
"""

from __future__ import annotations

import datetime
import json
import math
import os
import platform
import re
import shlex
import sqlite3
import subprocess
import sys
import xml.etree.ElementTree as etree
from dataclasses import dataclass, field
from pathlib import Path

import jinja2
import markdown
from markdown.extensions import Extension
from markdown.treeprocessors import Treeprocessor
from markupsafe import Markup

from workbench import __version__

#: provenance records of the Markdown files of one folder: ``{file name: record}``
PROVENANCE_FILE = "provenance.json"
#: the generated list of reports at the end of ``README.md`` lies between these lines
LINKS_BEGIN = "<!-- report-site: links (rewritten by every site build; do not edit) -->"
LINKS_END = "<!-- /report-site -->"
#: the reproduction reports: folder -> (published table, what it reproduces)
REPRODUCTIONS = {
    "five-bar": ("seed 001 Table 1", "Five-bar mechanism: gradients of psi1-psi3"),
    "buggy-step": ("seed 001 Table 2", "Buggy vehicle, step descent: gradients of psi"),
    "buggy-dlc": ("seed 001 Table 3", "Buggy vehicle, double lane change: gradients of psi"),
    "penalty": ("seed 003 Tables 1-4", "Penalty formulation: the four Jacobian methods"),
    "rods": ("seed 002 Tables 4-6", "Rods as elements: extrapolated rod inertia, sedan slalom"),
    "rcr": ("seed 004 Fig. 7", "Recursive coordinate reduction: the five-bar (ACS, GCL) and "
                               "the N-four-bar"),
}
#: the model of each reproduction report (its reconstruction label)
REPRODUCTION_MODEL = {"five-bar": "five-bar", "buggy-step": "buggy-step",
                      "buggy-dlc": "buggy-dlc", "penalty": "spatial-four-bar",
                      "rods": "sedan-sine-slalom", "rcr": "rcr-five-bar"}
#: captions of the study figures (``studies.core.write_report``), by file name
STUDY_FIGURES = {
    "history.png": "Objective J at each evaluation of the optimiser (0: the starting "
                   "design; a red x marks a design whose analysis failed; recordings of "
                   "older versions: each recorded driver iteration); with constraints "
                   "(SLSQP), each constraint's margin (value - bound) / |bound| on the "
                   "right (<= 0: satisfied).",
    "histories.png": "Time histories of the measures behind each dynamic response at the "
                     "baseline (dashed) and at the optimum, or the best design so far of an "
                     "unfinished run (solid), re-simulated from the recorded designs.",
}
RECONSTRUCTION_TEXT = {
    "five-bar": "The five-bar model is rebuilt from the benchmark's published description; "
                "the official IFToMM data are not available, so the published column (seed "
                "001 Table 1, for the official model) is shown beside ours, not compared.",
    "buggy": "The buggy vehicle is rebuilt from the benchmark's published description; the "
             "official IFToMM data are not available, so the published column (seed 001 "
             "Tables 2-3, for the official vehicle) is shown beside ours and only the sign "
             "pattern is a plausibility check.",
    "penalty": "The spatial four-bar, the four-bar grids and the coach are rebuilt from "
               "seed 003's descriptions (its figures and data are missing), and its tables "
               "are not available: its qualitative findings are quoted beside our numbers.",
    "rods": "The sedan is rebuilt from seed 002's counts and rod masses (its geometry, "
            "tyre, spring and slalom data are not published), so the seed's Tables 4-6 "
            "are shown beside ours as trend anchors (orders, mass scaling, saving), not "
            "compared value for value.",
    "rcr": "The five-bar is rebuilt from seed 004's text (its Figs. 6-8 are missing: joint "
           "placement, mounting and the fictitious joint of the GCL run are ours) and the "
           "seed publishes no numbers: both runs are compared with Matrix-R on the same "
           "model.",
}
#: a table cell that holds a number (with an optional bound sign, exponent or percent sign)
_NUMBER = re.compile(r"^[<>]?\s*[-+\u2212]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?\s*%?$"
                     r"|^(nan|inf|-inf)$")
_TEMPLATES = jinja2.Environment(
    loader=jinja2.PackageLoader("workbench.apps", "templates"),
    autoescape=jinja2.select_autoescape(["html"]), keep_trailing_newline=True,
    undefined=jinja2.StrictUndefined)


# ----------------------------------------------------------------------------------------
# provenance
# ----------------------------------------------------------------------------------------


def command_line(argv=None) -> str:
    """``workbench ARGS...`` of a CLI run (``argv`` without the program; default
    ``sys.argv[1:]``), quoted for a shell."""
    argv = list(sys.argv[1:] if argv is None else argv)
    return "workbench" + ("" if not argv else " " + shlex.join(str(a) for a in argv))


def _git(*args) -> str | None:
    repo = Path(__file__).resolve().parents[2]
    if not (repo / ".git").exists():
        return None
    try:
        res = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True,
                             timeout=20, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return res.stdout if res.returncode == 0 else None


def commit() -> tuple[str, str]:
    """``(commit, note)``: the checkout's ``git rev-parse HEAD`` (``"unknown"`` outside a
    git checkout) and a note when the code (``workbench/``, ``components/``, ``studies/``,
    ``pyproject.toml``) differs from it."""
    head = (_git("rev-parse", "HEAD") or "").strip()
    if not head:
        return "unknown", "not a git checkout"
    dirty = _git("status", "--porcelain", "--", "workbench", "components", "studies",
                 "pyproject.toml")
    return head, ("with uncommitted changes to the code" if dirty else "")


def cpu_name(fallback: str = "") -> str:
    """The processor's model name (``/proc/cpuinfo``), else ``platform.processor()``, else
    ``fallback``."""
    cpu = platform.processor() or fallback
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return cpu


def machine() -> str:
    """Operating system, processor and Python of this machine (no host name)."""
    cpu = cpu_name(platform.machine())
    return (f"{platform.system()} {platform.release()} ({platform.machine()}), {cpu}, "
            f"{os.cpu_count()} logical CPUs, Python {platform.python_version()}, "
            f"workbench {__version__}")


def provenance(command: str) -> dict:
    """The record of one run: command, commit (and its note), machine, date (UTC)."""
    head, note = commit()
    return {"command": command, "commit": head, "commit_note": note, "machine": machine(),
            "date": datetime.datetime.now(datetime.timezone.utc).strftime(
                "%Y-%m-%d %H:%M UTC")}


def stamp(md_file, command: str, record: dict | None = None) -> dict:
    """Record that ``command`` (a :func:`command_line`) produced the Markdown file
    ``md_file``, in ``provenance.json`` beside it; returns the record."""
    md_file = Path(md_file)
    rec = dict(record or provenance(command))
    path = md_file.parent / PROVENANCE_FILE
    data = _read_json(path)
    data[md_file.name] = rec
    md_file.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    return rec


def recorded(md_file) -> dict | None:
    """The provenance record of ``md_file`` (None when none was recorded)."""
    md_file = Path(md_file)
    return _read_json(md_file.parent / PROVENANCE_FILE).get(md_file.name)


def _read_json(path) -> dict:
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


# ----------------------------------------------------------------------------------------
# Markdown -> HTML
# ----------------------------------------------------------------------------------------


def _text(el) -> str:
    return "".join(el.itertext()).strip()


class _SiteTreeprocessor(Treeprocessor):
    """Tables: class ``data``, numeric cells right-aligned (class ``num``), wrapped for
    horizontal scrolling; a paragraph holding only an image becomes a ``figure`` whose
    caption is the following "Figure: ..." paragraph (else the image's title or alt text or
    a known caption), numbered; relative links to ``X.md`` point at ``X.html``
    (``README.md`` at ``index.html``)."""

    def run(self, root):
        parents = {c: p for p in root.iter() for c in p}
        for table in list(root.iter("table")):
            self._table(table, parents)
        self._figures(root)
        for a in root.iter("a"):
            a.set("href", html_href(a.get("href", "")))
        return None

    @staticmethod
    def _table(table, parents):
        table.set("class", "data")
        rows = [list(tr) for tr in table.iter("tr")]
        body = [r for r in rows if r and r[0].tag == "td"]
        ncol = max((len(r) for r in rows), default=0)
        for j in range(ncol):
            cells = [r[j] for r in body if j < len(r)]
            filled = [c for c in cells if _text(c) not in ("", "-")]
            numeric = bool(filled) and all(_NUMBER.match(_text(c)) for c in filled)
            for c in cells:
                if _NUMBER.match(_text(c)):
                    c.set("class", "num")
                elif _text(c) in ("NO", "False"):
                    c.set("class", "flag-no")
            if numeric:
                for r in rows:
                    if r and r[0].tag == "th" and j < len(r):
                        r[j].set("class", "num")
        parent = parents.get(table)
        if parent is not None and parent.get("class") != "table-wrap":
            idx = list(parent).index(table)
            wrap = etree.Element("div", {"class": "table-wrap"})
            parent.remove(table)
            wrap.append(table)
            wrap.tail, table.tail = table.tail, None
            parent.insert(idx, wrap)

    def _figures(self, root):
        number = 0
        for parent in list(root.iter()):
            children = list(parent)
            for i, p in enumerate(children):
                if p.tag != "p" or len(p) != 1 or p[0].tag != "img" or (p.text or "").strip() \
                        or (p[0].tail or "").strip():
                    continue
                img = p[0]
                number += 1
                caption = img.get("title") or ""
                nxt = children[i + 1] if i + 1 < len(children) else None
                if not caption and nxt is not None and nxt.tag == "p" and \
                        re.match(r"^\s*Figure\b", nxt.text or ""):
                    caption = re.sub(r"^\s*Figure\s*[^:]*:\s*", "", _text(nxt))
                    parent.remove(nxt)
                    children[i + 1] = etree.Element("p")       # keep the indices
                if not caption:
                    name = (img.get("src") or "").rsplit("/", 1)[-1]
                    alt = img.get("alt") or ""
                    known = STUDY_FIGURES.get(name)
                    caption = f"{alt[:1].upper()}{alt[1:]}: {known}" if known and alt else \
                        (known or alt or name)
                p.tag = "figure"
                p.attrib.clear()
                img.tail = None
                cap = etree.SubElement(p, "figcaption")
                bold = etree.SubElement(cap, "b")
                bold.text = f"Figure {number}."
                bold.tail = " " + caption
                if not img.get("alt"):
                    img.set("alt", caption)


class _SiteExtension(Extension):
    def extendMarkdown(self, md):                                  # noqa: N802 (API name)
        md.treeprocessors.register(_SiteTreeprocessor(md), "workbench_site", 0)


def html_href(href: str) -> str:
    """``X.md`` -> ``X.html`` and ``README.md`` -> ``index.html`` for relative links
    (anchors kept); other links unchanged."""
    if not href or re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", href) or href.startswith("#"):
        return href
    path, sep, frag = href.partition("#")
    if path.endswith("README.md"):
        path = path[: -len("README.md")] + "index.html"
    elif path.endswith(".md"):
        path = path[:-3] + ".html"
    return path + sep + frag


def render_markdown(text: str) -> str:
    """HTML of a report's Markdown (tables, fenced code, figures with captions)."""
    md = markdown.Markdown(extensions=["tables", "fenced_code", "sane_lists", _SiteExtension()],
                           output_format="html")
    return md.convert(text)


# ----------------------------------------------------------------------------------------
# the pages
# ----------------------------------------------------------------------------------------


@dataclass
class Page:
    """One page of the site: its Markdown source and HTML file, where it goes in the
    navigation, the command that regenerates it and its reconstruction label."""

    md: Path
    html: Path
    title: str
    group: str
    label: str
    regenerate: str
    regenerate_note: str = ""
    reconstruction: str = ""
    notes: list = field(default_factory=list)
    #: the default provenance (pages written before provenance was recorded)
    default_command: str = "unknown (not recorded)"


def _title(md_file: Path, default: str) -> str:
    try:
        for line in md_file.read_text().splitlines():
            if line.startswith("# "):
                return re.sub(r"[`*]", "", line[2:]).strip()
    except OSError:
        pass
    return default


def _study_record(db: Path) -> dict | None:
    try:
        with sqlite3.connect(Path(db).resolve().as_uri() + "?mode=ro", uri=True) as con:
            row = con.execute("SELECT json FROM workbench_study").fetchone()
    except sqlite3.Error:
        return None
    try:
        return json.loads(row[0]) if row else None
    except ValueError:
        return None


def _describe(model: str) -> dict:
    from workbench.model import catalog
    try:
        return catalog.describe(model)
    except Exception:                                 # noqa: BLE001 (a file model, renamed)
        return {}


def _units(model: str, names) -> dict:
    from workbench.model import catalog
    try:
        params = catalog.load(model).parameters
    except Exception:                                 # noqa: BLE001
        return {}
    return {n: params[n].unit for n in names if n in params}


def _cli_path(root: Path, path: Path) -> str:
    """``path`` as the CLI would be given it from the folder holding the site ``root``."""
    return (Path(root.name) / path.relative_to(root)).as_posix()


def _out_flag(root: Path) -> str:
    return "" if root.name == "reports" else f" --out {shlex.quote(root.name)}"


def discover(root) -> list[Page]:
    """The pages of the site under ``root``: index, reproductions, comparisons, studies,
    multi-start rankings, then any other ``report.md`` (in that order)."""
    root = Path(root)
    pages = [Page(root / "README.md", root / "index.html", "Reports", "Home", "Home",
                  f"workbench reproduce{_out_flag(root)}",
                  "the simulation table; the list of reports is rewritten by every site "
                  "build", default_command="workbench reproduce")]
    for name, (table, what) in REPRODUCTIONS.items():
        md = root / name / "report.md"
        if md.is_file():
            kind = name if name in ("five-bar", "penalty", "rods", "rcr") else "buggy"
            pages.append(Page(md, md.with_suffix(".html"), _title(md, what), "Reproductions",
                              f"{name} ({table[9:]})",
                              f"workbench reproduce {name}{_out_flag(root)}",
                              "recomputes the gradients, timings and figures",
                              RECONSTRUCTION_TEXT[kind],
                              default_command=f"workbench reproduce {name}"))
    if any((root / n / "gradients.csv").is_file() for n in REPRODUCTIONS):
        pages.append(Page(root / "comparisons.md", root / "comparisons.html",
                          "Comparisons: formulations and gradient methods", "Comparisons",
                          "SR vs global, methods",
                          f"workbench reproduce{_out_flag(root)}",
                          "rebuilt from the reproduction reports' timings.json and "
                          "gradients.csv by every site build",
                          "Built from the reproduction reports of reconstructed benchmark "
                          "models (five-bar, buggy).",
                          default_command="workbench reproduce"))
    claimed = {p.md for p in pages}
    for db in sorted(root.rglob("cases.db"), key=lambda d: d.parent.relative_to(root).parts):
        md = db.parent / "report.md"
        S = _study_record(db)
        if S is None or not md.is_file() or md in claimed:
            continue
        rel = db.parent.relative_to(root).as_posix()
        models = sorted({S.get("model", "")} | {c.get("model", "") for c in
                                                 S.get("cases") or []} - {""})
        recon = [m for m in models if str(_describe(m).get("reconstruction")) == "True"]
        notes = []
        units = _units(S.get("model", ""), S.get("design_initial", {}))
        if units:
            notes.append("Parameter units (design table, bounds and gradients are per these "
                         "units): " + ", ".join(f"{n} [{u}]" for n, u in units.items()) + ".")
        notes.append(f"Recording: {db.name} (OpenMDAO SqliteRecorder; every driver "
                     "iteration), from which the regenerate command rebuilds report.md, "
                     "the figures and this page.")
        parts = rel.split("/")
        study_cmd = f"workbench study {S.get('study', parts[0])} --optimizer " \
                    f"{S.get('optimizer', 'SLSQP')}" + _out_flag(root)
        if len(parts) == 2 and not parts[1].startswith("start-"):
            study_cmd += f" --subdir {shlex.quote(parts[1])}"
        pages.append(Page(md, md.with_suffix(".html"), _title(md, rel), "Studies", rel,
                          f"workbench report {shlex.quote(_cli_path(root, db))}",
                          f"rebuilds the tables and figures from the recording; the "
                          f"optimisation itself: {study_cmd}",
                          ("Shipped benchmark models of this study are reconstructions: "
                           + ", ".join(recon) + ".") if recon else "",
                          notes, default_command=study_cmd))
        claimed.add(md)
    for md in sorted(root.rglob("starts.md")):
        rel = md.parent.relative_to(root).as_posix()
        starts = sorted(p for p in md.parent.glob("start-*/report.md"))
        links = [Markup('<a href="{}">{}</a>').format(
            html_href(s.relative_to(md.parent).as_posix()), s.parent.name) for s in starts]
        notes = [Markup("Reports of the starts: ") + Markup(", ").join(links)] if links else []
        n = len(_read_json_list(md.parent / "starts.json")) or "K"
        opt = re.search(r"\((SLSQP|L-BFGS-B)\), ranked", _title(md, ""))
        cmd = (f"workbench study {rel.split('/')[0]} --starts {n}"
               + (f" --optimizer {opt.group(1)}" if opt else "") + _out_flag(root))
        pages.append(Page(md, md.with_suffix(".html"), _title(md, rel), "Studies",
                          f"{rel} (starts)", cmd,
                          "reruns every start (the ranking is not stored elsewhere)",
                          "", notes, default_command=cmd))
        claimed.add(md)
    for md in sorted(root.rglob("report.md")):
        if md not in claimed and "simulate" not in md.relative_to(root).parts:
            rel = md.parent.relative_to(root).as_posix()
            pages.append(Page(md, md.with_suffix(".html"), _title(md, rel), "Other", rel,
                              "see the page", ""))
    return pages


def _read_json_list(path) -> list:
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return []
    return data if isinstance(data, list) else []


# ----------------------------------------------------------------------------------------
# generated Markdown: comparisons.md and the list of reports in README.md
# ----------------------------------------------------------------------------------------


def _md_table(rows, headers) -> list[str]:
    out = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    out += ["| " + " | ".join(str(c).replace("|", "\\|") for c in r) + " |" for r in rows]
    return out


def _fmt(v, spec) -> str:
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "-"
    return format(v, spec)


#: columns of gradients.csv compared with ``direct_sr`` in comparisons.md
METHODS = (("adjoint_sr", "discrete adjoint"), ("direct_sr_cont", "continuous direct"),
           ("adjoint_sr_cont", "continuous adjoint"), ("direct_global", "global, direct"),
           ("adjoint_global", "global, adjoint"), ("fd", "central differences"))


def comparisons_markdown(root) -> str | None:
    """``comparisons.md``: the semi-recursive vs global CPU times and the agreement of the
    gradient methods and formulations of every reproduction report under ``root`` (None
    when there is none)."""
    import pandas as pd
    root = Path(root)
    reports = [n for n in REPRODUCTIONS if (root / n / "gradients.csv").is_file()]
    if not reports:
        return None
    from workbench.apps.reports import OPTIMISATION_NOTE
    lines = ["# Comparisons: formulations and gradient methods", "",
             "Gathered from the data of the reproduction reports ("
             + ", ".join(f"[{n}]({n}/report.md)" for n in reports)
             + "): their `timings.json` and `gradients.csv`, measured in the run that wrote "
               "each report.  The benchmark models are reconstructions (see each report).", "",
             "## CPU time: semi-recursive vs global formulation (seed 001 Figs 4-5)", "",
             "Wall time after numba compilation, one thread; saving = 1 - t_semi-recursive / "
             "t_global.  Seed 001 (Figs 4-5, buggy, Fortran) reports that the semi-recursive "
             "formulation saves 48.2 % (direct) and 50.2 % (adjoint) on the step descent, "
             "48-50 % on the double lane change.", "", OPTIMISATION_NOTE, ""]
    rows = []
    for n in reports:
        tm = _read_json(root / n / "timings.json")
        if not tm:
            continue
        pairs = (("simulation", "simulation_s", "simulation_global_s", None),
                 ("direct sensitivity", "direct_s", "direct_global_s", None),
                 ("adjoint sensitivity", "adjoint_s", "adjoint_global_s", None),
                 ("simulation + direct", "simulation_s", "simulation_global_s", "direct"),
                 ("simulation + adjoint", "simulation_s", "simulation_global_s", "adjoint"))
        for task, a, b, extra in pairs:
            if a not in tm or b not in tm:
                continue
            sr, gl = tm[a], tm[b]
            if extra:
                sr, gl = sr + tm[f"{extra}_s"], gl + tm[f"{extra}_global_s"]
            saving = 100.0 * (1.0 - sr / gl) if gl > 0 else float("nan")
            rows.append((f"[{n}]({n}/report.md)", tm.get("formulation", "?"), task,
                         _fmt(sr, ".3f"), _fmt(gl, ".3f"), _fmt(saving, ".1f")))
    lines += _md_table(rows, ["report", "semi-recursive formulation", "task",
                              "semi-recursive [s]", "global [s]", "saving [%]"])
    for n in reports:
        fig = "fig4_cpu_sr_vs_global.png" if n == "five-bar" else "cpu_sr_vs_global.png"
        if (root / n / fig).is_file():
            lines += ["", f"![CPU time of {n}: semi-recursive vs global]({n}/{fig})", "",
                      f"Figure: {n}, CPU (wall) time of objective plus gradient, "
                      "semi-recursive vs global Matrix-R formulation."]
    lines += ["", "## Gradients: formulations and methods", "",
              "Relative difference from the discrete direct gradient of the semi-recursive "
              "formulation (`direct_sr`), per objective: max over the parameters of "
              "|g - direct_sr| / max |direct_sr|.  Discrete direct, discrete adjoint and the "
              "global formulation solve the same discrete equations (round-off and Newton "
              "tolerance only); the continuous adjoint differs by O(h^2); central "
              "differences by their truncation and the Newton tolerance.  gradients.csv "
              "holds 10 significant digits, so differences below 1e-10 are shown as "
              "< 1e-10 (each report states the agreement at full precision).", ""]
    rows = []
    for n in reports:
        df = pd.read_csv(root / n / "gradients.csv")
        for o, grp in df.groupby("objective", sort=False):
            ref = grp["direct_sr"].to_numpy(float)
            scale = float(abs(ref).max()) or 1.0
            cells = []
            for col, _ in METHODS:
                if col not in grp:
                    cells.append("-")
                    continue
                d = float(abs(grp[col].to_numpy(float) - ref).max()) / scale
                cells.append("< 1e-10" if d < 1e-10 else _fmt(d, ".1e"))
            rows.append((f"[{n}]({n}/report.md)", o, *cells))
    lines += _md_table(rows, ["report", "objective"] + [f"{lab} (`{c}`)" for c, lab in METHODS])
    return "\n".join(lines) + "\n"


def links_markdown(root, pages) -> str:
    """The list of reports written at the end of ``README.md`` (between
    :data:`LINKS_BEGIN` and :data:`LINKS_END`)."""
    root = Path(root)

    def rel(p: Path) -> str:
        return p.relative_to(root).as_posix()

    out = [LINKS_BEGIN, "", "## Reports", "",
           "Every report as Markdown (the links below) and as a page of the site "
           "`index.html` (open it in a browser: static files, no server or network).  Each "
           "page names the command that regenerates it.", ""]
    rep = [p for p in pages if p.group == "Reproductions"]
    out += ["### Reproduced benchmark tables", ""]
    if rep:
        out += _md_table([(f"[{p.title}]({rel(p.md)})", REPRODUCTIONS[p.md.parent.name][0],
                           "yes", f"`{p.regenerate}`") for p in rep],
                         ["report", "published table beside ours", "reconstruction?",
                          "regenerate"])
    else:
        out.append("None yet: `workbench reproduce` writes them.")
    comp = [p for p in pages if p.group == "Comparisons"]
    out += ["", "### Comparisons", ""]
    out += [f"* [{p.title}]({rel(p.md)}): semi-recursive vs global CPU time, agreement "
            "of the gradient methods and formulations" for p in comp] or \
        ["None yet: written with the reproduction reports."]
    studies = [p for p in pages if p.group == "Studies"]
    out += ["", "### Optimisation studies", ""]
    if studies:
        rows = []
        for p in studies:
            S = _study_record(p.md.parent / "cases.db") if p.md.name == "report.md" else None
            if S:
                rows.append((f"[{p.label}]({rel(p.md)})", S.get("optimizer", ""),
                             {True: "yes", False: "no"}.get(S.get("success"), "unfinished"),
                             S.get("iterations") if S.get("iterations") is not None else "",
                             f"{_fmt(S.get('objective_initial'), '.6g')} -> "
                             f"{_fmt(S.get('objective_final'), '.6g')}", f"`{p.regenerate}`"))
            else:
                rows.append((f"[{p.label}]({rel(p.md)})", "", "", "", "multi-start ranking",
                             f"`{p.regenerate}`"))
        out += _md_table(rows, ["study", "optimizer", "success", "iterations",
                                "objective J (initial -> final)", "regenerate"])
    else:
        out.append("None yet: `workbench study NAME` writes them.")
    other = [p for p in pages if p.group == "Other"]
    if other:
        out += ["", "### Other reports", ""] + [f"* [{p.title}]({rel(p.md)})" for p in other]
    return "\n".join(out + ["", LINKS_END]) + "\n"


def _update_readme(root: Path, links: str) -> None:
    path = root / "README.md"
    text = path.read_text() if path.is_file() else (
        "# Reports\n\nThe simulations of the shipped models are listed here once "
        "`workbench reproduce` has run.\n")
    start = text.find(LINKS_BEGIN)
    if start >= 0:
        end = text.find(LINKS_END, start)
        tail = text[end + len(LINKS_END):].lstrip("\n") if end >= 0 else ""
        text = text[:start].rstrip("\n") + "\n\n" + links + tail
    else:
        text = text.rstrip("\n") + "\n\n" + links
    path.write_text(text)


# ----------------------------------------------------------------------------------------
# the site
# ----------------------------------------------------------------------------------------


def _href(frm: Path, to: Path) -> str:
    return Path(os.path.relpath(to, frm.parent)).as_posix()


def build_site(root="reports", command: str | None = None) -> list[Path]:
    """Write ``comparisons.md``, the list of reports in ``README.md`` and the HTML page of
    every Markdown report under ``root``; returns the HTML files written (index first).

    ``command`` (default: the equivalent ``python -m workbench.apps.site ROOT``) is
    recorded as the producer of the pages this function writes itself (``comparisons.md``)
    and named in every page's footer."""
    root = Path(root)
    if (root / "pyproject.toml").exists():
        raise ValueError(f"{root}: a project folder, not a report folder (its README.md "
                         "would be rewritten)")
    root.mkdir(parents=True, exist_ok=True)
    command = command or f"python -m workbench.apps.site {shlex.quote(str(root))}"
    build = provenance(command)
    comp = comparisons_markdown(root)
    comp_md = root / "comparisons.md"
    if comp is not None and (not comp_md.is_file() or comp_md.read_text() != comp
                             or recorded(comp_md) is None):
        comp_md.write_text(comp)                      # restamped only when the data changed
        stamp(comp_md, command, build)
    pages = discover(root)
    _update_readme(root, links_markdown(root, pages))
    css = (Path(__file__).parent / "templates" / "site.css").read_text()
    template = _TEMPLATES.get_template("page.html")
    groups: dict = {}
    for p in pages[1:]:
        groups.setdefault(p.group, []).append(p)
    written = []
    for page in pages:
        nav = [(g, [{"href": _href(page.html, q.html), "label": q.label, "title": q.title,
                     "current": q is page} for q in members])
               for g, members in groups.items()]
        prov = recorded(page.md) or _unrecorded(page)
        body = render_markdown(page.md.read_text())
        html = template.render(
            title=page.title, css=Markup(css), nav=nav, home_href=_href(page.html, pages[0].html),
            current=_href(page.html, page.html), body=Markup(body), version=__version__,
            prov=prov, build=build,
            page={"regenerate": page.regenerate, "regenerate_note": page.regenerate_note,
                  "reconstruction": page.reconstruction, "notes": page.notes,
                  "md_href": page.md.name, "md_name": page.md.name})
        page.html.write_text(html)
        written.append(page.html)
    return written


def publish(root, argv=None, produced=()) -> list[Path]:
    """What the CLI calls after a command that wrote reports: record the command (its
    ``argv``, see :func:`command_line`) as the producer of each Markdown file in
    ``produced`` that exists (:func:`stamp`), then :func:`build_site` ``root``; returns the
    HTML files written (index first)."""
    command = command_line(argv)
    record = provenance(command)
    for md in produced:
        if Path(md).is_file():
            stamp(md, command, record)
    return build_site(root, command)


def _unrecorded(page: Page) -> dict:
    """The provenance of a report written before provenance was recorded: its usual
    command, and the commit that last changed it when it is committed."""
    rec = {"command": page.default_command, "commit": "unknown",
           "commit_note": "made before the site recorded provenance", "machine": "unknown",
           "date": "unknown"}
    log = (_git("log", "-1", "--format=%H %cd", "--date=format:%Y-%m-%d", "--",
                str(page.md.resolve())) or "").split()
    if len(log) == 2:
        rec.update(commit=log[0], date=f"{log[1]} (committed)", commit_note=(
            "the commit that last changed this report; the run that made it was not "
            "recorded"))
    return rec


def site_root(path) -> Path:
    """The site folder of a study recording ``path`` (``cases.db`` or its folder): the
    nearest ancestor holding a site (``index.html``, or a ``README.md`` with the list of
    reports or written by ``workbench reproduce``), else the folder above the study's
    (``DIR`` of ``DIR/NAME/cases.db``, ``DIR/NAME/SUB/cases.db`` and
    ``DIR/NAME/start-k/cases.db``)."""
    path = Path(path).resolve()
    folder = path.parent if path.suffix == ".db" else path
    for anc in folder.parents:
        if (anc / "pyproject.toml").exists():
            break
        readme = anc / "README.md"
        if (anc / "index.html").is_file() or (readme.is_file() and (
                LINKS_BEGIN in readme.read_text() or
                readme.read_text().startswith("# workbench reproduce"))):
            return anc
    anc = folder.parent
    while (anc / "cases.db").is_file() or (anc / "starts.md").is_file():
        anc = anc.parent
    return anc


def main(argv=None) -> int:
    """``python -m workbench.apps.site [ROOT]``: rebuild the site under ROOT (default
    ``reports``) from the Markdown and data already there."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if len(argv) > 1 or (argv and argv[0].startswith("-")):
        print("usage: python -m workbench.apps.site [ROOT]", file=sys.stderr)
        return 2
    root = argv[0] if argv else "reports"
    pages = build_site(root)
    print(f"wrote the report site {pages[0]} ({len(pages)} pages)")
    return 0


__all__ = ["build_site", "publish", "stamp", "recorded", "provenance", "command_line",
           "render_markdown", "discover", "comparisons_markdown", "site_root", "Page",
           "html_href", "main"]


if __name__ == "__main__":
    sys.exit(main())
