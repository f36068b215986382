"""The ``factweave`` command line: the group, its entry point and its error handling. Each command
lives in a module of its own and mirrors a Python function; errors print one line."""
from __future__ import annotations

import faulthandler
import sys

import click

from .. import supervisor
from ..errors import FactweaveError
from .ask import ask
from .config import config_cmd
from .eval import eval_group
from .index import index_group
from .kb import kb_group
from .llm import llm_group
from .mcp import mcp_command
from .models import models_cmd
from .serve import serve_command
from .ui import ui_command
from .web import web_group


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="factweave")
def cli() -> None:
    """factweave: answers built from facts that exist in a knowledge base, with proof.

    \b
    Example:
      factweave ask "What is the original language of Kalakalappu 2?"
    """


for command in (models_cmd, config_cmd, index_group, kb_group, ask, eval_group, web_group, llm_group, serve_command,
                mcp_command, ui_command):
    cli.add_command(command)


def main() -> None:
    """Entry point: run the CLI; expected failures print ``Error: ...`` on one line, exit 1."""
    supervisor.from_command_line = True  # `ui` and `serve` keep themselves up (agent.supervisor)
    faulthandler.enable()  # a native crash (an engine's) says where it happened instead of dying silently
    try:
        cli.main(standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("Aborted.", err=True)
        sys.exit(130)
    except click.ClickException as e:
        e.show()
        sys.exit(e.exit_code)
    except FactweaveError as e:
        click.echo(f"Error: {e}", err=True)
        sys.exit(1)
    except KeyboardInterrupt:
        click.echo("Interrupted.", err=True)
        sys.exit(130)
    except OSError as e:
        click.echo(f"Error: {e.strerror or e}{f': {e.filename}' if e.filename else ''}", err=True)
        sys.exit(1)


if __name__ == "__main__":
    main()
