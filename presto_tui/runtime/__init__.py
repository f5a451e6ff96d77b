"""The sampling runtime, in layers (each imports only those below it):

    session   run chains on an engine, emit events (runner, events, summary, chat)
    prefetch  PreSTO kernels, traversal rules, round trees
    samplers  the MH sampler families (PowerMH, EntropyCut, MultiTryMH)
    core      values, MH maths, cut laws, randomness, parameters (pure)
    engines   synthetic, transformers, vLLM (beside prefetch: only session-level code and
              the CLI choose an engine; kernels see the `core.engine.Engine` protocol)

Never imports Textual, logs or views (import-linter contracts in pyproject.toml).
"""
