"""The sampler-cost configurations of scenarios/shapes/dirty-neighbour.sh:
every name the sampler-cost scenario runs by default is one the shape
knows (sampler_cost_config, the one list), and an unknown name fails the
check before any setup, naming it."""
import os
import re
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SHAPE = os.path.join(ROOT, "scenarios", "shapes", "dirty-neighbour.sh")
SCENARIO = os.path.join(ROOT, "scenarios", "sampler-cost.scenario")


def check(configs):
    """check_sampler_configs on CONFIGS in bash, with the guest runner's
    die and out_dir stood in for: (exit status, output)."""
    script = ('set -euo pipefail; die() { echo "die: $*"; exit 3; }; out_dir=/nonexistent; '
              f'. {SHAPE}; SAMPLER_COST_MS=100 SAMPLER_COST_SLOW_MS=1000; '
              'SAMPLER_COST_CONFIGS="$1"; check_sampler_configs; echo checked')
    p = subprocess.run(["bash", "-c", script, "bash", configs], capture_output=True, text=True)
    return p.returncode, p.stdout + p.stderr


def default_configs():
    with open(SCENARIO) as f:
        m = re.search(r'SAMPLER_COST_CONFIGS:=([^}"]*)', f.read())
    assert m, f"{SCENARIO}: no default SAMPLER_COST_CONFIGS"
    return m.group(1).split()


def test_the_scenario_default_names_only_known_configurations():
    names = default_configs()
    assert len(names) >= 2
    rc, out = check(" ".join(names))
    assert rc == 0 and out.strip().endswith("checked"), out


def test_an_unknown_configuration_fails_naming_it():
    rc, out = check("all-fast slow-everything")
    assert rc == 3, out
    assert "unknown sampler configuration 'slow-everything'" in out
    assert "checked" not in out
