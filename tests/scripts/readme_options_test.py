"""Every option README.md names exists: in the --help of a TowerPS binary or script, or in the
short list below of other tools' options (cmake, srun, ctest), each with the tool it belongs to.

Usage: readme_options_test.py README.md BIN_DIR REPO_ROOT. Fails listing each missing option
with the README line that names it, so a renamed or removed flag cannot leave the README behind.
"""
import re
import subprocess
import sys

# Options of other programs that the README shows in their own commands.
FOREIGN = {
    "--build": "cmake --build",
    "--install": "cmake --install",
    "--prefix": "cmake --install",
    "--overcommit": "srun",
    "--allow-run-as-root": "mpirun (Open MPI)",
    "--bind-to": "mpirun (Open MPI)",
    "--cpu-bind": "srun",
    "--kill-on-bad-exit": "srun",
    "--preset": "ctest --preset",
}

BENCH_SUBCOMMANDS = ["transport", "ps", "train", "soak", "replicas", "job", "sparse"]


def help_text(argv):
    done = subprocess.run(argv + ["--help"], capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        sys.exit(f"{' '.join(argv)} --help exited {done.returncode}: {done.stderr}")
    return done.stdout


def main():
    readme, bin_dir, root = sys.argv[1:4]
    helps = [help_text([f"{bin_dir}/{b}"])
             for b in ("towerps-server", "towerps-worker", "towerps-launch")]
    helps += [help_text([f"{bin_dir}/towerps-bench", sub]) for sub in BENCH_SUBCOMMANDS]
    helps.append(help_text([f"{bin_dir}/towerps-launch", "--stdin-watchdog"]))
    for script in ("scripts/test.sh", "scripts/package.sh", "scripts/gpu_verify.sh",
                   "experiments/run_preset", "experiments/run_sweep", "scripts/make_ctr_data.py",
                   "scripts/to_npy.py", "bench/pytorch_baseline.py", "bench/table_policy_bench.py"):
        helps.append(help_text(["bash" if script.endswith(".sh") else sys.executable,
                                f"{root}/{script}"]))
    known = set()
    for text in helps:
        known.update(re.findall(r"--[a-z][a-z0-9-]*", text))
    missing = []
    with open(readme, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            for option in re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", line):
                if option not in known and option not in FOREIGN:
                    missing.append(f"README.md:{number}: {option} is in no --help: {line.strip()}")
    checked = len(known)
    if missing:
        print("\n".join(missing) + "\n", flush=True)
        sys.exit(f"{len(missing)} README option(s) missing from every --help")
    print(f"every README option is in a --help ({checked} options known)")


if __name__ == "__main__":
    main()
