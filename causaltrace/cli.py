"""``causaltrace`` command line: quick looks at a domain without writing a dataset.

``causaltrace simulate --domain example`` draws one hidden cause, simulates the factual and
counterfactual worlds with shared noise, and prints what the cause did to each observed node.
``causaltrace export-structure --domain example --out DIR`` writes sampled worlds (observational,
and under regimes: ``--do``, ``--shift``, ``--scale`` ``node=value[@slice]``, ``--regime`` for
several nodes) and the true graph for structure-learning libraries.
``causaltrace export-discovery --domain services --out DIR`` writes i.i.d. samples of one unit
with the true CPDAG / MAG / PAG, as a BIF network, DCDI arrays and a perturbation table.
``causaltrace serve --port 8000`` serves episode sessions over HTTP (docs/serving.md).
A user error (unknown domain or node, a malformed option) is one line on stderr and exit status 2
(``--debug`` shows the traceback).
Dataset generation and evaluation have their own Hydra apps (``causaltrace-generate``,
``causaltrace-eval``).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

import numpy as np
import yaml

from causaltrace.apps.errors import run_cli
from causaltrace.episodes.domain import available_domains, load_domain
from causaltrace.errors import CausalTraceError
from causaltrace.serve.host import HostConfig
from causaltrace.structure.discovery_export import export_discovery
from causaltrace.structure.export import export_structure
from causaltrace.tools import ToolConfig


def simulate_summary(domain_name: str, seed: int, cause: str | None = None) -> str:
    """Text summary of one simulated intervention in ``domain_name``."""
    domain = load_domain(domain_name)
    scm = domain.scm
    rng = np.random.default_rng(np.random.SeedSequence(seed))
    names = list(scm.intervention_points)
    cause = cause or names[int(rng.integers(len(names)))]
    draw = scm.point(cause).sample(rng, scm.panel)
    worlds = scm.simulate(
        scm.interventions_for(draw), seed=np.random.SeedSequence(seed, spawn_key=(1,))
    )
    panel = scm.panel
    mask = draw.slice.mask(panel)
    lines = [
        f"domain {domain_name!r}: {scm}",
        f"panel: {panel.n_cells} cells x {panel.n_time} steps "
        f"({', '.join(f'{d.name}[{len(d.levels)}]' for d in panel.dimensions)}), "
        f"time {panel.time.values[0]} .. {panel.time.values[-1]}",
        f"nodes (topological): {', '.join(scm.order)}",
        f"drawn cause: {draw.as_dict()}",
        f"affected nodes: {', '.join(sorted(worlds.affected))}",
        "",
        f"{'node':<20}{'factual':>14}{'counterfactual':>16}{'effect in slice':>17}{'outside':>10}",
    ]
    after = np.arange(panel.n_time) >= draw.window.onset
    for name in scm.observed:
        f, c = worlds.factual[name], worlds.counterfactual[name]
        inside = float((f - c)[mask][:, after].sum())
        outside = float((f - c)[~mask].sum())
        lines.append(
            f"{name:<20}{float(f.sum()):>14.1f}{float(c.sum()):>16.1f}"
            f"{inside:>17.1f}{outside:>10.1f}"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:

    return run_cli("causaltrace", _main, argv)


def _main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(prog="causaltrace", description=__doc__.splitlines()[0])
    parser.add_argument("--debug", action="store_true", help="show tracebacks of errors")
    sub = parser.add_subparsers(dest="command", required=True)
    sim = sub.add_parser("simulate", help="simulate one hidden cause and print its effects")
    sim.add_argument("--domain", default="example", help=f"one of {sorted(available_domains())}")
    sim.add_argument("--seed", type=int, default=0)
    sim.add_argument("--cause", default=None, help="intervention point (default: drawn)")
    sub.add_parser("domains", help="list registered domains")
    exp = sub.add_parser(
        "export-structure",
        help="sampled worlds and the true graph, for structure-learning libraries",
    )
    exp.add_argument("--domain", default="example", help=f"one of {sorted(available_domains())}")
    exp.add_argument("--out", required=True, metavar="DIR", help="directory to write into")
    exp.add_argument("--samples", type=int, default=100, help="worlds per regime (default 100)")
    exp.add_argument("--seed", type=int, default=0, help="root seed of every world's seed")
    for flag, kind, example in (
        ("--do", "do", "NODE set to VALUE (hard)"),
        ("--shift", "shift", "VALUE added to NODE (soft)"),
        ("--scale", "scale", "NODE multiplied by VALUE (soft)"),
    ):
        exp.add_argument(
            flag,
            action="append",
            dest="regimes",
            default=[],
            type=lambda text, kind=kind: f"{kind}:{text}",
            metavar="NODE=VALUE[@SLICE]",
            help=f"an interventional regime: {example} on every cell, or on the cells of "
            "SLICE (dim=level&dim=level); repeatable",
        )
    exp.add_argument(
        "--regime",
        action="append",
        dest="regimes",
        default=[],
        metavar="KIND:NODE=VALUE[@SLICE],...",
        help="a regime of one or more interventions (KIND: do, shift or scale), e.g. "
        "'do:orders=5,shift:visits=10@channel=search'; repeatable",
    )
    exp.add_argument(
        "--include-latent", action="store_true", help="also export the unobserved nodes' columns"
    )
    exp.add_argument(
        "--with-panel",
        action="store_true",
        help="add the panel coordinates (dimensions, time) as graph nodes",
    )
    dis = sub.add_parser(
        "export-discovery",
        help="i.i.d. unit samples, the true CPDAG/MAG/PAG, BIF, DCDI arrays, perturbation table",
    )
    dis.add_argument("--domain", default="example", help=f"one of {sorted(available_domains())}")
    dis.add_argument("--out", required=True, metavar="DIR", help="directory to write into")
    dis.add_argument("--samples", type=int, default=1000, help="rows per regime (default 1000)")
    dis.add_argument("--seed", type=int, default=0, help="root seed of every world's seed")
    dis.add_argument(
        "--regime",
        action="append",
        dest="regimes",
        default=[],
        metavar="KIND:NODE=VALUE[@SLICE],...",
        help="an interventional regime (KIND: do, shift or scale); repeatable",
    )
    dis.add_argument(
        "--cell", default="0", help="the unit's cell: an index or a slice naming one cell"
    )
    dis.add_argument(
        "--time", type=int, default=None, help="the unit's time step (default: middle)"
    )
    dis.add_argument("--bins", type=int, default=5, help="most states per column in the BIF")
    dis.add_argument(
        "--include-latent", action="store_true", help="also export the unobserved nodes' columns"
    )
    srv = sub.add_parser("serve", help="serve episode sessions over HTTP (docs/serving.md)")
    srv.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    srv.add_argument("--port", type=int, default=8000, help="port (default 8000)")
    srv.add_argument("--max-sessions", type=int, default=256, help="live sessions at most")
    srv.add_argument(
        "--min-available-mb",
        type=int,
        default=1024,
        help="refuse new sessions (503) below this much available memory",
    )
    srv.add_argument(
        "--wait-seconds", type=float, default=0.0, help="how long an open waits for a free slot"
    )
    srv.add_argument(
        "--idle-seconds", type=float, default=900.0, help="close sessions idle this long"
    )
    srv.add_argument(
        "--dataset-root",
        action="append",
        default=[],
        metavar="DIR",
        help="serve only datasets under DIR (repeatable); by default any dataset directory",
    )
    srv.add_argument(
        "--request-timeout",
        type=float,
        default=120.0,
        help="seconds before a request answers 504 (the call continues; the session stays usable)",
    )
    srv.add_argument(
        "--tool-config",
        default=None,
        metavar="FILE",
        help="YAML or JSON mapping of ToolConfig keys (e.g. warm_workers, python_timeout)",
    )
    srv.add_argument("--log-level", default="info", help="uvicorn log level")
    srv.add_argument(
        "--token-file",
        default=None,
        metavar="FILE",
        help="where a generated bearer token is written (mode 0600) when CAUSALTRACE_SERVE_TOKEN "
        "is unset (default $XDG_CACHE_HOME/causaltrace/serve-PORT.token, ~/.cache if unset)",
    )
    srv.add_argument(
        "--docs", action="store_true", help="serve /docs, /redoc and /openapi.json (token needed)"
    )
    srv.add_argument(
        "--max-body-bytes",
        type=int,
        default=4 * 1024 * 1024,
        help="largest request body; 413 beyond (default 4194304, 4 MiB)",
    )
    srv.add_argument(
        "--body-timeout",
        type=float,
        default=60.0,
        help="seconds from a request's head to the end of its body; 408 beyond (default 60)",
    )
    srv.add_argument(
        "--header-timeout",
        type=float,
        default=10.0,
        help="seconds a connection has to send a complete request head; closed beyond (default 10)",
    )
    srv.add_argument(
        "--keep-alive-timeout",
        type=float,
        default=5.0,
        help="seconds an idle keep-alive connection is kept (default 5)",
    )
    srv.add_argument(
        "--max-connections",
        type=int,
        default=512,
        help="connections open at once; one more is answered 503 and closed (default 512)",
    )
    for flag, field, default in (
        ("--cap-tool-calls", "env_config.max_tool_calls (and calls per turn)", 100),
        ("--cap-turns", "env_config.max_turns", 100),
        ("--cap-answer-chars", "env_config.reward.parse.max_answer_chars", 2048),
        ("--cap-output-chars", "env_config.reward.parse.max_output_chars", 1_000_000),
        ("--cap-answers", "env_config.reward.parse.max_answers", 16),
    ):
        srv.add_argument(
            flag,
            type=int,
            default=default,
            help=f"the most a client may set {field} to; 422 above (default {default})",
        )
    args = parser.parse_args(argv)
    if args.command == "serve":
        return _serve(args)
    if args.command == "domains":
        for name, path in sorted(available_domains().items()):
            print(f"{name}\t{path}")
        return 0
    if args.command == "export-discovery":
        written = export_discovery(
            args.domain,
            args.out,
            samples=args.samples,
            seed=args.seed,
            regimes=args.regimes,
            include_latent=args.include_latent,
            cell=int(args.cell) if args.cell.isdigit() else args.cell,
            time=args.time,
            bins=args.bins,
        )
        for path in written:
            print(path)
        return 0
    if args.command == "export-structure":
        written = export_structure(
            args.domain,
            args.out,
            samples=args.samples,
            seed=args.seed,
            regimes=args.regimes,
            include_latent=args.include_latent,
            with_panel=args.with_panel,
        )
        for path in written:
            print(path)
        return 0
    print(simulate_summary(args.domain, args.seed, args.cause))
    return 0


def _check_types(defaults: object, values: dict, where: str) -> None:
    """Each value of the same kind as the default (a number, a flag, a text), so that a bad
    type is a one-line error here rather than a traceback when the server starts."""

    for key, value in values.items():
        default = getattr(defaults, key, None)
        if isinstance(default, bool):
            ok = isinstance(value, bool)
        elif isinstance(default, int | float):
            ok = isinstance(value, int | float) and not isinstance(value, bool)
        elif isinstance(default, str):
            ok = isinstance(value, str)
        else:
            ok = True
        if not ok:
            raise CausalTraceError(
                f"{where}: {key} must be like {default!r} ({type(default).__name__}), got {value!r}"
            )


def _serve(args: argparse.Namespace) -> int:
    """Check the options (a bad one is a one-line error before anything starts), then run."""

    host_config = {
        "max_sessions": args.max_sessions,
        "min_available_mb": args.min_available_mb,
        "wait_seconds": args.wait_seconds,
        "idle_seconds": args.idle_seconds,
        "dataset_roots": tuple(args.dataset_root),
    }
    HostConfig.from_mapping(host_config)
    for flag, value in (
        ("--port", args.port),
        ("--min-available-mb", args.min_available_mb),
        ("--wait-seconds", args.wait_seconds),
    ):
        if value < 0:
            raise CausalTraceError(f"{flag} must be >= 0, got {value}")
    for flag, value in (
        ("--idle-seconds", args.idle_seconds),
        ("--request-timeout", args.request_timeout),
        ("--max-body-bytes", args.max_body_bytes),
        ("--body-timeout", args.body_timeout),
        ("--header-timeout", args.header_timeout),
        ("--keep-alive-timeout", args.keep_alive_timeout),
        ("--max-connections", args.max_connections),
        ("--cap-tool-calls", args.cap_tool_calls),
        ("--cap-turns", args.cap_turns),
        ("--cap-answer-chars", args.cap_answer_chars),
        ("--cap-output-chars", args.cap_output_chars),
        ("--cap-answers", args.cap_answers),
    ):
        if value <= 0:
            raise CausalTraceError(f"{flag} must be > 0, got {value}")
    tool_config = None
    if args.tool_config is not None:
        with open(args.tool_config) as f:
            tool_config = yaml.safe_load(f) or {}
        if not isinstance(tool_config, dict):
            raise CausalTraceError(f"{args.tool_config}: a mapping of ToolConfig keys is expected")
        _check_types(ToolConfig(), tool_config, args.tool_config)
        ToolConfig.from_mapping(tool_config)  # unknown keys and bad values fail here, in one line

    # optional: the HTTP server needs fastapi and uvicorn (the serve extra)
    from causaltrace.serve.http import ServeLimits, SessionCaps, serve

    limits = ServeLimits(
        max_body_bytes=args.max_body_bytes,
        body_timeout=args.body_timeout,
        header_timeout=args.header_timeout,
        keep_alive_timeout=args.keep_alive_timeout,
        max_connections=args.max_connections,
    )
    caps = SessionCaps(
        max_tool_calls=args.cap_tool_calls,
        max_turns=args.cap_turns,
        max_answer_chars=args.cap_answer_chars,
        max_output_chars=args.cap_output_chars,
        max_answers=args.cap_answers,
    )
    serve(
        args.host,
        args.port,
        host_config=host_config,
        tool_config=tool_config,
        request_timeout=args.request_timeout,
        log_level=args.log_level,
        token_file=args.token_file,
        limits=limits,
        caps=caps,
        docs=args.docs,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
