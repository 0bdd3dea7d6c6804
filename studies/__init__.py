"""Optimisation studies built on the workbench: a builder per study (``STUDIES``), run by
:func:`run_study` through OpenMDAO's ``ScipyOptimizeDriver`` with exact gradients."""

from .builtin import STUDIES, buggy_suspension, five_bar_design
from .core import OPTIMIZERS, Case, StudySpec, build_problem, report_from_db, run_study

__all__ = ["STUDIES", "five_bar_design", "buggy_suspension", "Case", "StudySpec", "build_problem",
           "run_study", "report_from_db", "OPTIMIZERS"]
