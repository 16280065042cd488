"""The attribute, event and metric names agentkit's spans use, in one place.

They follow the OpenTelemetry GenAI semantic conventions (status: development; agent spans,
model spans, ``execute_tool``, MCP client spans, ``gen_ai.evaluation.result`` events, the
``gen_ai.client.*`` metrics) where a name exists there, and use the ``agentkit.`` namespace
where none does (the purpose of a model call, a turn's scenario and status, consent
requests and questions, a plan's goal and size, an eval run's outcome). Every span also
declares its OpenInference kind (``openinference.span.kind``: ``AGENT``, ``LLM``, ``TOOL``,
``EMBEDDING``, else ``CHAIN``) and, on agent and plan spans with content capture on,
``input.value`` / ``output.value``, which OpenInference-aware viewers (Phoenix, Arize) show
as a span's input and output. Where the conventions have no provider value (the embedded model,
agent CLIs, the scripted test model), ``gen_ai.provider.name`` takes agentkit's own:
:data:`PROVIDERS`.
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "AGENT_ID",
    "AGENT_NAME",
    "CONSENT_EVENT",
    "CONTENT_KEYS",
    "CONVERSATION_ID",
    "ERROR_TYPE",
    "EVALUATION_EVENT",
    "EVALUATION_EXPLANATION",
    "EVALUATION_NAME",
    "EVALUATION_SCORE_LABEL",
    "EVALUATION_SCORE_VALUE",
    "EVAL_CHECKS",
    "EVAL_CHECKS_FAILED",
    "EVAL_OUTCOME",
    "EVAL_PASSED",
    "EVAL_VERDICT",
    "INPUT_MESSAGES",
    "INPUT_MIME_TYPE",
    "INPUT_VALUE",
    "JSONRPC_REQUEST_ID",
    "MCP_METHOD_NAME",
    "MCP_PROTOCOL_VERSION",
    "MCP_SESSION_ID",
    "MEMORY_STORE_NAME",
    "MEMORY_UPDATE_STRATEGY",
    "MESSAGE_ID",
    "METRIC_OPERATION_DURATION",
    "METRIC_TOKEN_USAGE",
    "NETWORK_TRANSPORT",
    "OPENINFERENCE_SPAN_KIND",
    "OPERATION_NAME",
    "OUTPUT_MESSAGES",
    "OUTPUT_MIME_TYPE",
    "OUTPUT_VALUE",
    "PLAN_DECISION",
    "PLAN_GOAL",
    "PLAN_STEPS",
    "PROVIDERS",
    "PROVIDER_NAME",
    "PURPOSE",
    "QUESTION_EVENT",
    "REQUEST_MODEL",
    "REQUEST_STREAM",
    "RESPONSE_FINISH_REASONS",
    "RESPONSE_MODEL",
    "SCENARIO",
    "SPAN_KINDS",
    "SYSTEM_INSTRUCTIONS",
    "TOKEN_TYPE",
    "TOOL_CALL_ARGUMENTS",
    "TOOL_CALL_ID",
    "TOOL_CALL_RESULT",
    "TOOL_NAME",
    "TOOL_TYPE",
    "TURN_STATUS",
    "USAGE_INPUT_TOKENS",
    "USAGE_OUTPUT_TOKENS",
    "WORKFLOW_NAME",
]

# -- GenAI (semantic conventions) ------------------------------------------------------------
OPERATION_NAME: Final = "gen_ai.operation.name"
PROVIDER_NAME: Final = "gen_ai.provider.name"
AGENT_ID: Final = "gen_ai.agent.id"
AGENT_NAME: Final = "gen_ai.agent.name"
CONVERSATION_ID: Final = "gen_ai.conversation.id"
WORKFLOW_NAME: Final = "gen_ai.workflow.name"
REQUEST_MODEL: Final = "gen_ai.request.model"
REQUEST_STREAM: Final = "gen_ai.request.stream"
RESPONSE_MODEL: Final = "gen_ai.response.model"
RESPONSE_FINISH_REASONS: Final = "gen_ai.response.finish_reasons"
USAGE_INPUT_TOKENS: Final = "gen_ai.usage.input_tokens"
USAGE_OUTPUT_TOKENS: Final = "gen_ai.usage.output_tokens"
TOKEN_TYPE: Final = "gen_ai.token.type"  # noqa: S105
TOOL_NAME: Final = "gen_ai.tool.name"
TOOL_CALL_ID: Final = "gen_ai.tool.call.id"
TOOL_TYPE: Final = "gen_ai.tool.type"
MEMORY_STORE_NAME: Final = "gen_ai.memory.store.name"
MEMORY_UPDATE_STRATEGY: Final = "gen_ai.memory.update.strategy"
ERROR_TYPE: Final = "error.type"

#: opt-in contents (only with OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true)
INPUT_MESSAGES: Final = "gen_ai.input.messages"
OUTPUT_MESSAGES: Final = "gen_ai.output.messages"
SYSTEM_INSTRUCTIONS: Final = "gen_ai.system_instructions"
TOOL_CALL_ARGUMENTS: Final = "gen_ai.tool.call.arguments"
TOOL_CALL_RESULT: Final = "gen_ai.tool.call.result"
CONTENT_KEYS: Final = frozenset(
    {INPUT_MESSAGES, OUTPUT_MESSAGES, SYSTEM_INSTRUCTIONS, TOOL_CALL_ARGUMENTS, TOOL_CALL_RESULT}
)

EVALUATION_EVENT: Final = "gen_ai.evaluation.result"
EVALUATION_NAME: Final = "gen_ai.evaluation.name"
EVALUATION_SCORE_VALUE: Final = "gen_ai.evaluation.score.value"
EVALUATION_SCORE_LABEL: Final = "gen_ai.evaluation.score.label"
EVALUATION_EXPLANATION: Final = "gen_ai.evaluation.explanation"

METRIC_TOKEN_USAGE: Final = "gen_ai.client.token.usage"  # noqa: S105
METRIC_OPERATION_DURATION: Final = "gen_ai.client.operation.duration"

# -- MCP (semantic conventions) --------------------------------------------------------------
MCP_METHOD_NAME: Final = "mcp.method.name"
MCP_SESSION_ID: Final = "mcp.session.id"
MCP_PROTOCOL_VERSION: Final = "mcp.protocol.version"
JSONRPC_REQUEST_ID: Final = "jsonrpc.request.id"
NETWORK_TRANSPORT: Final = "network.transport"

# -- OpenInference (what Phoenix and Arize read besides the GenAI names) ----------------------
OPENINFERENCE_SPAN_KIND: Final = "openinference.span.kind"
INPUT_VALUE: Final = "input.value"
INPUT_MIME_TYPE: Final = "input.mime_type"
OUTPUT_VALUE: Final = "output.value"
OUTPUT_MIME_TYPE: Final = "output.mime_type"
#: ``openinference.span.kind`` by ``gen_ai.operation.name``; any other span is a ``CHAIN``
SPAN_KINDS: Final = {
    "invoke_agent": "AGENT",
    "create_agent": "AGENT",
    "chat": "LLM",
    "text_completion": "LLM",
    "generate_content": "LLM",
    "execute_tool": "TOOL",
    "embeddings": "EMBEDDING",
}

# -- agentkit's own --------------------------------------------------------------------------
PURPOSE: Final = "agentkit.purpose"
SCENARIO: Final = "agentkit.scenario"
MESSAGE_ID: Final = "agentkit.message_id"
TURN_STATUS: Final = "agentkit.turn.status"
#: span events on the agent span: a consent request (a side-effect tool waits for the user's
#: decision) and a question (``ask_user``)
CONSENT_EVENT: Final = "agentkit.consent_request"
QUESTION_EVENT: Final = "agentkit.question"
#: a plan span's goal (content: only with capture on), its number of steps, and a replan's
#: decision (``continue``, ``replace_remaining``, ``finish``, ``ask_user``)
PLAN_GOAL: Final = "agentkit.plan.goal"
PLAN_STEPS: Final = "agentkit.plan.steps"
PLAN_DECISION: Final = "agentkit.plan.decision"
#: an eval run's outcome on its span: passed or not, ``outcome`` (passed, failed, error,
#: budget), how many checks ran and failed, and ``agentkit.eval.verdict.{kind}`` per judged
#: kind (an expectation kind, a scenario source's own scorer)
EVAL_PASSED: Final = "agentkit.eval.passed"
EVAL_OUTCOME: Final = "agentkit.eval.outcome"
EVAL_CHECKS: Final = "agentkit.eval.checks"
EVAL_CHECKS_FAILED: Final = "agentkit.eval.checks_failed"
EVAL_VERDICT: Final = "agentkit.eval.verdict"

#: ``gen_ai.provider.name`` per model backend (the conventions' value where one fits)
PROVIDERS: Final = {
    "llama": "llama_cpp",
    "openai": "openai",
    "acp": "acp",
    "claude-cli": "claude_cli",
    "scripted": "scripted",
    "function": "function",
    "record": "recorded",
    "replay": "replay",
}
