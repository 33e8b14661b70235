"""The ads domain's investigating teacher (issue 24).

It reads the page (the alerts), keeps the hypotheses (cause, slice) still consistent with what
it has seen, chooses each next query by the information it is expected to give about them, reads
the result in its own code, says which hypotheses the numbers strengthen or rule out, and submits
when one hypothesis (or a set, for concurrent causes) dominates. See docs/teacher.md.

Modules, one job each: :mod:`.page` (the prompt),
:mod:`.signatures` (what the domain declares about each cause), :mod:`.queries` (the SQL an
analyst types), :mod:`.stats` (arithmetic on returned rows), :mod:`.belief` (hypotheses, posterior,
information gain), :mod:`.probes` (what each query covers and how its rows update the belief),
:mod:`.narrate` (the words), :mod:`.worksheet` (the statistics computed in the row, with
``worksheet: true``), :mod:`.agent` (the loop).
"""

from causaltrace_domains.ads.teacher.agent import InvestigatorAgent

__all__ = ["InvestigatorAgent"]
