"""The agent-loop engine: plays toolworld episodes through OpenAI-compatible endpoints, many at once.

`engine.rollout.run_rollout` is the entry point; `engine.store` holds what it produces.
"""
