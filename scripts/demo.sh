#!/usr/bin/env bash
# The main job on the project's own model: demo/epq-demo-kjv-q4.gguf, a small MoE (64
# experts, top-4) that scripts/train_demo_model.py trained on the King James Bible. Show
# what is in it and the memory plan of a budget whose expert arena holds about a quarter
# of the experts, continue a prompt with the experts paged from disk inside that budget
# (enforced by the kernel), then once more with everything in RAM: the text is identical.
set -euo pipefail
cd "$(dirname "$0")/.."
model=demo/epq-demo-kjv-q4.gguf
prompt="And God said unto Moses,"
epq=./build/epq

# The budget: the minimum (top-k slots) plus a quarter of the way to holding every expert.
plan=$("$epq" plan -m "$model" --ram-budget 64G --ctx 512)
minimum=$(grep -o 'minimum budget: .*(\([0-9]*\) bytes' <<<"$plan" | grep -o '([0-9]*' | tr -d '(')
all_fit=$(grep -o 'holds every expert: .*(\([0-9]*\) bytes' <<<"$plan" | grep -o '([0-9]*' | tr -d '(')
budget=$((minimum + (all_fit - minimum) / 4))

echo "== epq inspect $model"
"$epq" inspect "$model" --no-metadata --no-tensors
echo
echo "== epq plan -m $model --ram-budget $budget --ctx 512"
"$epq" plan -m "$model" --ram-budget "$budget" --ctx 512
echo
echo "== epq run (paged, a $budget-byte budget enforced by the kernel)"
"$epq" limit --memory "$budget" -- "$epq" run -m "$model" --ram-budget "$budget" --ctx 512 -p "$prompt" -n 64 --temp 0 --repeat-penalty 1.3 \
  | tee /tmp/epq-demo-paged.txt
echo
echo "== epq run (all in RAM)"
"$epq" run -m "$model" --ctx 512 -p "$prompt" -n 64 --temp 0 --repeat-penalty 1.3 | tee /tmp/epq-demo-resident.txt
echo
if cmp -s /tmp/epq-demo-paged.txt /tmp/epq-demo-resident.txt; then
  echo "demo: paged and all-in-RAM runs produced identical text"
else
  echo "demo: paged and all-in-RAM runs differ" >&2
  exit 1
fi
echo "(a 40M-parameter model trained for an hour on two cores: King James English, not an assistant; see demo/README.md)"
