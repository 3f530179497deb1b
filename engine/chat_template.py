"""spadework's tool-aware ChatML template: how the embedded model (and the byte tokenizer) see tools, calls and
their results. One string, read by the embedded server, the tokenizer directories built from a GGUF, the
vLLM checkpoint and the engine's own `tokens`-mode renderer, so all of them render a conversation alike."""

# Hugging Face renders templates with trim_blocks, which drops a newline right after a block tag, so
# such newlines are written as {{ nl }}.
CHATML_WITH_TOOLS = (
    "{% set nl = '\\n' %}"
    "{% if messages[0].role == 'system' %}{% set system = messages[0].content %}{% set rest = messages[1:] %}"
    "{% else %}{% set system = '' %}{% set rest = messages %}{% endif %}"
    "{% if system or tools %}<|im_start|>system\n{{ system }}"
    "{% if tools %}{{ nl }}{{ nl }}# Tools{{ nl }}<tools>"
    "{% for tool in tools %}{{ nl }}{{ tool | tojson }}{% endfor %}{{ nl }}</tools>{{ nl }}"
    'Call a tool with <tool_call>{"name": <name>, "arguments": {...}}</tool_call>.'
    "{% endif %}<|im_end|>{{ nl }}{% endif %}"
    "{% for message in rest %}"
    "{% if message.role == 'tool' %}<|im_start|>user\n<tool_response>\n{{ message.content }}\n</tool_response>"
    "<|im_end|>{{ nl }}"
    "{% else %}<|im_start|>{{ message.role }}\n{{ message.content or '' }}"
    "{% for call in message.tool_calls or [] %}<tool_call>{{ nl }}"
    '{"name": "{{ call.function.name }}", "arguments": '
    "{% if call.function.arguments is string %}{{ call.function.arguments }}"
    "{% else %}{{ call.function.arguments | tojson }}{% endif %}}{{ nl }}</tool_call>"
    "{% endfor %}<|im_end|>{{ nl }}{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant{{ nl }}{% endif %}"
)
