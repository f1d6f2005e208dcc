"""`python -m judges_app.cli ...` is `dspy-judges ...`."""

from judges_app.cli import main

raise SystemExit(main())
