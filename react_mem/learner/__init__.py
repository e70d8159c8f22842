"""The memory learner: summaries, facts and episodes written off the agent's reply path."""
