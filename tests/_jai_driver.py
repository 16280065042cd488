"""Runs inside the jupyter-ai-acp-client virtualenv (see tests/test_acp_real_client.py):
jupyter-ai's own ACP client, ``JaiAcpClient``, drives ``agentkit acp`` as a real subprocess.

The persona stands in for jupyter-ai's chat (the Yjs document): messages live in a dict, and
a permission request is answered the way the chat's Allow button does, through
``JaiAcpClient.resolve_permission``. Prints one JSON object of what happened.

    python _jai_driver.py PHASE AGENTKIT DATA_DIR AGENT CWD SESSION [ARGS…]

PHASE: ``new`` (initialize, session/new, a question, then a consent allowed), ``load``
(session/load of SESSION in a new process, then a prompt) or ``fail`` (a startup error).
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys
from types import SimpleNamespace
from typing import Any

from jupyter_ai_acp_client.default_acp_client import JaiAcpClient
from jupyterlab_chat.models import Message

logging.basicConfig(level=logging.WARNING, stream=sys.stderr)


class Chat:
    """The chat document: messages by id."""

    def __init__(self) -> None:
        self.messages: dict[str, Message] = {}

    def add_message(self, new: Any, trigger_actions: Any = None) -> str:
        message_id = f"m{len(self.messages) + 1}"
        self.messages[message_id] = Message(
            id=message_id, body=new.body, time=0.0, sender=new.sender, raw_time=False
        )
        return message_id

    def get_message(self, message_id: str) -> Message | None:
        return self.messages.get(message_id)

    def update_message(
        self, message: Message, append: bool = False, trigger_actions: Any = None
    ) -> None:
        old = self.messages.get(message.id)
        if append and old is not None:
            old.body += message.body
        else:
            self.messages[message.id] = message


class Persona:
    """What JaiAcpClient reads and calls on a persona; the rest are no-ops."""

    def __init__(self, cwd: str) -> None:
        self.id = "agentkit-persona"
        self.chat = Chat()
        self.log = logging.getLogger("persona")
        self.parent = SimpleNamespace(root_dir=cwd)
        self._cwd = cwd

    def get_chat_dir(self) -> str:
        return self._cwd

    def get_mcp_settings(self) -> None:
        return None

    def __getattr__(self, name: str) -> Any:
        return lambda *args, **kwargs: None

    def text(self) -> str:
        return "\n".join(message.body for message in self.chat.messages.values())


async def settled_text(client: JaiAcpClient, persona: Persona) -> str:
    """The persona's chat once the client has handled every update it has received. agentkit
    sends every update of a prompt before the prompt's response, and the client's ACP library
    reads them in that order, but it resolves a response at once while it hands each update
    to a queue whose worker runs it as a task of its own (the race the issue names for
    replays): wait until that queue is drained and those tasks are done. These are private
    parts of agent-client-protocol 0.11 (``Connection._queue``, its ``TaskSupervisor``), the
    version jupyter-ai-acp-client 0.3.3 pins; no timing is assumed."""
    connection = (await client.get_connection())._conn
    await connection._queue.join()  # every update received so far has its task
    handling = [
        task
        for task in connection._tasks._tasks
        if task.get_name() == "acp.Dispatcher.notification"
    ]
    await asyncio.gather(*handling)  # the runner logs a handler's error; it never raises
    return persona.text()


async def answer_permissions(
    client: JaiAcpClient, asked: list[dict[str, Any]], option: str
) -> None:
    """Click the button: resolve every pending request with *option*."""
    manager = client._permission_manager
    while True:
        for (session_id, call_id), pending in list(manager._pending.items()):
            if not pending.future.done():
                asked.append(
                    {"toolCallId": call_id, "options": [o.option_id for o in pending.options]}
                )
                client.resolve_permission(session_id, call_id, option)
        await asyncio.sleep(0.02)


async def start(argv: list[str]) -> tuple[JaiAcpClient, asyncio.subprocess.Process]:
    process = await asyncio.create_subprocess_exec(
        *argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE
    )
    client = JaiAcpClient(agent_subprocess=process, event_loop=asyncio.get_running_loop())
    return client, process


async def main() -> dict[str, Any]:
    phase, agentkit, data_dir, agent, cwd, session_id, *args = sys.argv[1:]
    argv = [agentkit, "--data-dir", data_dir, "acp", agent, *args]
    client, process = await start(argv)
    out: dict[str, Any] = {"phase": phase}
    persona = Persona(cwd)
    if phase == "fail":
        try:
            await client.get_connection()
            out["connected"] = True
        except Exception as error:  # what jupyter-ai shows in the chat: the exception's text
            out["error"] = f"{type(error).__name__}: {error}"
        out["exit"] = await asyncio.wait_for(process.wait(), 60)
        return out
    caps = await client.get_agent_capabilities()
    out["loadSession"] = bool(caps.load_session)
    asked: list[dict[str, Any]] = []
    clicking = asyncio.ensure_future(answer_permissions(client, asked, "allow"))
    try:
        if phase == "new":
            session = await client.create_session(persona)
            sid = session.session_id
            first = await client.prompt_and_reply(sid, "create a trader on my binance account")
            out["first"] = {"stop": first.stop_reason, "text": await settled_text(client, persona)}
            second = await client.prompt_and_reply(sid, "Alpha")
            out["second"] = {
                "stop": second.stop_reason,
                "text": await settled_text(client, persona),
            }
        else:  # load after a restart
            sid = session_id
            await client.load_session(persona, sid)
            out["replayed"] = await settled_text(client, persona)
            reply = await client.prompt_and_reply(sid, "what did we just do?")
            out["after_load"] = {
                "stop": reply.stop_reason,
                "text": await settled_text(client, persona),
                "meta": reply.field_meta,
            }
        out["session"] = sid
        out["permissions"] = asked
    finally:
        clicking.cancel()
        assert process.stdin is not None
        process.stdin.close()
        out["exit"] = await asyncio.wait_for(process.wait(), 60)
    return out


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main())))
