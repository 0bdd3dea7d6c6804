"""The kernels' on-disk cache is stamped with the whole package's sources
(``workbench._numba_cache``): an edit of one file recompiles the cached kernels of other
files that call it.  numba's own stamp (the defining file only) kept such callers and
mixed old and new code after a ``git pull`` into an editable install."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

from numba import njit
from numba.core.caching import FunctionCache

import workbench
from workbench import _numba_cache as NC
from workbench.kernels.linalg import maxabs

CALLEE = textwrap.dedent("""\
    from numba import njit


    @njit(cache=True)
    def value():
        return {v}
    """)
CALLER = textwrap.dedent("""\
    from numba import njit

    from {callee} import value


    @njit(cache=True)
    def probe():
        return value() + 0.0
    """)


def _run(root: Path, module: str) -> float:
    """``probe()`` of ``module`` in a fresh process importing from ``root`` first (the
    process's cache is numba's default beside the sources)."""
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    env["PYTHONPATH"] = str(root)
    code = (f"import workbench, sys; assert workbench.__file__.startswith({str(root)!r}), "
            f"workbench.__file__; from {module} import probe; print(probe())")
    out = subprocess.run([sys.executable, "-c", code], cwd=root, env=env, check=True,
                         capture_output=True, text=True, timeout=300)
    return float(out.stdout.split()[-1])


def test_an_edit_of_a_called_kernel_recompiles_its_cached_callers_in_other_files(tmp_path):
    """A copy of the package with a kernel ``probe`` calling ``value`` from another file:
    run once (both compiled and cached), ``value`` edited, run again in a new process:
    the result is the edited value.  The same pair of files outside the package (numba's
    per-file stamps) returns the stale value: the check can fail."""
    pkg_src = Path(workbench.__file__).parent
    root = tmp_path / "copy"
    shutil.copytree(pkg_src, root / "workbench",
                    ignore=shutil.ignore_patterns("__pycache__", "*.nbi", "*.nbc"))
    kern = root / "workbench" / "kernels"
    (kern / "cache_probe_callee.py").write_text(CALLEE.format(v="1.0"))
    (kern / "cache_probe_caller.py").write_text(
        CALLER.format(callee="workbench.kernels.cache_probe_callee"))
    # the control: the same files in a plain directory (a user's own kernels)
    (root / "plain_callee.py").write_text(CALLEE.format(v="1.0"))
    (root / "plain_caller.py").write_text(CALLER.format(callee="plain_callee"))
    assert _run(root, "workbench.kernels.cache_probe_caller") == 1.0
    assert _run(root, "plain_caller") == 1.0
    (kern / "cache_probe_callee.py").write_text(CALLEE.format(v="2.0"))
    (root / "plain_callee.py").write_text(CALLEE.format(v="2.0"))
    assert _run(root, "workbench.kernels.cache_probe_caller") == 2.0
    # numba's per-file stamp: the caller's file did not change, its stale entry is used
    assert _run(root, "plain_caller") == 1.0


def test_the_package_kernels_carry_the_source_stamp_and_other_kernels_do_not():
    """Every kernel of the package (here ``maxabs``) is located by the package's locators
    and stamped with the sources' fingerprint; a function defined outside the package
    keeps numba's per-file stamp (a hash of its own file)."""
    assert NC.install()          # idempotent: the locators are already in front
    loc = FunctionCache(maxabs.py_func)._impl.locator
    assert isinstance(loc, NC.LOCATORS)
    assert loc.get_source_stamp() == ("workbench-sources", NC.source_fingerprint())

    @njit(cache=True)
    def outside(x):
        return x + 1.0

    loc2 = FunctionCache(outside.py_func)._impl.locator
    assert not isinstance(loc2, NC.LOCATORS)
    assert loc2.get_source_stamp() != loc.get_source_stamp()


def test_the_fingerprint_covers_the_numerical_sources_and_not_the_applications(
        tmp_path, monkeypatch):
    """The fingerprint changes with any source outside ``apps`` and with the files of
    ``apps`` that compile kernels, and not with the other application files or with
    files that are not Python."""
    pkg = tmp_path / "workbench"
    (pkg / "kernels").mkdir(parents=True)
    (pkg / "apps").mkdir()
    files = {"kernels/a.py": "X = 1\n", "apps/report.py": "TEXT = 'a'\n",
             "apps/fast.py": "from numba import njit\n", "apps/page.html": "<p>a</p>\n"}
    for name, text in files.items():
        (pkg / name).write_text(text)
    monkeypatch.setattr(NC, "_PKG", str(pkg))
    monkeypatch.setattr(NC, "_APPS", str(pkg / "apps"))

    def fp():
        NC.source_fingerprint.cache_clear()
        return NC.source_fingerprint()

    try:
        base = fp()
        assert fp() == base
        for name, changes in (("kernels/a.py", True), ("apps/fast.py", True),
                              ("apps/report.py", False), ("apps/page.html", False)):
            (pkg / name).write_text(files[name] + "# edited\n")
            assert (fp() != base) == changes, name
            (pkg / name).write_text(files[name])
            assert fp() == base
    finally:
        NC.source_fingerprint.cache_clear()
