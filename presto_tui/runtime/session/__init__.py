"""Running chains: the session runner, its events and summary, the chat session."""
