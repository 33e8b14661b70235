"""The domain-free teacher (issue 40, item 4): hypotheses from the page, one discriminating
python cell per question, statistics computed in the row. A domain declares its causes'
signatures as data (:mod:`.spec`); see docs/teacher.md.

Modules, one job each: :mod:`.spec` (what a domain declares), :mod:`.notebook` (the code the
teacher types and reading back what it printed), :mod:`.voice` (the words), :mod:`.agent` (the
loop).
"""

from causaltrace.agents.investigator.agent import SignatureInvestigator
from causaltrace.agents.investigator.spec import (
    InvestigationSpec,
    Signature,
    investigation_spec,
)

__all__ = ["InvestigationSpec", "Signature", "SignatureInvestigator", "investigation_spec"]
