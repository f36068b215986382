"""Every ``factweave`` command: the group and its entry point (:mod:`.main`), the options the
agent-facing commands share (:mod:`.options`), and one module per command group."""
from .main import cli, main

__all__ = ["cli", "main"]
