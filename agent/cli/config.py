"""``factweave config``: the effective settings, printed as a settings file (secrets masked)."""
from __future__ import annotations

import json
from pathlib import Path

import click

from ..settings import config_path, load_settings


@click.command("config")
@click.option("--config", "config", type=click.Path(path_type=Path), default=None,
              help="Settings file to read (default $FACTWEAVE_CONFIG, ./factweave.toml, ~/.config/factweave/config.toml).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of TOML.")
def config_cmd(config: Path | None, as_json: bool) -> None:
    """Show the effective settings (file, environment and defaults merged; secrets masked).

    The output is a valid settings file: save it as factweave.toml and edit it.

    \b
    Example:
      factweave config
      FACTWEAVE_TREE=question factweave config --json
    """
    settings = load_settings(config)
    data = settings.public()
    if as_json:
        click.echo(json.dumps(data, indent=2))
        return
    source = config_path(config)
    click.echo(f"# effective factweave settings ({'file ' + str(source) if source else 'no settings file'}, "
               "environment, defaults)")
    secrets = {name for name, value in data.items() if value == "***"}
    for name, value in data.items():
        if name in secrets:
            click.echo(f"# {name} = (set; secrets are not shown)")
        elif value is None:
            click.echo(f"# {name} = (unset)")
        else:
            click.echo(f"{name} = {json.dumps(value)}")
