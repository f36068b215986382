"""``factweave models``: the packaged model presets and whether they are installed."""
from __future__ import annotations

import click

from ..models import PRESETS, preset_installed, preset_requirements


@click.command("models")
def models_cmd() -> None:
    """List the packaged model presets, their PyPI packages, and whether they are installed.

    \b
    Example:
      factweave models
    """
    # lazy: agent.runtime pulls torch (CLI start stays fast)
    from ..runtime import DEFAULT_MODEL

    for name, preset in PRESETS.items():
        mark = " (default)" if name == DEFAULT_MODEL else ""
        state = "installed" if preset_installed(preset) else "not installed"
        click.echo(f"{name}{mark}\t{preset.description}\t{state}: {preset_requirements(preset)}")
