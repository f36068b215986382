"""``python -m agent.cli``: the ``factweave`` command."""
from .main import main

main()
