"""Model-written toolworld source: extract it from a reply, repair common breakages, check it statically.

These are the gates before the sandbox. They are a policy layer, not the security boundary: the code
that passes them still runs only in sandbox processes, one per episode.
"""

from toolworlds.untrusted.extract import MAX_SOURCE_BYTES, ExtractionError, extract_source
from toolworlds.untrusted.policy import ALLOWED_MODULES, Violation, check_policy
from toolworlds.untrusted.repair import Repair, prepare, repair

__all__ = [
    "ALLOWED_MODULES",
    "MAX_SOURCE_BYTES",
    "ExtractionError",
    "Repair",
    "Violation",
    "check_policy",
    "extract_source",
    "prepare",
    "repair",
]
