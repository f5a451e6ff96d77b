"""The sampling core: samplers, traversal rules, randomness, backends, sessions.

Never imports Textual (a test checks it), so headless commands stay light.
"""
