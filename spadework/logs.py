"""Structured logs for every spadework command: key=value lines on stderr, JSON when asked."""

from __future__ import annotations

import logging
import os
import sys

import structlog


def configure_logging(level: str | None = None) -> None:
    """Route structlog to stderr so stdout stays clean for results (and for MCP over stdio)."""
    chosen = (level or os.environ.get("SPADEWORK_LOG_LEVEL", "info")).upper()
    renderer = (
        structlog.processors.JSONRenderer()
        if os.environ.get("SPADEWORK_LOG_JSON")
        else structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty())
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso"),
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(logging.getLevelName(chosen)),
        logger_factory=_current_stderr_logger,
        cache_logger_on_first_use=False,
    )


def _current_stderr_logger(*args: object) -> structlog.PrintLogger:
    """Look sys.stderr up at each use: PrintLoggerFactory(file=sys.stderr) keeps the stream it was given,
    which a test runner (or contextlib.redirect_stderr) may have closed since."""
    return structlog.PrintLogger(file=sys.stderr)
