"""The methods `presto-tui lm-eval --methods` runs: `eval`'s method language, one parser for both.

    METHOD := lowtemp | bon[:N] | smc[:P] | sps[:M] | SAMPLER | SAMPLER+RULE[/INPUTS][:N]

(see `presto_tui.eval.methods`): a method is a SamplerParams over the command's own flags.
"""

from presto_tui.eval.methods import GRAMMAR, Method, parse_method, parse_methods

__all__ = ["GRAMMAR", "Method", "parse_method", "parse_methods"]
