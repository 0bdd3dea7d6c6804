"""The bad-input corpus: each bad model file, command line and study input gives its typed
error naming the element or option (one ``error:`` line from the CLI, no traceback, no
file created), and the good cases keep working.

Model files live in ``tests/corpus/``; the first line of each says what it must give
(``# expect: ok`` or ``# expect: ErrorType: part of the message``).
"""

from __future__ import annotations

import io
import shutil
import time
from pathlib import Path

import pytest

import workbench as wb
from workbench import errors
from workbench.apps.cli import main
from workbench.integrators.simulation import nsteps_of

CORPUS = Path(__file__).resolve().parent / "corpus"
MODEL_FILES = sorted(p for p in CORPUS.glob("*.toml"))


def _expectation(path: Path) -> tuple[str, str]:
    first = path.read_text().splitlines()[0]
    assert first.startswith("# expect: "), f"{path.name}: first line must say what to expect"
    what = first[len("# expect: "):].strip()
    if what == "ok":
        return "ok", ""
    kind, _, text = what.partition(": ")
    return kind, text


@pytest.mark.parametrize("path", MODEL_FILES, ids=lambda p: p.stem)
def test_model_file_corpus(path):
    kind, text = _expectation(path)
    if kind == "ok":
        res = wb.simulate(wb.load_model(path), t_end=0.01, dt=1e-3)
        assert res.steps == 10
        return
    with pytest.raises(getattr(errors, kind)) as info:
        wb.load_model(path).compile()
    assert text in str(info.value)


@pytest.mark.parametrize("path", [p for p in MODEL_FILES if _expectation(p)[0] != "ok"],
                         ids=lambda p: p.stem)
def test_model_file_corpus_from_the_cli(path, tmp_path, capsys):
    """The same files through `workbench simulate`: exit 2, one error line, no output."""
    out = tmp_path / "out"
    assert main(["simulate", str(path), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len([ln for ln in err if ln.startswith("error: ")]) == 1
    assert "Traceback" not in "\n".join(err)
    assert not out.exists()


@pytest.mark.parametrize("argv, message", [
    (["simulate", "slider-crank", "--set", "IS=-1e-4"], "not positive semi-definite"),
    (["simulate", "slider-crank", "--set", "IBC_xx=1e-2"], "triangle inequality"),
    (["simulate", "pendulum", "--t-end", "0.0001"], "shorter than one time step"),
    (["simulate", "pendulum", "--dt", "0"], "--dt must be positive"),
    (["study", "five-bar-design", "--dt", "0"], "--dt must be positive"),
    (["study", "five-bar-design", "--t-end", "0"], "--t-end must be positive"),
    (["study", "five-bar-design", "--starts", "0"], "expected a positive integer"),
    (["study", "five-bar-design", "--starts", "2", "--workers", "0"],
     "expected a positive integer"),
    (["study", "five-bar-design", "--maxiter", "0"], "expected a positive integer"),
    (["bench", "sensitivity", "--repeat", "0"], "expected a positive integer"),
    (["warm", "--jobs", "0"], "expected a positive integer"),
])
def test_bad_command_lines(argv, message, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    try:
        status = main(argv)
    except SystemExit as exc:                          # argparse's own usage error
        status = exc.code
    assert status == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert list(tmp_path.iterdir()) == []              # nothing written


def test_report_of_a_missing_path_creates_nothing(tmp_path, capsys):
    missing = tmp_path / "nowhere" / "cases.db"
    assert main(["report", str(missing)]) == 2
    assert "no such file" in capsys.readouterr().err
    assert not missing.exists() and not missing.parent.exists()


def test_report_of_a_folder_and_of_a_non_sqlite_file(tmp_path, capsys):
    assert main(["report", str(tmp_path)]) == 2
    assert "is a folder" in capsys.readouterr().err
    junk = tmp_path / "cases.db"
    junk.write_text("not a database")
    assert main(["report", str(junk)]) == 2
    assert "not an SQLite database" in capsys.readouterr().err
    assert junk.read_text() == "not a database"        # untouched


def test_end_time_shorter_than_one_step_is_a_typed_error():
    with pytest.raises(errors.OptionError, match="shorter than one time step"):
        nsteps_of(0.0, 1e-4, 1e-3)
    assert nsteps_of(0.0, 1e-3, 1e-3) == 1


def test_internal_errors_end_in_one_error_line(monkeypatch, capsys):
    """A bug (an exception that is not a workbench error) still gives one `error:` line
    and exit status 3, not a traceback."""
    import workbench.apps.cli as cli

    def boom(args):
        raise ZeroDivisionError("division by zero")
    monkeypatch.setattr(cli, "_cmd_models", boom)
    parser = cli.build_parser()
    monkeypatch.setattr(cli, "build_parser", lambda: parser)
    for action in parser._subparsers._group_actions[0].choices.values():
        if action.prog.endswith(" models"):
            action.set_defaults(func=boom)
    assert main(["models"]) == 3
    err = capsys.readouterr().err
    assert err.startswith("error: internal error (ZeroDivisionError)") and "Traceback" not in err


def test_compile_notice_is_printed_once_for_long_compilations(monkeypatch):
    """The notice appears when a compilation lasts longer than NOTICE_DELAY_S (a real
    first compilation takes minutes; this drives numba's own compile event)."""
    from numba.core import event as ev

    from workbench.apps import progress
    monkeypatch.setattr(progress, "NOTICE_DELAY_S", 0.05)
    stream = io.StringIO()
    notice = progress._CompileNotice(stream)
    ev.register("numba:compile", notice)
    try:
        with ev.trigger_event("numba:compile", data={}):
            time.sleep(0.3)
        with ev.trigger_event("numba:compile", data={}):
            time.sleep(0.3)
    finally:
        ev.unregister("numba:compile", notice)
    err = stream.getvalue()
    assert err.count("compiling the numerical kernels") == 1
    assert notice.kernels == 2 and notice.total >= 0.6


def test_a_short_compilation_is_not_announced():
    from numba.core import event as ev

    from workbench.apps import progress
    stream = io.StringIO()
    notice = progress._CompileNotice(stream)
    ev.register("numba:compile", notice)
    try:
        with ev.trigger_event("numba:compile", data={}):
            pass
    finally:
        ev.unregister("numba:compile", notice)
    time.sleep(0.05)
    assert stream.getvalue() == "" and not notice.announced


def test_corpus_files_are_not_modified(tmp_path):
    """Loading never writes next to the model file."""
    before = sorted(p.name for p in CORPUS.iterdir())
    shutil.copy(CORPUS / "good-pendulum.toml", tmp_path / "m.toml")
    wb.load_model(tmp_path / "m.toml").compile()
    assert sorted(p.name for p in CORPUS.iterdir()) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.toml"]
