"""Says whether torch was imported before the target started."""

import sys

print("torch before the target:", "torch" in sys.modules)
