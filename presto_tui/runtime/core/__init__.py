"""The pure sampling core: values, MH maths, cut laws, randomness, parameters, the classifier.

Imports no engine, no session code and no Textual (import-linter contracts in pyproject.toml).
"""
