#!/usr/bin/env bash
# Run some of a saved study's runs in a clone of this repository, costed run by run (costed_repro.py), in the
# background; one clone per core, the clones sharing one DVC cache. Each finished run is then saved into the
# study from the clone and committed here, so a clone lost before the study ends loses only unfinished runs:
#
#   bench/studies/run_in_clone.sh STUDY CLONE RUN[,RUN...] [SHARED_CACHE]    # starts, prints the job's pid
#   oodcorr study save STUDY --from CLONE --run RUN                           # as each run finishes
#   python bench/studies/costed_repro.py studies/STUDY --merge CLONE/cost.json   # once its runs are saved
#
# The clone gets the study's params.yaml and chosen items (studies/STUDY/items.json -> data/items.json); its
# cost.json holds its runs only (the pilot is counted once, in studies/STUDY/cost.json). Kill a run's
# `oodcorr train|evaluate` process, never costed_repro.py, so the stopped attempt's CPU time is recorded.
set -euo pipefail
study=$1 clone=$2 runs=$3 cache=${4:-}
repo=$(git rev-parse --show-toplevel)
bin=$(dirname "$(command -v oodcorr)")
[[ -f "$repo/studies/$study/params.yaml" ]] || { echo "error: no studies/$study/params.yaml" >&2; exit 2; }
[[ -e "$clone" ]] || git clone -q "$repo" "$clone"
cp "$repo/studies/$study/params.yaml" "$clone/params.yaml"
if [[ -f "$repo/studies/$study/items.json" ]]; then cp "$repo/studies/$study/items.json" "$clone/data/items.json"; fi
cd "$clone"
export DVC_NO_ANALYTICS=1 HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 OODCORR_THREADS="${OODCORR_THREADS:-1}"
export PATH="$bin:$PATH" PYTHONPATH="$PWD/src"
if [[ -n "$cache" ]]; then dvc cache dir --local "$cache"; fi
remote=$(dvc remote default 2>/dev/null) || remote=demo  # as `make setup`: the default remote, else the demo one
dvc pull -q -r "$remote" data.dvc
nohup nice -n 5 python bench/studies/costed_repro.py . --pilot-cpu-hours 0 \
  --pilot-source "counted once in studies/$study/cost.json" --runs "$runs" >> costed_repro.out 2>&1 &
echo $!
