"""Table -> column -> meaning, shown to the agent (the table data_dictionary)."""

from __future__ import annotations

_KEYS = {"ts": "start of the 15-minute bucket (UTC)", "region": "region"}

DATA_DICTIONARY: dict[str, dict[str, str]] = {
    "service_metrics": {
        **_KEYS,
        "service": "service (application service, cache, database, search, external API, queue)",
        "requests": "requests the service received in the bucket (for a cache: lookups; for the "
        "queue: messages published)",
        "errors": "requests that failed (5xx, timeouts), including failures of its dependencies "
        "it could not absorb",
        "latency_p50_ms": "median server-side latency in ms, including the time spent in calls to "
        "its dependencies",
        "latency_p99_ms": "99th percentile latency in ms",
    },
    "saturation": {
        **_KEYS,
        "service": "service",
        "cpu_pct": "CPU utilisation of the service's instances in the region, % of the CPU "
        "they get (busy time over the time not stolen)",
        "cpu_steal_pct": "CPU steal: % of the hosts' CPU time the hypervisor gave other tenants "
        "while the service's instances wanted to run",
        "memory_pct": "memory in use, % of the instances' limit",
        "connections_active": "connections in use (average over the bucket): for an application "
        "service its pooled database connections, for a database its client sessions",
        "connections_pending": "requests waiting for a pooled connection (average over the bucket)",
    },
    "cache_metrics": {
        **_KEYS,
        "cache": "cache cluster",
        "lookups": "lookups",
        "hits": "lookups answered from the cache",
        "misses": "lookups that missed (the caller then reads the database behind the cache)",
        "hit_rate": "hits / lookups",
    },
    "queue_metrics": {
        **_KEYS,
        "queue": "message queue (order events; the fulfilment consumer drains it and writes each "
        "order to orders_db)",
        "published": "messages published in the bucket",
        "consumers": "consumer workers that processed messages in the bucket (average; workers "
        "are autoscaled with the traffic level)",
        "depth": "messages waiting at the end of the bucket",
    },
    "call_graph": {
        "caller": "calling service",
        "callee": "called service",
        "callee_kind": "what the callee is (app, cache, database, search, external, queue)",
        "call": "what the call does",
        "calls_per_request": "calls per request of the caller (nominal)",
        "only_on_miss_of": "if set, the call is made only when a lookup in this cache misses",
    },
    "change_log": {
        "change_time": "when the change was applied (UTC); the log holds the latest changes, "
        "newest first",
        "service": "service changed",
        "region": "region changed",
        "change_type": "deploy (a new version) or config (a configuration key)",
        "field": "what changed: version, or the configuration key",
        "old_value": "value before (for db.pool.max_connections: the pool of the service's "
        "instances in the region)",
        "new_value": "value after",
        "author": "who or what applied it",
    },
}
