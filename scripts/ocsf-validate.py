#!/usr/bin/env python3
"""Validates OCSF events, one JSON object per line (files or stdin), each
against the JSON Schema of its own class (`class_uid`) in the OCSF version
its `metadata.version` names, with the profiles its `metadata.profiles`
lists. The schemas come from the `ocsf-json-schema` package (the OCSF
schema itself, packaged), the validation from `jsonschema` (draft
2020-12). Prints one line per invalid event and a summary; exits 1 when
any event is invalid or no event was read, 2 when the packages are
missing.
"""
import json
import sys

try:
    import jsonschema
    from ocsf_json_schema import OcsfJsonSchemaEmbedded, get_ocsf_schema
except ImportError as e:
    print(f"ocsf-validate: {e}: run scripts/ocsf-venv.sh", file=sys.stderr)
    sys.exit(2)


def main(paths):
    schemas = {}
    classes = {}
    bad = 0
    n = 0
    files = [open(p, encoding="utf-8") for p in paths] or [sys.stdin]
    for f in files:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            n += 1
            where = f"{getattr(f, 'name', '-')}:{lineno}"
            try:
                ev = json.loads(line)
            except json.JSONDecodeError as e:
                print(f"{where}: not JSON: {e}")
                bad += 1
                continue
            meta = ev.get("metadata") or {}
            version = meta.get("version")
            profiles = tuple(sorted(meta.get("profiles") or []))
            key = (version, ev.get("class_uid"), profiles)
            if key not in schemas:
                try:
                    ocsf = OcsfJsonSchemaEmbedded(get_ocsf_schema(version=version))
                    name = ocsf.lookup_class_name_from_uid(class_uid=ev.get("class_uid"))
                    schema = ocsf.get_class_schema(class_name=name, profiles=list(profiles))
                except Exception as e:  # noqa: BLE001 - any lookup failure is a bad event
                    print(f"{where}: no OCSF schema for {key}: {e}")
                    bad += 1
                    continue
                schemas[key] = jsonschema.Draft202012Validator(schema)
            errors = sorted(schemas[key].iter_errors(ev), key=lambda e: list(e.path))
            expected_type = ev.get("class_uid", 0) * 100 + ev.get("activity_id", -1)
            if ev.get("type_uid") != expected_type:
                print(f"{where}: type_uid {ev.get('type_uid')} is not class_uid*100+activity_id ({expected_type})")
                bad += 1
            for e in errors:
                path = "/".join(str(p) for p in e.path) or "(event)"
                print(f"{where}: class {ev.get('class_uid')}: {path}: {e.message}")
            if errors:
                bad += 1
            classes[ev.get("class_uid")] = classes.get(ev.get("class_uid"), 0) + 1
    summary = ", ".join(f"{c}: {k}" for c, k in sorted(classes.items(), key=lambda x: str(x[0])))
    print(f"{n} event(s), {bad} invalid; by class: {summary or 'none'}")
    sys.exit(1 if bad or n == 0 else 0)


if __name__ == "__main__":
    main(sys.argv[1:])
