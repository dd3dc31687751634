"""TowerPS experiment tooling: sweeps over update modes, their results, plots and reports."""
