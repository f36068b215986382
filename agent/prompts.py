"""Loading prompts from the ``prompts/`` folder (one home for every prompt text)."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
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
    facts: tuple[str, ...] = ()  # the facts listed above the question (listed-facts prompts)


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
            text = path.read_text(encoding="utf-8").strip("\n")
            facts: list[str] = []
            if text.startswith("Facts:"):  # a listed-facts example: "Facts:", one "[n] fact" a line, then the question
                head, _, text = text.partition("\nQuestion: ")
                facts = [line.split("] ", 1)[1] for line in head.splitlines()[1:] if "] " in line]
                text = "Question: " + text
            first, _, rest = text.partition("\n")
            if not first.startswith("Question: ") or not rest.strip():
                raise FactweaveError(f"{path}:1: an example starts with 'Question: ' (after an optional "
                                     "'Facts:' block) and has a reply after it")
            examples.append(Example(first[len("Question: ") :].strip(), rest.strip("\n"), tuple(facts)))
        return cls(read_prompt(f"{folder}/system.txt"), tuple(examples))

    def messages(self, question: str | Sequence[Mapping[str, str]]) -> list[dict[str, str]]:
        """The chat messages for ``question``: the system prompt, the worked examples, then the
        question, or a whole conversation (``[{"role", "content"}, ...]``: a system message of
        its own is appended to ours, each user turn reads ``Question: ...``)."""
        turns = [{"role": "user", "content": question}] if isinstance(question, str) else list(question)
        system = "\n\n".join([self.system, *(t["content"] for t in turns if t["role"] == "system")])
        msgs = [{"role": "system", "content": system}]
        for ex in self.examples:
            msgs.append({"role": "user", "content": listed_question(ex.question, ex.facts) if ex.facts
                         else f"Question: {ex.question}"})
            msgs.append({"role": "assistant", "content": ex.reply})
        for turn in turns:
            if turn["role"] == "user":
                msgs.append({"role": "user", "content": _as_question(turn["content"])})
            elif turn["role"] == "assistant":
                msgs.append({"role": "assistant", "content": turn["content"]})
        if msgs[-1]["role"] != "user":
            raise FactweaveError("the conversation must end with a user message (the question)")
        return msgs

    def plain(self, question: str | Sequence[Mapping[str, str]]) -> str:
        """The same as :meth:`messages`, as plain text for tokenizers without a chat template."""
        msgs = self.messages(question)
        parts = [msgs[0]["content"], ""]
        for msg in msgs[1:]:
            parts.append(msg["content"] if msg["role"] == "user" else msg["content"] + "\n")
        return "\n".join(parts) + "\n"


def listed_question(question: str, facts: Sequence[str]) -> str:
    """A question with the facts listed above it, numbered, as the listed-facts prompts read it."""
    listed = "\n".join(f"[{i}] {text}" for i, text in enumerate(facts, 1)) or "(none)"
    return f"Facts:\n{listed}\nQuestion: {question.strip()}"


def _as_question(text: str) -> str:
    text = text.strip()
    return text if text.lower().startswith(("question:", "facts:")) else f"Question: {text}"


def render_prompt(tokenizer, prompt: FewShotPrompt, question: str | Sequence[Mapping[str, str]]) -> str:
    """The text a model is given for ``question``: ``prompt``'s messages through the tokenizer's
    chat template (with the assistant's turn opened), or the plain text when it has none."""
    if getattr(tokenizer, "chat_template", None):
        return tokenizer.apply_chat_template(prompt.messages(question), tokenize=False, add_generation_prompt=True)
    return prompt.plain(question)
