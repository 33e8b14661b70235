"""The services domain's Hydra presets: ``domain/services``, ``dataset/`` (its splits and
difficulty tiers) and ``agent/`` (its teacher and baselines). The ``causaltrace_searchpath``
Hydra plugin adds ``pkg://causaltrace_domains.services.conf`` to every causaltrace app's search
path, because the domain is registered under the ``causaltrace.domains`` entry points and has
this package."""
