"""ACEBench's Agent category (multi_turn and multi_step, en and zh), reimplemented from its documented behaviour.

The official harness is prompt-based: the agent writes `[ApiName(key='value')]` text, a Python sandbox of phone
and airline apps runs it, and the end state of those apps is compared with the ground truth. This package holds
the pure-Python core of that harness: the data (vendored under `data/`, MIT), the sandbox classes
(`scenarios/`), the executor with the reference's dispatch quirks (`executor.py`), a safe parser for the call
text (`calls.py`), the checker and the aggregation (`checker.py`) and the prompt protocol (`prompts.py`).
"""
