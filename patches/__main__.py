import sys

from patches.cli import main

sys.exit(main())
