"""The error question generation raises on bad input."""

from __future__ import annotations

from qrag_integrations.core.errors import QRAGError


class QuestionGenerationError(QRAGError):
    """Documents or settings that cannot become training lines; the message says why and what to do."""
