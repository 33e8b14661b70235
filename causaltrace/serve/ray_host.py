"""Sessions on every node of a Ray cluster: a pool of actors, each running a
:class:`~causaltrace.serve.host.SessionHost`, behind the same async interface.

    async with RayHost(num_actors=8, host_config={"max_sessions": 64}) as host:
        opened = await host.open(dataset, episode)
        result = await host.step(opened["session_id"], {"name": "sql", "arguments": {...}})

Why the pieces exist:

* **Episode affinity.** The rollouts of one GRPO prompt read the same episode; sending them to
  one actor reuses its warm workers and its loaded tables. A session goes to the actor that
  consistent hashing of ``(dataset, episode)`` picks among the ready actors (adding or losing
  one actor moves only the episodes it owned); if that actor refuses with
  :class:`~causaltrace.serve.host.HostFull`, the session goes to the least-loaded other actor,
  and :class:`HostFull` reaches the caller only when every actor refuses.
* **Recovery.** An actor can die (its node preempted, OOM-killed). The driver keeps, for every
  session, its episode spec and the turns that completed; when a call meets a dead actor, the
  pool starts a replacement in the same slot, rebuilds the session on a ready actor by
  replaying those turns in order (restoring the Python namespace, the budgets and the
  transcript), then retries the call once. Replay re-executes code: it restores what the code
  computes from the episode's tables, not what depended on time, randomness without a seed or
  the outside world (a ``python`` call that read the clock reads it again). If replay fails, or
  the failed call was a submit (the answer may or may not have been scored), the call raises
  :class:`SessionLost`, a named error a trainer counts; the session is then dropped.
* **No hangs.** Every remote call has a deadline (``call_timeout``; replays ``replay_timeout``)
  and raises :class:`CallTimeout` (a :class:`SessionLost`) when it passes.

The dataset path must be readable at the same path on every node (shared storage).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import time
from bisect import bisect_left
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from uuid import uuid4

from causaltrace.env.session import ToolCall
from causaltrace.errors import CausalTraceError, RunFailure
from causaltrace.serve.host import HostConfig, HostFull, SessionHost, UnknownSession


class SessionLost(RunFailure):
    """A session cannot be continued: its actor died and replay failed, the call in flight
    was a submit, or a remote call passed its deadline. The session is dropped."""


class CallTimeout(SessionLost):
    """A remote call did not answer within ``call_timeout`` (or ``replay_timeout``)."""


class ReplayFailed(RunFailure):
    """Raised inside an actor when replaying a session's turns does not reproduce it."""


_VNODES = 64  # ring points per actor slot: enough for an even split of episodes


def _hash(text: str) -> int:
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "big")


def _is_submit(calls: Sequence[Any]) -> bool:
    """Whether a turn may end the episode by scoring an answer (a text answer or a submit)."""

    if not calls:
        return True
    for call in calls:
        try:
            if ToolCall.of(call).name == "submit":
                return True
        except TypeError:
            continue
    return False


class HostActor:
    """The body of one Ray actor: a :class:`SessionHost` plus ``rebuild`` (replay) and
    ``ready``. Plain class; :class:`RayHost` wraps it with ``ray.remote``.

    Args:
        tool_config: The sandbox settings (a :class:`~causaltrace.tools.ToolConfig`, its fields,
            or None for the defaults).
        host_config: The actor's capacity (a :class:`HostConfig`, its fields, or None).
        env_config: The sessions' default budgets and reward (an
            :class:`~causaltrace.env.EnvConfig`, its fields, or None).
    """

    def __init__(self, tool_config: Any, host_config: Any, env_config: Any) -> None:
        self.host = SessionHost(tool_config, host_config, env_config)

    async def ready(self) -> dict[str, Any]:
        """Start the tool runtime (warm workers) and say where this actor runs."""
        await self.host.start()
        return self._where()

    def _where(self) -> dict[str, Any]:
        # optional: the ray extra
        import ray

        return {"node_id": ray.get_runtime_context().get_node_id(), "pid": os.getpid()}

    async def open(self, dataset, episode, env_config=None, session_id=None) -> dict[str, Any]:
        return await self.host.open(dataset, episode, env_config, session_id)

    async def turn(self, sid: str, calls: list, content: str | None) -> list[dict[str, Any]]:
        return await self.host.turn(sid, calls, content)

    async def close_session(self, sid: str) -> dict[str, Any]:
        return await self.host.close_session(sid)

    async def health(self) -> dict[str, Any]:
        return {**self.host.health(), **self._where()}

    async def shutdown(self) -> None:
        await self.host.close()

    async def rebuild(
        self,
        sid: str,
        dataset: str,
        episode: str,
        env_config: Any,
        turns: list[tuple[list, str | None, list[tuple[bool, bool]]]],
    ) -> dict[str, Any]:
        """Open ``sid`` again and replay its completed turns; each must give as many results
        with the same ended/not-ended flags as it did the first time.

        Args:
            sid: The session id to open again.
            dataset: The session's dataset.
            episode: The session's episode.
            env_config: The session's env config, as first opened.
            turns: The completed turns: each turn's calls, its text and the ``(terminated,
                truncated)`` flags of its results.

        Returns:
            What :meth:`SessionHost.open` returns.

        Raises:
            ReplayFailed: A turn gave different results, or the replay failed.
            HostFull: The actor has no room for the session.
        """
        opened = await self.host.open(dataset, episode, env_config, sid)  # HostFull propagates
        try:
            for n, (calls, content, flags) in enumerate(turns):
                results = await self.host.turn(sid, calls, content)
                got = [(bool(r["terminated"]), bool(r["truncated"])) for r in results]
                if got != [tuple(f) for f in flags]:
                    raise ReplayFailed(
                        f"session {sid}: turn {n} replayed with (terminated, truncated) {got}, "
                        f"recorded {flags}"
                    )
        except BaseException as exc:
            with contextlib.suppress(Exception):
                await self.host.close_session(sid)
            if isinstance(exc, ReplayFailed):
                raise
            raise ReplayFailed(f"session {sid}: replay failed: {exc!r}") from exc
        return opened


@dataclass
class _Slot:
    """One place in the pool; its actor is replaced in place when it dies, so the hash ring
    (built over slot indices) never changes."""

    index: int
    actor: Any
    ready: asyncio.Event = field(default_factory=asyncio.Event)
    info: dict[str, Any] = field(default_factory=dict)
    error: str | None = None


@dataclass
class _Record:
    """What the driver needs to rebuild a session: its spec and the turns that completed."""

    dataset: str
    episode: str
    env_config: Any
    slot: int
    actor: Any
    turns: list[tuple[list, str | None, list[tuple[bool, bool]]]] = field(default_factory=list)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


class RayHost:
    """A pool of ``num_actors`` Ray actors hosting sessions; a drop-in for :class:`SessionHost`.

    ``actor_options`` go to ``.options()`` of each actor (``num_cpus``, ``resources``,
    ``scheduling_strategy``; ``"SPREAD"`` by default, so actors land on different nodes).
    ``host_config``/``tool_config``/``env_config`` configure each actor's SessionHost.
    ``start_timeout`` bounds an actor's start (a worker process, imports, warm tool workers),
    which on a loaded node takes longer than a tool call.
    ``address``/``num_cpus`` are used only when Ray is not initialized yet (then
    :meth:`close` shuts Ray down again).

    Args:
        num_actors: The number of actors (at least 1); 1 by default.
        actor_options: Options for each actor's ``.options()``; ``SPREAD`` scheduling by
            default.
        host_config: Each actor's capacity; :class:`HostConfig` defaults by default.
        tool_config: Each actor's sandbox settings; the defaults by default.
        env_config: The sessions' default budgets and reward; the defaults by default.
        call_timeout: Seconds one remote call may take; 120 by default.
        replay_timeout: Seconds a session's rebuild may take; 600 by default.
        start_timeout: Seconds an actor's start may take; 300 by default.
        address: The Ray cluster to connect to, when Ray is not initialized; local by default.
        num_cpus: The CPUs of a local Ray started here; Ray's choice by default.

    Raises:
        CausalTraceError: ``num_actors`` is below 1 or a timeout is not positive.
    """

    def __init__(
        self,
        num_actors: int = 1,
        *,
        actor_options: Mapping[str, Any] | None = None,
        host_config: HostConfig | Mapping[str, Any] | None = None,
        tool_config: Any = None,
        env_config: Any = None,
        call_timeout: float = 120.0,
        replay_timeout: float = 600.0,
        start_timeout: float = 300.0,
        address: str | None = None,
        num_cpus: int | None = None,
    ) -> None:
        if num_actors < 1:
            raise CausalTraceError(f"RayHost: num_actors must be >= 1, not {num_actors}")
        if min(call_timeout, replay_timeout, start_timeout) <= 0:
            raise CausalTraceError("RayHost: call, replay and start timeouts must be positive")
        self.num_actors = num_actors
        self.actor_options = {"scheduling_strategy": "SPREAD", **dict(actor_options or {})}
        if host_config is None or isinstance(host_config, Mapping):
            host_config = HostConfig.from_mapping(host_config)
        self.host_config = host_config
        self.tool_config = tool_config
        self.env_config = env_config
        self.call_timeout = float(call_timeout)
        self.replay_timeout = float(replay_timeout)
        self.start_timeout = float(start_timeout)
        self.address, self.num_cpus = address, num_cpus
        self.slots: list[_Slot] = []
        self.sessions: dict[str, _Record] = {}
        self._ring: list[tuple[int, int]] = sorted(
            (_hash(f"slot-{i}#{v}"), i) for i in range(num_actors) for v in range(_VNODES)
        )
        self._ring_keys = [h for h, _ in self._ring]
        self._actor_class: Any = None
        self._started_ray = False
        self._tasks: set[asyncio.Task] = set()
        self.replaced = 0
        self.recovered = 0
        self.lost = 0
        self.refused = 0
        self.recovery_seconds: list[float] = []

    # ------------------------------------------------------------------ lifecycle
    async def __aenter__(self) -> RayHost:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def start(self) -> RayHost:
        """Start the actors and wait until each has its tool runtime up."""
        if self.slots:
            return self
        try:
            # optional: the ray extra
            import ray
        except ImportError as exc:  # pragma: no cover - depends on the extra
            raise CausalTraceError("RayHost needs Ray: pip install 'causaltrace[ray]'") from exc
        if not ray.is_initialized():
            ray.init(
                address=self.address,
                num_cpus=self.num_cpus,
                include_dashboard=False,
                log_to_driver=False,
                ignore_reinit_error=True,
            )
            self._started_ray = True
        self._actor_class = ray.remote(HostActor)
        self.slots = [_Slot(i, self._spawn()) for i in range(self.num_actors)]
        await asyncio.gather(*(self._await_ready(s, s.actor) for s in self.slots))
        failed = [s for s in self.slots if not s.ready.is_set()]
        if failed:
            errors = "; ".join(f"actor {s.index}: {s.error}" for s in failed)
            await self.close()
            raise CausalTraceError(f"RayHost: actors did not start: {errors}")
        return self

    def _spawn(self) -> Any:
        return self._actor_class.options(**self.actor_options).remote(
            self.tool_config, self.host_config, self.env_config
        )

    async def _await_ready(self, slot: _Slot, actor: Any) -> None:
        try:
            info = await self._remote(actor, "ready", timeout=self.start_timeout)
        except Exception as exc:  # a dead or hung actor: reported by health, replaced later
            if slot.actor is actor:
                slot.error = repr(exc)
            return
        if slot.actor is actor:
            slot.info, slot.error = info, None
            slot.ready.set()

    async def close(self) -> None:
        """Close every actor's sessions and runtime (bounded by ``call_timeout``), kill the
        actors, and shut Ray down if this host started it."""
        # optional: the ray extra
        import ray

        for task in list(self._tasks):
            task.cancel()
        actors = [s.actor for s in self.slots]
        if actors:
            await asyncio.gather(
                *(self._remote(a, "shutdown", timeout=self.call_timeout) for a in actors),
                return_exceptions=True,
            )
        for actor in actors:
            with contextlib.suppress(Exception):
                ray.kill(actor)
        self.slots, self.sessions = [], {}
        if self._started_ray:
            ray.shutdown()
            self._started_ray = False

    # ------------------------------------------------------------------ remote calls
    async def _remote(self, actor: Any, method: str, *args: Any, timeout: float) -> Any:
        """Call an actor method with a deadline; errors raised in the actor come back as
        themselves (HostFull, UnknownSession, ...), a dead actor as ``RayActorError``."""
        # optional: the ray extra
        import ray

        ref = getattr(actor, method).remote(*args)
        try:
            return await asyncio.wait_for(asyncio.wrap_future(ref.future()), timeout)
        except TimeoutError:
            with contextlib.suppress(Exception):
                ray.cancel(ref)
            raise CallTimeout(f"actor call {method} did not answer within {timeout:g} s") from None
        except ray.exceptions.RayTaskError as exc:
            cause = getattr(exc, "cause", None)
            if isinstance(cause, Exception):
                raise cause from None
            raise

    def _replace(self, slot: _Slot, dead: Any) -> None:
        """Start a new actor in ``slot`` unless that was already done for ``dead``."""
        # optional: the ray extra
        import ray

        if slot.actor is not dead:
            return
        with contextlib.suppress(Exception):
            ray.kill(dead)
        slot.actor = self._spawn()
        slot.ready = asyncio.Event()
        slot.info, slot.error = {}, None
        self.replaced += 1
        task = asyncio.create_task(self._await_ready(slot, slot.actor))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # ------------------------------------------------------------------ placement
    def owner(self, dataset: str, episode: str, among: Sequence[int] | None = None) -> int:
        """The slot consistent hashing gives ``(dataset, episode)`` among ``among`` (default:
        every slot).

        Args:
            dataset: The session's dataset.
            episode: The session's episode.
            among: The slots allowed; every slot by default.

        Raises:
            CausalTraceError: ``among`` is empty.
        """
        allowed = set(range(self.num_actors) if among is None else among)
        if not allowed:
            raise CausalTraceError("RayHost: no actor to place a session on")
        i = bisect_left(self._ring_keys, _hash(f"{dataset}\x00{episode}"))
        for k in range(len(self._ring)):
            slot = self._ring[(i + k) % len(self._ring)][1]
            if slot in allowed:
                return slot
        raise AssertionError("unreachable: the ring holds every slot")

    def load(self) -> dict[int, int]:
        counts = {s.index: 0 for s in self.slots}
        for rec in self.sessions.values():
            counts[rec.slot] = counts.get(rec.slot, 0) + 1
        return counts

    async def _candidates(self, dataset: str, episode: str, exclude: int | None) -> list[int]:
        """Ready slots in the order to try: the affinity owner, then least-loaded first."""
        ready = [s.index for s in self.slots if s.ready.is_set() and s.index != exclude]
        if not ready:  # every actor is (re)starting: wait for one, within the deadline
            waits = [asyncio.create_task(s.ready.wait()) for s in self.slots]
            try:
                await asyncio.wait(
                    waits, timeout=self.call_timeout, return_when=asyncio.FIRST_COMPLETED
                )
            finally:
                for w in waits:
                    w.cancel()
            ready = [s.index for s in self.slots if s.ready.is_set()]
            if not ready:
                raise CallTimeout(f"no actor became ready within {self.call_timeout:g} s")
        first = self.owner(dataset, episode, ready)
        load = self.load()
        rest = sorted((i for i in ready if i != first), key=lambda i: (load.get(i, 0), i))
        return [first, *rest]

    def where(self, sid: str) -> int:
        """The slot index a session lives on (for tests and diagnostics).

        Args:
            sid: An open session's id.
        """
        return self._record(sid).slot

    # ------------------------------------------------------------------ the host interface
    async def open(
        self,
        dataset: str,
        episode: str,
        env_config: Mapping[str, Any] | None = None,
        session_id: str | None = None,
    ) -> dict[str, Any]:
        """Open a session on the episode's actor (or the least-loaded one that has room);
        returns ``{"session_id", "prompt", "tools"}``. Raises :class:`HostFull` when every
        actor refuses.

        Args:
            dataset: The dataset directory, as the actors see it.
            episode: The episode id.
            env_config: The session's budgets and reward; the host's ``env_config`` by default.
            session_id: The session's id; a fresh one by default.

        Raises:
            CausalTraceError: ``session_id`` is already open.
            HostFull: Every actor refused the session.
        """
        # optional: the ray extra
        import ray

        await self.start()
        sid = session_id or uuid4().hex
        if sid in self.sessions:
            raise CausalTraceError(f"session {sid!r} is already open")
        dataset, episode = str(dataset), str(episode)
        env = env_config if env_config is not None else self.env_config
        refusals: list[str] = []
        for index in await self._candidates(dataset, episode, None):
            slot = self.slots[index]
            actor = slot.actor
            try:
                opened = await self._remote(
                    actor, "open", dataset, episode, env, sid, timeout=self.call_timeout
                )
            except HostFull as exc:
                refusals.append(f"actor {index}: {exc}")
                continue
            except ray.exceptions.RayActorError:
                self._replace(slot, actor)
                continue
            self.sessions[sid] = _Record(dataset, episode, env, index, actor)
            return opened
        self.refused += 1
        raise HostFull(
            "every actor refused the session" + (": " + "; ".join(refusals) if refusals else "")
        )

    async def step(self, sid: str, action: Any) -> dict[str, Any]:
        """One tool call; returns the :class:`~causaltrace.env.StepResult` as a dict.

        Args:
            sid: The session's id.
            action: The tool call (a :class:`~causaltrace.env.ToolCall` or its mapping).
        """
        return (await self.turn(sid, [action]))[0]

    async def turn(
        self, sid: str, calls: Sequence[Any], content: str | None = None
    ) -> list[dict[str, Any]]:
        """One assistant message with its tool calls (none: a final text answer). A dead actor
        is replaced and the session rebuilt elsewhere before the call is retried once.

        Args:
            sid: The session's id.
            calls: The message's tool calls, in order.
            content: The message's text; none by default.

        Returns:
            One step result (as a dict) per call, or one for a final text answer.
        """
        calls = list(calls)

        def record(rec: _Record, results: list[dict[str, Any]]) -> None:
            flags = [(bool(r["terminated"]), bool(r["truncated"])) for r in results]
            rec.turns.append((calls, content, flags))

        return await self._call(
            sid, "turn", calls, content, submits=_is_submit(calls), on_result=record
        )

    async def close_session(self, sid: str) -> dict[str, Any]:
        """Close a session; returns its transcript (rebuilt by replay if its actor died).

        Args:
            sid: The session's id.
        """
        try:
            return await self._call(sid, "close_session", submits=False)
        finally:
            self.sessions.pop(sid, None)

    def health(self) -> dict[str, Any]:
        """The driver's view (no remote calls, like :meth:`SessionHost.health`): per-actor
        placement and load, and counters of replacements, recoveries and lost sessions."""
        load = self.load()
        return {
            "sessions": len(self.sessions),
            "num_actors": self.num_actors,
            "ready_actors": sum(s.ready.is_set() for s in self.slots),
            "max_sessions": self.host_config.max_sessions * self.num_actors,
            "refused": self.refused,
            "replaced": self.replaced,
            "recovered": self.recovered,
            "lost": self.lost,
            "recovery_seconds": list(self.recovery_seconds),
            "actors": [
                {
                    "slot": s.index,
                    "ready": s.ready.is_set(),
                    "sessions": load.get(s.index, 0),
                    "error": s.error,
                    **s.info,
                }
                for s in self.slots
            ],
        }

    async def probe(self) -> list[dict[str, Any]]:
        """Ask every actor for its :meth:`SessionHost.health`; a dead actor is replaced (its
        entry then says ``{"slot", "error"}``)."""
        # optional: the ray extra
        import ray

        async def one(slot: _Slot) -> dict[str, Any]:
            actor = slot.actor
            try:
                h = await self._remote(actor, "health", timeout=self.call_timeout)
                return {"slot": slot.index, **h}
            except ray.exceptions.RayActorError as exc:
                self._replace(slot, actor)
                return {"slot": slot.index, "error": repr(exc)}
            except CallTimeout as exc:
                return {"slot": slot.index, "error": repr(exc)}

        return list(await asyncio.gather(*(one(s) for s in self.slots)))

    # ------------------------------------------------------------------ recovery
    def _record(self, sid: str) -> _Record:
        rec = self.sessions.get(sid)
        if rec is None:
            raise UnknownSession(f"no open session {sid!r} on this host")
        return rec

    def _drop(self, sid: str) -> None:
        if self.sessions.pop(sid, None) is not None:
            self.lost += 1

    async def _call(
        self, sid: str, method: str, *args: Any, submits: bool, on_result: Any = None
    ) -> Any:
        """Call ``method`` for session ``sid`` on its actor under the session's lock (so the
        recorded turns keep their order); recover from a dead actor as the module says."""
        # optional: the ray extra
        import ray

        rec = self._record(sid)
        async with rec.lock:
            for attempt in range(2):
                slot = self.slots[rec.slot]
                if rec.actor is not slot.actor:  # its actor was replaced since the last call
                    await self._rebuild(sid, rec)
                actor = rec.actor
                try:
                    result = await self._remote(
                        actor, method, sid, *args, timeout=self.call_timeout
                    )
                except ray.exceptions.RayActorError as exc:
                    self._replace(self.slots[rec.slot], actor)
                    if submits:
                        self._drop(sid)
                        raise SessionLost(
                            f"session {sid}: its actor died during a submit; whether the answer "
                            f"was scored is unknown"
                        ) from exc
                    if attempt:
                        self._drop(sid)
                        raise SessionLost(
                            f"session {sid}: its actor died again after recovery"
                        ) from exc
                except CallTimeout:
                    self._drop(sid)
                    with contextlib.suppress(Exception):
                        actor.close_session.remote(sid)  # best effort; its reply is not awaited
                    raise
                except UnknownSession:
                    self.sessions.pop(sid, None)  # closed or idle-expired on the actor
                    raise
                else:
                    if on_result is not None:
                        on_result(rec, result)
                    return result
        raise AssertionError("unreachable")

    async def _rebuild(self, sid: str, rec: _Record) -> None:
        """Replay ``rec`` on a ready actor (the episode's owner among them, else the least
        loaded with room); raises :class:`SessionLost` if no actor can."""
        # optional: the ray extra
        import ray

        started = time.perf_counter()
        try:  # only ready actors are candidates, so not the dead one's fresh replacement
            candidates = await self._candidates(rec.dataset, rec.episode, None)
        except CallTimeout as exc:
            self._drop(sid)
            raise SessionLost(f"session {sid}: no actor to rebuild it on: {exc}") from exc
        errors: list[str] = []
        for index in candidates:
            slot = self.slots[index]
            actor = slot.actor
            try:
                await self._remote(
                    actor,
                    "rebuild",
                    sid,
                    rec.dataset,
                    rec.episode,
                    rec.env_config,
                    rec.turns,
                    timeout=self.replay_timeout,
                )
            except HostFull as exc:
                errors.append(f"actor {index}: {exc}")
                continue
            except ray.exceptions.RayActorError as exc:
                self._replace(slot, actor)
                errors.append(f"actor {index}: died ({type(exc).__name__})")
                continue
            except Exception as exc:  # ReplayFailed, CallTimeout, a bad episode spec, ...
                self._drop(sid)
                raise SessionLost(f"session {sid}: replay failed: {exc}") from exc
            rec.slot, rec.actor = index, actor
            self.recovered += 1
            self.recovery_seconds.append(round(time.perf_counter() - started, 3))
            return
        self._drop(sid)
        raise SessionLost(f"session {sid}: no actor could rebuild it: {'; '.join(errors)}")
