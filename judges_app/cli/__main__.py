"""`python -m judges_app.cli ...` is `dspy-judges ...`.

Must not hold code of its own.
"""

from judges_app.cli import main

raise SystemExit(main())
