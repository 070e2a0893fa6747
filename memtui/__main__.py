"""`python -m memtui` runs the same entry point as the `memtui` command."""

from memtui.cli import main

raise SystemExit(main())
