"""`python -m judges_app ...` is `dspy-judges ...`."""

from judges_app.cli import main

raise SystemExit(main())
