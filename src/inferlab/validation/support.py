"""Which cases the model predicts: a static batch by :func:`inferlab.estimate`, every other
regime by the serving simulation; each says why it cannot when it cannot."""

from __future__ import annotations

from .cases import Case, static_unsupported_reason
from .serving import serving_unsupported_reason


def unsupported_reason(case: Case) -> str | None:
    """Why the model cannot predict ``case`` yet, or None when it can."""
    if case.regime != "static_batch":
        return serving_unsupported_reason(case)
    return static_unsupported_reason(case)
