"""``python -m splitter`` is the ``splitter`` command."""

from splitter.entry import main

main()
