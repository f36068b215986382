"""Writes ``paraphrases_questions.json``: questions written for this project, in several wordings
per kind of reasoning, over passages of the 2WikiMultiHopQA corpus (HippoRAG's
``2wiki_corpus.json``), with answers read from those passages by hand (each item names its
passages). None is a 2WikiMultiHopQA question and none of their entities is in the 30 questions
of the project's 2Wiki evaluation. Run from the repository root; ``factweave eval 2wiki --data
benchmarks/data/paraphrases_questions.json`` answers them over the 2Wiki web."""
from __future__ import annotations

import json
from pathlib import Path

# (kind, question, answer, aliases, supporting passages)
ITEMS = [
    # a choice by a date of the options themselves, in several wordings
    ("choice", "Of Guiomar Novaes and Gus Triandos, who was born earlier?", "Guiomar Novaes", [],
     ["Guiomar Novaes", "Gus Triandos"]),
    ("choice", "Who came into the world first: Bryan Forbes or Richard Fraser?", "Richard Fraser", ["Richard Fraser (actor)"],
     ["Bryan Forbes", "Richard Fraser (actor)"]),
    ("choice", "Between Edward Rapallo and Clarence Moore, who died more recently?", "Edward Rapallo", [],
     ["Edward Rapallo", "Clarence Moore (businessman)"]),
    ("choice", "Which of these two is the younger, Luis Bayón Herrera or Gideon Johnson Pillow?",
     "Luis Bayón Herrera", [], ["Luis Bayón Herrera", "Gideon Johnson Pillow"]),
    ("choice", "Winter Light or The Spooky Bunch: which film is older?", "Winter Light", [],
     ["Winter Light", "The Spooky Bunch"]),
    ("choice", "Which came out last, Broadway or Bust or Strangers of the Night?", "Broadway or Bust", [],
     ["Broadway or Bust", "Strangers of the Night"]),
    ("choice", "Who had the longer life, Gus Triandos or Clarence Moore?", "Gus Triandos", [],
     ["Gus Triandos", "Clarence Moore (businessman)"]),
    # a choice by a date of someone the options lead to
    ("choice", "Whose director was born first, One Sunday Afternoon or The Crime Doctor's Diary?",
     "One Sunday Afternoon", ["One Sunday Afternoon (1948 film)"],
     ["One Sunday Afternoon (1948 film)", "Raoul Walsh", "The Crime Doctor's Diary", "Seymour Friedman"]),
    ("choice", "Which movie was made by the director who died later, Broadway or Bust or Tabitha, Stand Up?",
     "Tabitha, Stand Up", [], ["Broadway or Bust", "Edward Sedgwick", "Tabitha, Stand Up", "Robert Dinesen"]),
    ("choice", "Of Where Mountains Float and Winter Light, which film's director is older?", "Where Mountains Float", [],
     ["Where Mountains Float", "Bjarne Henning-Jensen", "Winter Light", "Ingmar Bergman"]),
    ("choice", "Whose director passed away first, Strangers of the Night or A Little Sister of Everybody?",
     "Strangers of the Night", [],
     ["Strangers of the Night", "Fred Niblo", "A Little Sister of Everybody", "Robert Thornby"]),
    # whether the first comes before or after the other
    ("verify", "Is Guiomar Novaes older than Edward Rapallo?", "yes", [], ["Guiomar Novaes", "Edward Rapallo"]),
    ("verify", "Was Bryan Forbes born before Gus Triandos?", "yes", [], ["Bryan Forbes", "Gus Triandos"]),
    ("verify", "Did Winter Light come out before Jára Cimrman Lying, Sleeping?", "yes", [],
     ["Winter Light", "Jára Cimrman Lying, Sleeping"]),
    ("verify", "Did Richard Fraser die after Luis Bayón Herrera?", "yes", ["Richard Fraser (actor)"],
     ["Richard Fraser (actor)", "Luis Bayón Herrera"]),
    ("verify", "Is The Spooky Bunch older than Winter Light?", "no", [], ["The Spooky Bunch", "Winter Light"]),
    # whether both share a value
    ("same", "Are Gideon Johnson Pillow and Clarence Moore of the same nationality?", "yes", [],
     ["Gideon Johnson Pillow", "Clarence Moore (businessman)"]),
    ("same", "Did Guiomar Novaes and Luis Bayón Herrera come from the same country?", "no", [],
     ["Guiomar Novaes", "Luis Bayón Herrera"]),
    ("same", "Bjarne Henning-Jensen and Robert Dinesen: same nationality?", "yes", [],
     ["Bjarne Henning-Jensen", "Robert Dinesen"]),
    ("same", "Do the directors of Broadway or Bust and A Little Sister of Everybody share a nationality?", "yes",
     [], ["Broadway or Bust", "Edward Sedgwick", "A Little Sister of Everybody", "Robert Thornby"]),
    ("same", "Were Bryan Forbes and Ingmar Bergman from the same country?", "no", [], ["Bryan Forbes", "Ingmar Bergman"]),
    # how far apart
    ("difference", "How many years apart were Winter Light and Where Mountains Float released?", "8", [],
     ["Winter Light", "Where Mountains Float"]),
    ("difference", "How many years after Tabitha, Stand Up did Broadway or Bust come out?", "2", [],
     ["Tabitha, Stand Up", "Broadway or Bust"]),
    ("difference", "What is the gap in years between the births of Fred Niblo and Robert Dinesen?", "0", [],
     ["Fred Niblo", "Robert Dinesen"]),
    # look-ups: one fact, then through a role
    ("lookup", "In which year did Ladislav Smoljak pass away?", "2010", ["6 June 2010"], ["Ladislav Smoljak"]),
    ("lookup", "What nationality was the pianist Guiomar Novaes?", "Brazilian", ["Brazil"], ["Guiomar Novaes"]),
    ("lookup", "Which city was Luis Bayón Herrera born in?", "Bilbao", [], ["Luis Bayón Herrera"]),
    ("lookup", "Who made the 1924 western Broadway or Bust?", "Edward Sedgwick", [], ["Broadway or Bust"]),
    ("lookup", "Who directed the documentary Where Mountains Float?", "Bjarne Henning-Jensen", [],
     ["Where Mountains Float"]),
    ("lookup", "Where was the director of Jára Cimrman Lying, Sleeping born?", "Prague", [],
     ["Jára Cimrman Lying, Sleeping", "Ladislav Smoljak"]),
    ("lookup", "When did the man who directed A Little Sister of Everybody die?", "March 6, 1953", ["1953"],
     ["A Little Sister of Everybody", "Robert Thornby"]),
    ("lookup", "Who was the wife of the director of Where Mountains Float?", "Astrid Henning-Jensen", [],
     ["Where Mountains Float", "Bjarne Henning-Jensen"]),
]


def main() -> None:
    rows = [{"id": f"paraphrase-{i:02d}-{kind}", "question": q, "answer": a, "answer_aliases": aliases,
             "supporting_facts": titles, "type": kind} for i, (kind, q, a, aliases, titles) in enumerate(ITEMS)]
    out = Path(__file__).with_name("paraphrases_questions.json")
    out.write_text(json.dumps(rows, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"{len(rows)} questions -> {out}")


if __name__ == "__main__":
    main()
