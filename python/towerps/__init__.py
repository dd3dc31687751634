"""TowerPS's Python package: PyTorch models trained against TowerPS's parameter servers.

Use ``towerps.torch`` (``import towerps.torch as tps``); scripts run under
``towerps-launch --worker-cmd "python3 train.py ..."``. See README "Your PyTorch model" and
docs/API.md.
"""

from ._towerps import __version__  # noqa: F401
