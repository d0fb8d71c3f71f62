"""Write action.yml's steps as a workflow actionlint can check.

usage: python action_workflow.py ACTION_YML OUT_YML

actionlint checks workflows, not a composite action's own steps. This makes
a reusable workflow (`on: workflow_call`) whose inputs are the action's (so
`inputs.NAME` reads the same) and whose one job runs the action's steps, so
each step's expressions, `uses:` and shell are checked as a workflow's.
"""

import sys

import yaml


def main() -> int:
    action_path, out_path = sys.argv[1:]
    with open(action_path, encoding="utf-8") as f:
        action = yaml.safe_load(f)
    inputs = {}
    for name, spec in action.get("inputs", {}).items():
        inputs[name] = {
            "description": spec.get("description", ""),
            "required": bool(spec.get("required", False)),
            "type": "string",
        }
    outputs = {
        name: {"description": spec.get("description", ""), "value": f"${{{{ jobs.action.outputs.{name} }}}}"}
        for name, spec in action.get("outputs", {}).items()
    }
    workflow = {
        "name": action["name"],
        "on": {"workflow_call": {"inputs": inputs, "outputs": outputs}},
        "permissions": {"contents": "read", "security-events": "write", "pull-requests": "write"},
        "jobs": {
            "action": {
                "runs-on": "ubuntu-latest",
                "outputs": {name: spec["value"] for name, spec in action.get("outputs", {}).items()},
                "steps": action["runs"]["steps"],
            }
        },
    }
    with open(out_path, "w", encoding="utf-8") as f:
        yaml.safe_dump(workflow, f, sort_keys=False, width=1000)
    return 0


if __name__ == "__main__":
    sys.exit(main())
