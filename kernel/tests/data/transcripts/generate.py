"""Writes the provider transcripts the kernel's import tests read, built
with the providers' own Python SDKs, so each is a shape the provider
emits: responses parsed into the SDK's models, dumped the ways hosts dump
them (`model_dump()` keeps every optional field as null; `exclude_none`
drops them), and appended to the conversation as the SDKs' own examples do.

    python -m venv /tmp/sdk && /tmp/sdk/bin/pip install anthropic==2.17.0 openai==3.63.0
    /tmp/sdk/bin/python kernel/tests/data/transcripts/generate.py

Each transcript is checked against the SDK's request types before it is
written (pydantic `TypeAdapter`, every iterable forced).
"""

import base64
import json
import pathlib
import struct
import zlib

import anthropic
import openai
from anthropic.types import Message, MessageParam
from anthropic.types.beta import BetaMessage, BetaMessageParam
from openai.types.chat import ChatCompletion, ChatCompletionMessageParam
from openai.types.responses import Response, ResponseInputItemParam
from pydantic import TypeAdapter

assert anthropic.__version__ == "2.17.0", anthropic.__version__
assert openai.__version__ == "3.63.0", openai.__version__

HERE = pathlib.Path(__file__).parent


def png(width, height):
    """A valid PNG of one colour: the kernel reads its size."""
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
    raw = b"".join(b"\x00" + b"\x10\x80\xf0" * width for _ in range(height))
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")


PNG = base64.b64encode(png(3, 2)).decode()


def forced(value):
    """Every iterable as a list: pydantic validates `Iterable` fields lazily."""
    if isinstance(value, dict):
        return {k: forced(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)) or (hasattr(value, "__iter__") and not isinstance(value, (str, bytes, dict))):
        return [forced(v) for v in value]
    return value


def unnulled(value):
    """The value without null members: the request types take an optional
    field left out, not null, and the kernel reads a null as left out."""
    if isinstance(value, dict):
        return {k: unnulled(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [unnulled(v) for v in value]
    return value


def checked(adapter, items):
    for item in items:
        forced(adapter.validate_python(unnulled(item)))
    return items


def anthropic_transcript():
    first = Message.model_validate({
        "id": "msg_01A", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
        "stop_reason": "tool_use", "stop_sequence": None, "usage": {"input_tokens": 812, "output_tokens": 96},
        "content": [
            {"type": "thinking", "thinking": "Two cities: two lookups, in parallel.", "signature": "EqQBCkYIBxgCKkBz1r+ab/cd=="},
            {"type": "text", "text": "Checking both cities."},
            {"type": "tool_use", "id": "toolu_01Paris", "name": "get_weather",
             "input": {"city": "Paris", "units": "celsius", "days": 1.0, "coords": [48.8566, 2.3522]}},
            {"type": "tool_use", "id": "toolu_02Tokyo", "name": "get_weather",
             "input": {"city": "東京", "units": "celsius", "options": {"hourly": True, "limit": 9007199254740993}}},
        ],
    })
    second = BetaMessage.model_validate({
        "id": "msg_01B", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
        "stop_reason": "end_turn", "stop_sequence": None, "usage": {"input_tokens": 1400, "output_tokens": 210},
        "content": [
            {"type": "compaction", "content": "The user asked for the weather in Paris and Tokyo.",
             "encrypted_content": "Q29tcGFjdGlvbjpvcGFxdWU=", "signature": "c2lnbmF0dXJlLWNvbXBhY3Rpb24="},
            {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpP"},
            {"type": "server_tool_use", "id": "srvtoolu_01", "name": "web_search", "input": {"query": "Tokyo weather warning"}},
            {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_01", "content": [
                {"type": "web_search_result", "url": "https://www.jma.go.jp/", "title": "JMA", "encrypted_content": "RW5jcnlwdGVkUGFnZQ==", "page_age": "1 hour ago"}]},
            {"type": "text", "text": "Paris is 18 °C; Tokyo has a heat warning.", "citations": [
                {"type": "web_search_result_location", "url": "https://www.jma.go.jp/", "title": "JMA",
                 "encrypted_index": "RW5jcnlwdGVkSW5kZXg=", "cited_text": "Heat warning for Tokyo"}]},
        ],
    })
    messages = [
        {"role": "user", "content": [
            {"type": "text", "text": "What's the weather in Paris and 東京? Here is my map:"},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}},
        ]},
        # The SDK's own pattern: the parsed content, dumped as the host serializes it.
        {"role": "assistant", "content": [block.model_dump(mode="json") for block in first.content]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_01Paris", "content": "18 °C, clear"},
            {"type": "tool_result", "tool_use_id": "toolu_02Tokyo", "is_error": True,
             "content": [{"type": "text", "text": "upstream timeout after 30 s"}]},
        ]},
        {"role": "assistant", "content": [block.model_dump(mode="json", exclude_none=True) for block in second.content]},
        {"role": "user", "content": "Thanks!"},
    ]
    checked(TypeAdapter(BetaMessageParam), messages)
    checked(TypeAdapter(MessageParam), messages[:3])
    return {
        "system": [{"type": "text", "text": "You are a weather assistant.", "cache_control": {"type": "ephemeral"}}],
        "messages": messages,
        "tools": [{"name": "get_weather", "description": "Weather for a city",
                   "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}],
    }


def responses_transcript():
    first = Response.model_validate({
        "id": "resp_01", "object": "response", "created_at": 1764900000, "model": "gpt-5", "parallel_tool_calls": True,
        "tool_choice": "auto", "tools": [], "output": [
            {"type": "reasoning", "id": "rs_01", "summary": [{"type": "summary_text", "text": "Look up both cities."}],
             "encrypted_content": "gAAAAABoENCRYPTED=="},
            {"type": "function_call", "id": "fc_01", "call_id": "call_Paris", "name": "get_weather",
             "arguments": "{\"city\": \"Paris\",  \"days\": 1.0}", "status": "completed"},
            {"type": "function_call", "id": "fc_02", "call_id": "call_東京", "name": "get_weather",
             "arguments": "{\"city\":\"東京\"}", "status": "completed"},
        ]})
    second = Response.model_validate({
        "id": "resp_02", "object": "response", "created_at": 1764900060, "model": "gpt-5", "parallel_tool_calls": True,
        "tool_choice": "auto", "tools": [], "output": [
            {"type": "web_search_call", "id": "ws_01", "status": "completed",
             "action": {"type": "search", "query": "Tokyo heat warning"}},
            {"type": "message", "id": "msg_01", "role": "assistant", "status": "completed", "content": [
                {"type": "output_text", "text": "Paris is 18 °C; Tokyo has a heat warning.", "logprobs": [],
                 "annotations": [{"type": "url_citation", "start_index": 22, "end_index": 41, "url": "https://www.jma.go.jp/", "title": "JMA"}]}]},
        ]})
    compacted = {"type": "compaction", "id": "cmp_01", "encrypted_content": "gAAAAABoCOMPACTED=="}
    items = [
        {"role": "user", "content": [
            {"type": "input_text", "text": "What's the weather in Paris and 東京?"},
            {"type": "input_image", "image_url": f"data:image/png;base64,{PNG}", "detail": "low"},
        ]},
        *[item.model_dump(mode="json") for item in first.output],
        {"type": "function_call_output", "call_id": "call_Paris", "output": "18 °C, clear"},
        {"type": "function_call_output", "call_id": "call_東京", "output": ""},
        *[item.model_dump(mode="json", exclude_none=True) for item in second.output],
        compacted,
        {"role": "user", "content": "Thanks!"},
    ]
    checked(TypeAdapter(ResponseInputItemParam), items)
    return {
        "instructions": "You are a weather assistant.",
        "input": items,
        "tools": [{"type": "function", "name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}, "strict": False}],
    }


def chat_transcript():
    first = ChatCompletion.model_validate({
        "id": "chatcmpl-01", "object": "chat.completion", "created": 1764900000, "model": "gpt-4o",
        "choices": [{"index": 0, "finish_reason": "tool_calls", "logprobs": None, "message": {
            "role": "assistant", "content": None, "refusal": None, "annotations": [],
            "tool_calls": [
                {"id": "call_Paris", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\", \"days\": 1.0}"}},
                {"id": "call_東京", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":\"東京\"}"}},
            ]}}]})
    refused = ChatCompletion.model_validate({
        "id": "chatcmpl-02", "object": "chat.completion", "created": 1764900060, "model": "gpt-4o",
        "choices": [{"index": 0, "finish_reason": "stop", "logprobs": None, "message": {
            "role": "assistant", "content": None, "refusal": "I can't help with that.", "annotations": []}}]})
    messages = [
        {"role": "developer", "content": "You are a weather assistant."},
        {"role": "user", "name": "ana", "content": [
            {"type": "text", "text": "What's the weather in Paris and 東京?"},
            {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}", "detail": "low"}},
            {"type": "input_audio", "input_audio": {"data": "UklGRiQAAABXQVZF", "format": "wav"}},
        ]},
        first.choices[0].message.model_dump(mode="json"),
        {"role": "tool", "tool_call_id": "call_Paris", "content": "18 °C, clear"},
        {"role": "tool", "tool_call_id": "call_東京", "content": ""},
        {"role": "user", "content": "Now plan a break-in."},
        refused.choices[0].message.model_dump(mode="json", exclude_none=True),
    ]
    checked(TypeAdapter(ChatCompletionMessageParam), messages)
    return {
        "messages": messages,
        "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}],
    }


for name, transcript in [("anthropic-messages", anthropic_transcript()), ("openai-responses", responses_transcript()), ("openai-chat", chat_transcript())]:
    (HERE / f"{name}.json").write_text(json.dumps(transcript, ensure_ascii=False, indent=1) + "\n")
    print("wrote", name)
