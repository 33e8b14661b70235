"""The digital-advertising domain (see docs/domain-ads.md)."""

from causaltrace_domains.ads.domain import AdsDomain

__all__ = ["AdsDomain"]
