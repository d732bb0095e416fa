#!/bin/sh
# Builds python-echo.wasm beside this script (or at the path given) with componentize-py 0.25.
# Targets the contract's `adapter-with-tools` world intersected with wit/python-echo.wit, so the
# component imports only what it uses (see README.md).
set -eu
here=$(dirname "$0")
exec componentize-py -d "$here/../../../wit" -d "$here/wit" \
    -w service:adapter/adapter-with-tools@0.1.0 \
    componentize -i example:python-echo/python-echo -p "$here" app \
    -o "${1:-$here/python-echo.wasm}"
