"""Self-play training: the designer and the agent, one policy, GRPO through TRL (see README.md)."""
