"""The audit: how hard a generated dataset is, and whether it can be solved without reasoning.

``causaltrace-audit`` (``causaltrace/apps/audit.py``) runs every section and writes a Markdown
report with figures; each module here is one section (see docs/audit.md):

- the oracle, :mod:`causaltrace.episodes.oracle`: a solver that knows the SCM and reads only
  the tables (the ceiling an agent can be measured against; generation reads it too, to accept
  only labels the tables support);
- :mod:`~causaltrace.audit.distinguish`: which causes the graph, and the oracle, can tell apart;
- :mod:`~causaltrace.audit.channels`: the channels each cause moves, measured against declared;
- :mod:`~causaltrace.audit.features` and :mod:`~causaltrace.audit.probes`: leakage and shortcut
  probes on features of the visible files;
- :mod:`~causaltrace.audit.curves`: accuracy against each difficulty knob;
- :mod:`~causaltrace.audit.records`, :mod:`~causaltrace.audit.alert_lines` and
  :mod:`~causaltrace.audit.rules`: the per-cause rule probe over non-metric data (record
  tables and the prompt's alert lines);
- :mod:`~causaltrace.audit.markdown`: the Markdown report and its figures.

The package is domain-free: a domain is loaded by name through :func:`causaltrace.load_domain`.
"""

from causaltrace.audit.stats import wilson
from causaltrace.episodes.oracle import (
    Hypothesis,
    OracleSolver,
    oracle_reading,
    posterior_margin,
)

__all__ = ["Hypothesis", "OracleSolver", "oracle_reading", "posterior_margin", "wilson"]
