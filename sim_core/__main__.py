import sys

from sim_core.cli import main

sys.exit(main())
