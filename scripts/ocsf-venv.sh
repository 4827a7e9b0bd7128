#!/usr/bin/env bash
# Makes the Python environment scripts/ocsf-validate.py runs in: the OCSF
# schema (the `ocsf-json-schema` package, which carries the schema's
# released versions) and a JSON Schema validator, pinned, in
# target/ocsf-venv (the tests look for it there). Takes the machine's own
# pip configuration for where packages come from; a second run with the
# same pins installs nothing.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
venv="$here/../target/ocsf-venv"
pins=(ocsf-json-schema==1.2.0 jsonschema==4.26.0)
if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c 'import jsonschema, ocsf_json_schema' 2>/dev/null; then
    exit 0
fi
command -v python3 >/dev/null 2>&1 || die "python3 not found: the OCSF schema check needs Python 3.10 or later"
step "making the OCSF schema checker's Python environment ($venv)"
python3 -m venv "$venv"
"$venv/bin/pip" install -q --disable-pip-version-check "${pins[@]}"
