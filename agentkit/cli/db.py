"""The PostgreSQL store's schema: ``agentkit db upgrade`` applies its migrations on their own.

Opening a PostgreSQL store applies them too (``serve``, ``send``, … with ``--store``); this
command is for deployments that migrate before they start replicas, or check what is applied.
"""

from __future__ import annotations

import typer

from agentkit._extras import require
from agentkit.cli._app import StoreOption, app, clean_errors
from agentkit.errors import UsageError

__all__ = ["db_app", "upgrade_command"]

db_app = typer.Typer(
    name="db", help="The PostgreSQL store's schema (named migrations).", no_args_is_help=True
)
app.add_typer(db_app)


@db_app.command("upgrade")
def upgrade_command(store: StoreOption = None) -> None:
    """Apply the migrations the database lacks, in order; print what was applied."""
    with clean_errors():
        from agentkit.store.choice import FILES, resolve_store_spec

        chosen = resolve_store_spec(store)
        if chosen == FILES:
            raise UsageError(
                "agentkit db upgrade needs --store postgresql://… (or $AGENTKIT_STORE)"
            )
        require("postgres", "the PostgreSQL store", "psycopg", "psycopg_pool")
        from agentkit.store._pg import MIGRATIONS, PostgresDatabase

        with PostgresDatabase(chosen, migrate=False) as database:
            for name in database.upgrade():
                typer.echo(f"applied {name}")
            typer.echo(
                f"{database.shown}: schema up to date ({len(MIGRATIONS)} migrations applied)"
            )
