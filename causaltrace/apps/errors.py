"""How the command-line apps report a failure: one line for a user's mistake, a traceback only
when asked.

A user error (a bad override or option, an unknown episode or dataset, a damaged file, a
dataset of another config: :class:`~causaltrace.errors.CausalTraceError`, or Hydra's and
OmegaConf's own) prints ``<prog>: error: <message>`` on stderr and exits with status 2; a run
that could not be completed (:class:`~causaltrace.errors.RunFailure`: an unreachable model
server, a lost session) prints the same line and exits with status 1. ``--debug`` on the
command line, or ``HYDRA_FULL_ERROR=1`` in the environment, shows the full traceback instead.
Anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

import yaml
from hydra.core.hydra_config import HydraConfig
from hydra.errors import HydraException
from hydra.types import RunMode
from omegaconf.errors import MissingMandatoryValue, OmegaConfBaseException

from causaltrace.errors import CausalTraceError, RunFailure

DEBUG_FLAG = "--debug"
USER_ERROR = 2
_debug = False  # set by run_hydra_app for the task function (same process)


def user_errors() -> tuple[type[BaseException], ...]:
    """Exception types that mean the user (config, options, data, environment) is at fault."""
    return (CausalTraceError, RunFailure, HydraException, OmegaConfBaseException, yaml.YAMLError)


def one_line(exc: BaseException) -> str:
    """The error as one line of text."""
    if isinstance(exc, MissingMandatoryValue):
        key = getattr(exc, "full_key", None) or "a value"
        return f"{key} is required and not set: add {key}=... to the command line"
    if isinstance(exc, yaml.YAMLError):  # a config file the user wrote: where, and what
        return "malformed YAML: " + " ".join(line.strip() for line in str(exc).splitlines())
    options = getattr(exc, "options", None)
    text = str(exc).strip() or type(exc).__name__
    key = getattr(exc, "full_key", None)
    if isinstance(exc, OmegaConfBaseException) and key and not text.startswith(str(key)):
        text = f"{key}: {text}"  # OmegaConf puts the key on a detail line dropped below
    cause = exc.__cause__
    if isinstance(exc, HydraException) and isinstance(cause, OmegaConfBaseException):
        text = f"{text}: {one_line(cause)}"  # "Error merging override x=y": say why
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if options and lines:  # hydra's MissingConfigException lists the options one per line
        first = lines[0]
        return f"{first}; available: {', '.join(map(str, options))}"
    # Drop OmegaConf's trailing "full_key: ... / object_type=..." detail lines.
    lines = [line for line in lines if not line.startswith(("full_key:", "object_type="))]
    return " ".join(lines)


def is_user_error(exc: BaseException) -> bool:
    """A user's mistake (see :func:`user_errors`), or a file error that names the file (a path
    the user gave that does not exist or cannot be written)."""
    if isinstance(exc, user_errors()):  # first: hydra's MissingConfigException is an OSError
        return True
    return isinstance(exc, OSError) and bool(exc.filename)


def report(prog: str, exc: BaseException) -> int:
    if isinstance(exc, OSError) and not isinstance(exc, user_errors()):
        text = f"{exc.filename}: {exc.strerror or exc}"
    else:
        text = one_line(exc)
    print(f"{prog}: error: {text}", file=sys.stderr)
    return 1 if isinstance(exc, RunFailure) else USER_ERROR


def debug_requested(argv: Sequence[str]) -> bool:
    return DEBUG_FLAG in argv or os.environ.get("HYDRA_FULL_ERROR", "") not in ("", "0")


def run_task(prog: str, task: Callable[[Any], Any], cfg: Any) -> Any:
    """Call a Hydra task function; a user error ends the process with one line.

    Hydra reports a failed job with a line of its own (``Error executing job with overrides``)
    and the traceback; in a single run, the error is reported here and the process exits
    before that. In a multirun the job's error is raised, so that the launcher sees which job
    failed (:func:`run_hydra_app` still reports it in one line)."""
    try:
        return task(cfg)
    except Exception as exc:
        if not is_user_error(exc):
            raise
        try:
            multirun = HydraConfig.get().mode == RunMode.MULTIRUN
        except ValueError:  # not inside a Hydra app
            multirun = False
        if _debug or multirun:
            raise
        raise SystemExit(report(prog, exc)) from None


def run_hydra_app(prog: str, hydra_main: Callable[[], object]) -> int:
    """Run a ``@hydra.main`` function with one-line user errors (see the module docstring)."""
    global _debug
    debug = _debug = debug_requested(sys.argv[1:])
    sys.argv = [a for a in sys.argv if a != DEBUG_FLAG]  # hydra's own parser does not know it
    previous = os.environ.get("HYDRA_FULL_ERROR")
    os.environ["HYDRA_FULL_ERROR"] = "1"  # hydra re-raises the original exception to here
    try:
        hydra_main()
    except Exception as exc:
        if debug or not is_user_error(exc):
            raise
        return report(prog, exc)
    finally:
        if previous is None:
            os.environ.pop("HYDRA_FULL_ERROR", None)
        else:
            os.environ["HYDRA_FULL_ERROR"] = previous
    return 0


def run_cli(prog: str, main: Callable[[list[str]], int], argv: Sequence[str] | None) -> int:
    """Run an argparse ``main(argv)`` with one-line user errors (see the module docstring)."""
    args = list(sys.argv[1:] if argv is None else argv)
    debug = debug_requested(args)
    args = [a for a in args if a != DEBUG_FLAG]
    try:
        return main(args)
    except Exception as exc:
        if debug or not is_user_error(exc):
            raise  # a bug: keep the traceback
        return report(prog, exc)
