"""Loading prompts from the ``prompts/`` folder (one home for every prompt text)."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .errors import FactweaveError

_HERE = Path(__file__).resolve().parent


def prompts_dir() -> Path:
    """``prompts/`` beside the package in a checkout, or ``agent/prompts`` in an installed wheel."""
    for candidate in (_HERE.parent / "prompts", _HERE / "prompts"):
        if candidate.is_dir():
            return candidate
    raise FactweaveError("prompt folder not found (expected prompts/ beside the agent package)")


def read_prompt(name: str) -> str:
    """The text of ``prompts/<name>`` without its trailing newline."""
    path = prompts_dir() / name
    try:
        return path.read_text(encoding="utf-8").rstrip("\n")
    except FileNotFoundError:
        raise FactweaveError(f"prompt file {path} is missing") from None


@dataclass(frozen=True)
class Example:
    question: str
    reply: str


@dataclass(frozen=True)
class FewShotPrompt:
    """A system prompt and worked examples, rendered as chat messages or as plain text."""

    system: str
    examples: tuple[Example, ...]

    @classmethod
    def load(cls, folder: str = "refactx") -> FewShotPrompt:
        root = prompts_dir() / folder
        examples = []
        for path in sorted(root.glob("example-*.txt")):
            first, _, rest = path.read_text(encoding="utf-8").strip("\n").partition("\n")
            if not first.startswith("Question: ") or not rest.strip():
                raise FactweaveError(f"{path}:1: an example starts with 'Question: ' and has a reply after it")
            examples.append(Example(first[len("Question: ") :].strip(), rest.strip("\n")))
        return cls(read_prompt(f"{folder}/system.txt"), tuple(examples))

    def messages(self, question: str) -> list[dict[str, str]]:
        msgs = [{"role": "system", "content": self.system}]
        for ex in self.examples:
            msgs.append({"role": "user", "content": f"Question: {ex.question}"})
            msgs.append({"role": "assistant", "content": ex.reply})
        msgs.append({"role": "user", "content": f"Question: {question}"})
        return msgs

    def plain(self, question: str) -> str:
        parts = [self.system, ""]
        for ex in self.examples:
            parts += [f"Question: {ex.question}", ex.reply, ""]
        parts.append(f"Question: {question}")
        return "\n".join(parts) + "\n"
