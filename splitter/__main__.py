"""``python -m splitter`` is the ``splitter`` command."""

from splitter.cli import main

main()
