#!/usr/bin/env bash
# Runs on the GPU machine (through the device tool), from the repository root,
# with the token streams in tools/train/data (carried: they are not in git):
#
#   bash tools/train/device.sh            # the full run, about 8 minutes
#   SMOKE=1 bash tools/train/device.sh    # a few steps, to check the pipeline
#
# The results come back as $OUT/run.tar.* (split to fit the transfer limits):
#   cat run.tar.* | tar xf - -C models/strata-kjv-new
set -euo pipefail
out=/tmp/strata-run
rm -rf "$out"
python3 tools/train/train.py --data tools/train/data --out "$out" --minutes "${MINUTES:-6.5}" ${SMOKE:+--smoke} 2>&1 | grep -v -i warning
ls -la "$out" "$out/golden" >&2; (cd "$out" && tar cf - .) | split -b 15M - "$OUT/run.tar."
