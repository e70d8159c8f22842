"""A diagnostic service: answers a ping on a flow, proving the flow's queues work end to end."""
