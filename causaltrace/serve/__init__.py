"""Serving rollouts: episode sessions hosted in one process (:class:`SessionHost`), on every node
of a Ray cluster, or over HTTP, behind one interface the trainer adapters take.

A *host* opens sessions (one episode of one dataset each, with its own tools, budgets and
transcript), steps them with tool calls, and closes them. Every host speaks the same async
methods (``open``, ``step``, ``turn``, ``close_session``, ``health``), so a trainer moves from
one machine to a cluster by swapping the host. See docs/serving.md.
"""

from causaltrace.serve.host import HostConfig, HostFull, SessionHost, UnknownSession

__all__ = ["HostConfig", "HostFull", "SessionHost", "UnknownSession"]
