"""ReFactX constrained decoding: the trigger, the logits processor, spans and generation."""
from .generate import Answer, FactGenerator, parse_answer
from .processor import FactConstrainedLogitsProcessor
from .spans import CompletedFact, FactSpan
from .tracker import FactTracker, TraceState
from .vocab import TokenVocab

__all__ = ["Answer", "CompletedFact", "FactConstrainedLogitsProcessor", "FactGenerator", "FactSpan", "FactTracker",
           "TokenVocab", "TraceState", "parse_answer"]
