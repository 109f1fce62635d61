import sys

from integration.registry.apicurio import main

sys.exit(main())
