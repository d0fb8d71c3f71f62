"""Validate SARIF logs against the official SARIF 2.1.0 JSON schema.

usage: python sarif_validate.py SCHEMA LOG...

Prints each error (its path in the log and the message) and exits 1 when
any log is not valid; exits 0 when all are. The validator is the one the
schema names (`$schema`: draft-04 for SARIF 2.1.0), from PyPI jsonschema,
checked first against its metaschema.
"""

import json
import sys

import jsonschema


def main() -> int:
    schema_path, *logs = sys.argv[1:]
    with open(schema_path, encoding="utf-8") as f:
        schema = json.load(f)
    validator_class = jsonschema.validators.validator_for(schema)
    validator_class.check_schema(schema)
    validator = validator_class(schema)
    bad = 0
    for path in logs:
        with open(path, encoding="utf-8") as f:
            log = json.load(f)
        errors = sorted(validator.iter_errors(log), key=lambda e: list(e.absolute_path))
        for e in errors:
            where = "/".join(str(p) for p in e.absolute_path)
            print(f"{path}: /{where}: {e.message}")
        bad += bool(errors)
    print(f"{validator_class.__name__}: {len(logs) - bad} valid, {bad} not")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
