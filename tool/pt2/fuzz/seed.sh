#!/usr/bin/env bash
# Seeds corpus/pt2_reader with the testdata's archives — the zoo models and every
# single-operator archive of pt2_ops/ (the whole operator surface the importer maps) — whole
# and as the NUL-separated parts the fuzz target zips itself (program JSON, weights config,
# constants config, the first weight storage).
set -euo pipefail
cd "$(dirname "$0")"
testdata=../../../../shared/testdata
mkdir -p corpus/pt2_reader
seed() { # archive, name in the corpus
    local archive=$1 name=$2 stem
    stem=$(basename "$archive" .pt2)
    install -m 0644 "$archive" "corpus/pt2_reader/$name.pt2"
    {
        unzip -p "$archive" "$stem/models/model.json"
        printf '\0'
        unzip -p "$archive" "$stem/data/weights/model_weights_config.json"
        printf '\0'
        unzip -p "$archive" "$stem/data/constants/model_constants_config.json"
        printf '\0'
        unzip -p "$archive" "$stem/data/weights/weight_0" 2>/dev/null || true
    } > "corpus/pt2_reader/$name.parts"
}
for archive in "$testdata"/pt2/zoo_*.pt2; do
    seed "$archive" "$(basename "$archive" .pt2)"
done
for archive in "$testdata"/pt2_ops/*/*.pt2; do
    seed "$archive" "$(basename "$(dirname "$archive")")_$(basename "$archive" .pt2)"
done
echo "seeded $(ls corpus/pt2_reader | wc -l) inputs in corpus/pt2_reader"
