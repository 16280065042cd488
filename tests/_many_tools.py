"""Many tools, as an editor's MCP servers bring them: 17 shaped like jupyter-ai's built-in
Jupyter server (names, descriptions and argument schemas of that size), then generated ones
up to any count. Side-effect-free handlers that say what they were asked."""

from __future__ import annotations

from typing import Any

from agentkit.tools import Tool
from agentkit.tools.registry import SchemaArgs, schema_args_model

PATH = {"type": "string", "description": "Path of the notebook, relative to the server root"}
CELL = {"type": "integer", "description": "Zero-based index of the cell in the notebook"}
SOURCE = {"type": "string", "description": "The full source text of the cell"}
KIND = {"type": "string", "enum": ["code", "markdown", "raw"], "description": "Cell type"}

JUPYTER: list[tuple[str, str, dict[str, Any], list[str]]] = [
    (
        "read_notebook",
        "Read a Jupyter notebook and return its cells with their sources, types "
        "and outputs, so the contents of the notebook can be inspected before editing it.",
        {"path": PATH},
        ["path"],
    ),
    (
        "insert_cell",
        "Insert a new cell into a Jupyter notebook at the given index, with the "
        "given source and cell type. Later cells move down by one.",
        {"path": PATH, "index": CELL, "source": SOURCE, "cell_type": KIND},
        ["path", "index"],
    ),
    (
        "edit_cell",
        "Replace the source of an existing cell of a Jupyter notebook; the cell keeps "
        "its type and id, and its outputs are cleared.",
        {"path": PATH, "index": CELL, "source": SOURCE},
        ["path", "index", "source"],
    ),
    (
        "delete_cell",
        "Delete the cell at the given index from a Jupyter notebook; later cells move up by one.",
        {"path": PATH, "index": CELL},
        ["path", "index"],
    ),
    (
        "execute_cell",
        "Execute one cell of a notebook in its kernel and return the outputs "
        "(stream text, results, errors with tracebacks).",
        {"path": PATH, "index": CELL},
        ["path", "index"],
    ),
    (
        "run_all_cells",
        "Execute every cell of a notebook in order in its kernel; stops at the "
        "first error and returns the outputs so far.",
        {"path": PATH},
        ["path"],
    ),
    (
        "get_cell_output",
        "Return the outputs of one cell of a notebook as they are stored, without running it.",
        {"path": PATH, "index": CELL},
        ["path", "index"],
    ),
    (
        "create_notebook",
        "Create a new empty Jupyter notebook at the given path with the given kernel.",
        {"path": PATH, "kernel": {"type": "string", "description": "Kernel name"}},
        ["path"],
    ),
    (
        "open_notebook",
        "Open a notebook in the JupyterLab interface so the user sees it in a new tab.",
        {"path": PATH},
        ["path"],
    ),
    ("save_notebook", "Save a notebook open in JupyterLab to disk.", {"path": PATH}, ["path"]),
    (
        "list_notebooks",
        "List the notebooks under a directory of the Jupyter server, with their "
        "sizes and modification times.",
        {"directory": {"type": "string", "description": "Directory to list"}},
        [],
    ),
    (
        "search_notebooks",
        "Search the sources of every notebook under a directory for a text "
        "and return the matching cells.",
        {
            "query": {"type": "string", "description": "Text to find"},
            "directory": {"type": "string", "description": "Where to search"},
        },
        ["query"],
    ),
    (
        "read_file",
        "Read a text file of the Jupyter server's contents and return its text.",
        {"path": {"type": "string", "description": "File path"}},
        ["path"],
    ),
    (
        "write_file",
        "Write a text file on the Jupyter server, replacing its contents.",
        {"path": {"type": "string", "description": "File path"}, "content": SOURCE},
        ["path", "content"],
    ),
    (
        "get_kernel_info",
        "Describe the kernel a notebook runs on: its name, language, state "
        "and the variables it holds.",
        {"path": PATH},
        ["path"],
    ),
    (
        "restart_kernel",
        "Restart the kernel of a notebook; every variable it holds is lost.",
        {"path": PATH},
        ["path"],
    ),
    (
        "interrupt_kernel",
        "Interrupt the code a notebook's kernel is running now.",
        {"path": PATH},
        ["path"],
    ),
]

WORDS = [
    "invoice",
    "weather",
    "calendar",
    "ticket",
    "playlist",
    "recipe",
    "parcel",
    "budget",
    "flight",
    "garden",
    "library",
    "vehicle",
    "meeting",
    "sensor",
    "contract",
    "warehouse",
    "lesson",
    "patient",
    "survey",
    "podcast",
    "coupon",
    "satellite",
    "orchard",
]


def _tool(
    name: str, description: str, properties: dict[str, Any], required: list[str]
) -> Tool[Any]:
    schema = {"type": "object", "properties": properties, "required": required}

    def handler(args: SchemaArgs) -> object:
        return {"tool": name, "arguments": args.arguments()}

    return Tool(
        name=name,
        description=description,
        args_model=schema_args_model(name, schema),
        handler=handler,
        side_effect=False,
        live_state=False,
        source="client",
    )


def many_tools(count: int) -> list[Tool[Any]]:
    """*count* tools: the Jupyter-shaped 17 first, then generated ones."""
    tools = [_tool(*spec) for spec in JUPYTER[:count]]
    for index in range(count - len(tools)):
        word = WORDS[index % len(WORDS)]
        name = f"lookup_{word}_{index}"
        description = (
            f"Look up a {word} record by its id and return its fields, history and "
            f"the people it belongs to, as stored in the {word} service."
        )
        properties = {
            "record_id": {"type": "string", "description": f"Id of the {word}"},
            "fields": {
                "type": "array",
                "items": {"type": "string"},
                "description": "Which fields to return (all when absent)",
            },
        }
        tools.append(_tool(name, description, properties, ["record_id"]))
    return tools
