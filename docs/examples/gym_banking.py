import gymnasium

import toolworlds.adapters.gym  # noqa: F401  # registers spadework/<world>

env = gymnasium.make("spadework/banking")
observation, info = env.reset(seed=0)  # the task; info["tools"]: the tools in OpenAI's format
print(observation)
observation, reward, terminated, truncated, info = env.step(
    '{"name": "find_customer", "arguments": {"name": "Sami Lindqvist"}}'
)
print(observation, reward)  # the tool's result as JSON; the reward is the grade when the episode ends
env.close()
