import sys

from validation.audit.cli import main

sys.exit(main())
