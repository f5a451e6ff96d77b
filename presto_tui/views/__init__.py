"""The Textual app (the only package that may import Textual), by concern:

- `state/`: what the app shows and every computation on it, pure (no Textual: a contract);
- `widgets/`: the parts screens are made of;
- `screens/`: the full screens (the round view, chat, replay, and what they open);
- `dialogs/`: the modal dialogs;
- `app.py`: the app and its two entry points, `chat_app` and `replay_app`.
"""
