"""GPUs at risk: a 0-1 score per GPU and the reasons that make it up (issue 24, section 3).

One table (:mod:`falcon_gpu.risk.table`) declares every reason: what it reads, the level at
which it counts fully and its weight. The store computes the score with recording rules written
from that table (:mod:`falcon_gpu.risk.rules`, ``scripts/gen_answer_rules.py``: trends need the
history a store keeps), and ``falcon-gpu doctor`` computes the same reasons from what the agent
holds (:mod:`falcon_gpu.risk.score`).
"""

from falcon_gpu.risk.score import RiskHistory, RiskReport
from falcon_gpu.risk.table import REASONS, Reason

__all__ = ["REASONS", "Reason", "RiskHistory", "RiskReport"]
