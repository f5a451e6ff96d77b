"""JSONL session traces: schema, writer, reader and offline statistics (no Textual)."""
