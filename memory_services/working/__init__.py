"""Working memory: compress an invocation's ReAct steps to a token threshold."""
