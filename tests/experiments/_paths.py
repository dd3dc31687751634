"""Makes experiments/towerps_experiments importable from the tests."""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "experiments"))
FAKE_LAUNCHER = os.path.join(HERE, "fake_launcher.py")
DATA = os.path.join(HERE, "data")
# The built towerps-launch, when CTest runs the suite (tests/CMakeLists.txt sets it).
REAL_LAUNCHER = os.environ.get("TOWERPS_LAUNCH_BIN", "")
