#!/usr/bin/env bash
# The reasoning table (docs/evaluation.md, "Reasoning, checked"; the README has its commands): the four methods, one run per
# row, on one loaded model each, >= 30 questions per row. Resumable: a row already answered in
# OUT is not answered again (the row log). Usage: benchmarks/reasoning.sh [OUT] [rows...];
# MODEL=qwen2.5-coder-1.5b runs the rows on another preset (the 2wiki-1.5b row names its own).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-benchmarks/results/eval/reasoning/checked}
shift || true
ROWS=${*:-"kamel kamel-chat two-hop popqa hotpotqa musique 2wiki paraphrases 2wiki-1.5b"}
FW=${FACTWEAVE:-.venv/bin/factweave}
MODEL=${MODEL:-qwen2.5-coder-0.5b}
M="--method llm-only --method refactx --method web-rag --method agent --no-judge"
for row in $ROWS; do
  case $row in
    kamel)       $FW eval kamel --limit 30 $M --model "$MODEL" --out "$OUT" ;;
    kamel-chat)  $FW eval kamel-chat --kind follow-up --limit 15 $M --model "$MODEL" --out "$OUT/follow-up" ;;
    two-hop)     $FW eval kamel-chat --kind two-hop --limit 30 $M --model "$MODEL" --out "$OUT/two-hop" ;;
    popqa)       $FW eval popqa --limit 30 $M --model "$MODEL" --out "$OUT" ;;
    hotpotqa)    $FW eval hotpotqa --limit 30 $M --model "$MODEL" --out "$OUT" ;;
    musique)     $FW eval musique --limit 30 $M --model "$MODEL" --out "$OUT" ;;
    2wiki)       $FW eval 2wiki --limit 30 $M --model "$MODEL" --out "$OUT" ;;
    paraphrases) # Written over the shared 2Wiki corpus: a folder with both, the corpus linked (its
                 # web is the 2wiki row's: a corpus is keyed by its bytes, not its name).
                 d=${TMPDIR:-/tmp}/factweave-paraphrases; mkdir -p "$d"
                 cp benchmarks/data/paraphrases_questions.json "$d/"
                 ln -sf "$(realpath ../shared/data/2wikimultihopqa/2wiki_corpus.json)" "$d/paraphrases_corpus.json"
                 $FW eval 2wiki --data "$d/paraphrases_questions.json" --limit 40 $M \
                   --model "$MODEL" --out "$OUT/paraphrases" ;;
    2wiki-1.5b)  $FW eval 2wiki --limit 30 $M --model qwen2.5-coder-1.5b --out "$OUT/2wiki-1.5b" ;;
    *) echo "unknown row $row" >&2; exit 2 ;;
  esac
done
