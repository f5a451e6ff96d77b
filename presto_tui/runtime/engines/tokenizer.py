"""Text <-> token ids for the real backends, through the model's own tokenizer.

Prompts go through the chat template (unless turned off) and then travel as
token ids end to end: a prefix is never decoded and re-encoded.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path


class ChatTokenizer:
    def __init__(self, model_dir: Path, chat_template: bool = True):
        from transformers import AutoTokenizer

        self.tok = AutoTokenizer.from_pretrained(str(model_dir))
        self.use_chat = chat_template and bool(getattr(self.tok, "chat_template", None))
        self.eos_id = self.tok.eos_token_id
        self._pieces: dict[int, str] = {}

    def encode_prompt(self, text: str, history: Sequence[tuple[str, str]] = ()) -> list[int]:
        """Token ids of a prompt; `history` holds earlier (user, assistant) turns of a chat."""
        if self.use_chat:
            messages = []
            for user, assistant in history:
                messages += [{"role": "user", "content": user}, {"role": "assistant", "content": assistant}]
            messages.append({"role": "user", "content": text})
            ids = self.tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
            if isinstance(ids, dict) or hasattr(ids, "input_ids"):  # BatchEncoding in some versions
                ids = ids["input_ids"]
            return list(ids)
        earlier = "".join(u + "\n" + a + "\n" for u, a in history)
        return list(self.tok.encode(earlier + text))

    def decode(self, token_ids: Sequence[int]) -> str:
        return self.tok.decode(list(token_ids), skip_special_tokens=False)

    def token_pieces(self, token_ids: Sequence[int]) -> list[str]:
        out = []
        for t in token_ids:
            if t not in self._pieces:
                self._pieces[t] = self.tok.decode([t], skip_special_tokens=False)
            out.append(self._pieces[t])
        return out


class TextMixin:
    """The text half of the Backend protocol for engines that hold a `ChatTokenizer` as `text`."""

    text: ChatTokenizer

    def encode_prompt(self, text: str, history: Sequence[tuple[str, str]] = ()) -> list[int]:
        return self.text.encode_prompt(text, history)

    def decode(self, token_ids: Sequence[int]) -> str:
        return self.text.decode(token_ids)

    def token_pieces(self, token_ids: Sequence[int]) -> list[str]:
        return self.text.token_pieces(token_ids)
