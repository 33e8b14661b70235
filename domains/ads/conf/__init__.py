"""The ads domain's Hydra presets: ``domain/`` (ads, ads_small), ``dataset/`` (the ads splits
and difficulty tiers), ``agent/`` (its teacher and baselines) and ``curriculum/``. The
``causaltrace_searchpath`` Hydra plugin adds ``pkg://causaltrace_domains.ads.conf`` to every
causaltrace app's search path, because the domain is registered under the
``causaltrace.domains`` entry points and has this package."""
