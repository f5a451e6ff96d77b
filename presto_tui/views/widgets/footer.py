"""The footer of every screen: compact, and fitted to the terminal's width.

Textual's footer cuts what does not fit mid-word ("esc cancel  p pau").  This one leaves out
whole keys instead, the least needed first (`LEAST_NEEDED`: each is in the help, F1), until the
rest fits; a wider terminal shows them again.
"""

from __future__ import annotations

from textual.widget import Widget
from textual.widgets import Footer
from textual.widgets._footer import FooterKey, FooterLabel, KeyGroup

# the actions whose keys give way first, in this order (a key pair's group by its first action)
LEAST_NEEDED = ("command_palette", "goto", "export", "overview", "search", "quit")


def action_of(item: Widget) -> str:
    if isinstance(item, KeyGroup):
        keys = list(item.query(FooterKey))
        return keys[0].action if keys else ""
    return item.action if isinstance(item, FooterKey) else ""


def width(item: Widget, footer: Widget) -> int:
    """The cells `item` takes in the footer: its content, padding and margins."""
    if isinstance(item, KeyGroup):
        inner = sum(width(key, footer) for key in item.children)
    else:
        inner = item.get_content_width(footer.size, footer.app.size)
    styles = item.styles
    return inner + styles.padding.width + styles.margin.width


class FittedFooter(Footer):
    def __init__(self, **kwargs) -> None:
        super().__init__(compact=True, **kwargs)

    async def recompose(self) -> None:
        await super().recompose()
        self.call_after_refresh(self.fit)

    def on_resize(self) -> None:
        if any(not item.display for item in self.children):  # wider now: what was left out may fit
            for item in self.children:
                item.display = True
        self.call_after_refresh(self.fit)

    def needed(self) -> int:
        """The cells the keys shown take, with their margins (measured from their content: a footer
        recomposed behind a dialog is not laid out until the dialog closes, and shows meanwhile)."""
        return sum(width(item, self) for item in self.children if item.display)

    def fit(self) -> None:
        """Leave out the least needed key still shown while the keys are wider than the footer (one
        per layout: the next pass measures again)."""
        if not self.is_attached or self.needed() <= self.size.width:
            return
        items = list(self.children)
        for action in LEAST_NEEDED:
            for i, item in enumerate(items):
                if item.display and action_of(item) == action:
                    item.display = False
                    if isinstance(item, KeyGroup) and i + 1 < len(items) and isinstance(items[i + 1], FooterLabel):
                        items[i + 1].display = False  # the group's words
                    self.call_after_refresh(self.fit)
                    return
