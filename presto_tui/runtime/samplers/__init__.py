"""The three MH sampler families (PowerMH, EntropyCut, MultiTryMH), as objects."""
