"""The services domain: incidents in a microservice system (a shop's backend in three regions).

A second domain on the engine's public API, sharing nothing with ``causaltrace_domains.ads``: a service call
graph instead of a funnel, 15-minute buckets instead of days, SRE tables (RED metrics,
saturation, caches, the order queue, a change log) instead of ad reports.
See ``docs/domain-services.md``.
"""

from causaltrace_domains.services.domain import ServicesDomain

__all__ = ["ServicesDomain"]
