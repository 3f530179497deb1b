# first, in a shell: spadework serve --port 8712
import asyncio
import os

import verifiers.v1 as vf
from verifiers.v1.cli.eval.runner import run_eval
from verifiers.v1.configs.cli.eval import EvalConfig

from toolworlds.adapters.verifiers import load_environment

env = load_environment("banking", tasks=2, max_turns=4)  # two tasks of the world; the reward is its grade
os.environ.setdefault("LOCAL_API_KEY", "none")  # the embedded model's server takes any key
client = vf.EvalClientConfig(base_url="http://127.0.0.1:8712/v1", api_key_var="LOCAL_API_KEY")
sampling = vf.SamplingConfig(max_tokens=256)
config = EvalConfig(env=env.config, model="smollm2", client=client, sampling=sampling, num_rollouts=1, push=False,
                    rich=None, output_dir="runs/verifiers")  # verifiers' own evaluation, what vf-eval runs  # fmt: skip
for episode in asyncio.run(run_eval(config)):
    for trace in episode.traces:
        print(trace.task.data.id, trace.reward, trace.info["scorecard"])  # the grade, and what it checked
