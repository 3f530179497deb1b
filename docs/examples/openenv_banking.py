# first, in a shell: spadework toolworld serve banking --openenv --port 8711
from openenv.core import GenericEnvClient

with GenericEnvClient(base_url="http://127.0.0.1:8711").sync() as env:
    task = env.reset(seed=0).observation  # reset(seed=0, hinted=True) also shows the privileged hint
    print(task["instruction"])
    call = {"type": "call_tool", "tool_name": "find_customer", "arguments": {"name": "Sami Lindqvist"}}
    print(env.step(call).observation["result"]["data"])  # the tool's result, as the world returns it
    ended = env.step({"type": "call_tool", "tool_name": "finish", "arguments": {}})
    print(ended.done, ended.reward)  # True, and the world's grade of the state reached
