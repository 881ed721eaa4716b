#!/usr/bin/env bash
# Seeds corpus/pt2_reader with the testdata's zoo archives, whole and as the NUL-separated
# parts the fuzz target zips itself (program JSON, weights config, constants config, the
# first weight storage).
set -euo pipefail
cd "$(dirname "$0")"
testdata=../../../../shared/testdata/pt2
mkdir -p corpus/pt2_reader
for archive in "$testdata"/zoo_*.pt2; do
    stem=$(basename "$archive" .pt2)
    install -m 0644 "$archive" corpus/pt2_reader/
    {
        unzip -p "$archive" "$stem/models/model.json"
        printf '\0'
        unzip -p "$archive" "$stem/data/weights/model_weights_config.json"
        printf '\0'
        unzip -p "$archive" "$stem/data/constants/model_constants_config.json"
        printf '\0'
        unzip -p "$archive" "$stem/data/weights/weight_0" || true
    } > "corpus/pt2_reader/$stem.parts"
done
echo "seeded $(ls corpus/pt2_reader | wc -l) inputs in corpus/pt2_reader"
