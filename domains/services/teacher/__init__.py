"""The services domain's investigating teacher (issue 24): it reads the page, the call graph,
the alerted series and the change log, then measures one cause's footprint per query, the
least settled hypothesis first, says what each result shows and submits the deepest footprint
that fired. Modules: :mod:`.page` (the prompt), :mod:`.footprints` (what each cause moves and
the SQL that measures it), :mod:`.narrate` (the words), :mod:`.agent` (the loop). The scripted
sweep it replaces stays as ``services_scripted`` (:mod:`causaltrace_domains.services.agents`)."""

from causaltrace_domains.services.teacher.agent import ServicesInvestigator

__all__ = ["ServicesInvestigator"]
