#!/bin/sh
# Builds python-echo.wasm beside this script (or at the path given) with componentize-py 0.25,
# for the contract's `adapter-with-tools` world.
set -eu
here=$(dirname "$0")
exec componentize-py -d "$here/../../../wit" -w service:adapter/adapter-with-tools@0.2.3 \
    componentize -p "$here" app -o "${1:-$here/python-echo.wasm}"
