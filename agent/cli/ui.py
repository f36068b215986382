"""``factweave ui``: the chat UI on 127.0.0.1."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from ..errors import FactweaveError
from ..extras import require
from ..settings import load_settings
from ..supervisor import supervise
from .options import agent_options

LOOPBACK = ("127.0.0.1", "localhost", "::1")


def _auth(path: Path | None) -> list[tuple[str, str]] | None:
    """The logins: ``USER:PASSWORD`` lines of the file ``path``, else FACTWEAVE_UI_AUTH (one
    login; never from the command line, where every user of the machine can read it in the
    process list)."""
    if path is not None:
        try:
            lines, where = path.read_text(encoding="utf-8").splitlines(), str(path)
        except OSError as exc:
            raise FactweaveError(f"--auth-file {path}: {exc.strerror or exc}") from None
    else:
        value, where = os.environ.get("FACTWEAVE_UI_AUTH", ""), "FACTWEAVE_UI_AUTH"
        if not value:
            return None
        lines = [value]
    logins: dict[str, str] = {}
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        user, sep, password = line.strip().partition(":")
        if not sep or not user or not password:
            raise FactweaveError(f"{where}" + (f":{number}" if len(lines) > 1 else "") + ": expected USER:PASSWORD")
        if user in logins:
            raise FactweaveError(f"{where}:{number}: {user} has a login already")
        logins[user] = password
    if not logins:
        raise FactweaveError(f"{where}: expected USER:PASSWORD")
    return list(logins.items())


@click.command("ui")
@agent_options
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind (loopback only by default).")
@click.option("--port", type=click.IntRange(1, 65535), default=7860, show_default=True)
@click.option("--allow-host", "allowed_hosts", multiple=True,
              help="A host name the browser may use beyond loopback and IP addresses (repeatable).")
@click.option("--share", is_flag=True, help="Also publish a temporary public gradio.live link (needs internet and "
              "--auth).")
@click.option("--auth-file", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="Require a login: the file holds USER:PASSWORD lines, one per login (or set "
                   "FACTWEAVE_UI_AUTH=USER:PASSWORD).")
@click.option("--admin", "admins", multiple=True, metavar="USER",
              help="Only this login may add or remove knowledge and switch the model (repeatable); the others "
                   "ask and search. Default: every login may.")
@click.option("--insecure", is_flag=True, help="Listen beyond loopback without a login (anyone who reaches the port "
              "can use the model and change the knowledge).")
@click.option("--concurrency", type=click.IntRange(1, 8), default=2, show_default=True,
              help="Questions answered at once; more wait in the queue.")
@click.option("--max-upload-mb", type=click.IntRange(1, 2048), default=20, show_default=True,
              help="Largest uploaded file.")
def ui_command(config, model, engine, engine_url, web_dir, tree, rerank, host, port, allowed_hosts, share, auth_file, admins, insecure,
               concurrency, max_upload_mb) -> None:
    """Chat with the agent in the browser: answers stream with every constrained fact
    highlighted and traceable to its source; upload knowledge; choose tree mode, beams, model.

    The model loads once and is shared by every session; questions queue.

    \b
    Example:
      factweave ui                                 # http://127.0.0.1:7860, demo knowledge
      FACTWEAVE_UI_AUTH=me:secret factweave ui --model smollm2-135m --host 0.0.0.0
      factweave ui --auth-file logins --admin ann   # logins: ann:... and bob:...; only ann changes the knowledge
    """
    require("ui", "factweave ui")
    # lazy: the UI pulls Gradio (the [ui] extra, required above) and numpy, which other commands must not pay for
    from ui.app import build_ui, demo_examples, launch
    from ui.runtime import UIRuntime

    credentials = _auth(auth_file)
    if share and credentials is None:
        raise FactweaveError("--share publishes this UI on a public gradio.live link: give a login too "
                             "(--auth-file FILE or FACTWEAVE_UI_AUTH=USER:PASSWORD)")
    if host not in LOOPBACK and credentials is None and not insecure:
        raise FactweaveError(f"listening on {host} without a login lets anyone who reaches the port use the model "
                             "and change the knowledge: give --auth-file FILE or FACTWEAVE_UI_AUTH=USER:PASSWORD "
                             "(or --insecure)")
    unknown = sorted(set(admins) - {user for user, _ in credentials or []})
    if unknown:
        raise FactweaveError(f"--admin {', '.join(unknown)}: no such login; the logins are the USER:PASSWORD lines of "
                             "--auth-file (or FACTWEAVE_UI_AUTH)")
    settings = load_settings(config, model=model, engine=engine, engine_url=engine_url, web=web_dir, tree=tree,
                             rerank=rerank)
    limit = max_upload_mb * 1024 * 1024
    supervise("ui")  # from here on in a child process, restarted should it crash (agent/supervisor.py)
    print(f"Opening {settings.model} and the knowledge web (first use: model conversion and the demo web, a few "
          "minutes)...", file=sys.stderr)
    with UIRuntime(settings, max_upload_bytes=limit) as runtime:
        examples = demo_examples() if settings.uses_demo_web() else None
        app = build_ui(runtime, examples=examples, concurrency=concurrency, admins=admins)
        print(f"factweave UI on http://{host}:{port}  (Ctrl+C stops it)", file=sys.stderr)
        launch(app, host=host, port=port, share=share, auth=credentials, max_file_size=limit,
               allowed_hosts=allowed_hosts)
