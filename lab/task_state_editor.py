"""``TaskStateEditor``: edit a conversation's TaskState as a form, save it as a versioned write.

The form comes from the TaskState schema (:mod:`lab.task_state_form`); lists are textareas with
one item per line, and important facts can be pinned (moved to ``pinned_facts``, which the
summariser never removes) or unpinned. Saving is a compare-and-swap with the version the form
was loaded at: if someone (a planner turn's compression, another editor) saved in between, the
save is refused, nothing is written, and the edits stay in the form until Reload. The diff
compares the edit with what is stored *now*.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

import ipywidgets as widgets
from agentkit import Agent, AgentkitError, TaskState, VersionConflictError, Versioned

from lab._html import notice_html, pre_html
from lab.task_state_form import (
    FormValues,
    InvalidFormError,
    diff_text,
    form_fields,
    move_fact,
    parse_form,
    to_form,
)

__all__ = ["TaskStateEditor"]


class Control(Protocol):
    """What the editor uses of a field's control (a ``Text``, ``Textarea`` or ``Checkbox``).

    ipywidgets has no type information; this names the part of it the form relies on.
    """

    value: str | bool

    def add_class(self, class_name: str, /) -> object: ...

    def observe(self, handler: Callable[[dict[str, Any]], None], /, names: str) -> None: ...


class TaskStateEditor(widgets.VBox):  # type: ignore[misc]  # ipywidgets is untyped
    """A form over ``agent.task_state(conversation_id)`` with pin, diff, save and reload."""

    def __init__(self, agent: Agent, conversation_id: str) -> None:
        self.agent = agent
        self.conversation_id = conversation_id
        self.loaded: Versioned[TaskState] = agent.task_state(conversation_id)
        self.fields = form_fields()
        self.controls: dict[str, Control] = {}
        self.errors: dict[str, widgets.HTML] = {}
        rows: list[widgets.Widget] = []
        for field in self.fields:
            control: Control
            if field.kind == "lines":
                control = widgets.Textarea(
                    continuous_update=False, layout={"width": "95%", "height": "6em"}
                )
            elif field.kind == "flag":
                control = widgets.Checkbox(description="yes", indent=False)
            else:
                control = widgets.Text(continuous_update=False, layout={"width": "95%"})
            control.add_class(f"agentkit-field-{field.name.replace('.', '-')}")
            control.observe(self._on_change, names="value")
            self.controls[field.name] = control
            self.errors[field.name] = widgets.HTML()
            label = f"<b>{field.label}</b>" + (
                f" <small>({field.help})</small>" if field.help else ""
            )
            rows.append(widgets.VBox([widgets.HTML(label), control, self.errors[field.name]]))

        self.heading = widgets.HTML()
        self.fact_choice = widgets.Dropdown(
            description="Important fact",
            layout={"width": "60%"},
            style={"description_width": "initial"},
        )
        self.pin_button = widgets.Button(description="Pin", icon="thumb-tack")
        self.pinned_choice = widgets.Dropdown(
            description="Pinned fact",
            layout={"width": "60%"},
            style={"description_width": "initial"},
        )
        self.unpin_button = widgets.Button(description="Unpin")
        self.save_button = widgets.Button(description="Save", button_style="primary", icon="save")
        self.save_button.add_class("agentkit-task-save")
        self.reload_button = widgets.Button(description="Reload", icon="refresh")
        self.diff_button = widgets.Button(description="Diff with stored", icon="exchange")
        self.notice = widgets.HTML()
        self.notice.add_class("agentkit-task-notice")
        self.diff = widgets.HTML()
        self.diff.add_class("agentkit-task-diff")

        self.pin_button.on_click(lambda _: self.pin(str(self.fact_choice.value or "")))
        self.unpin_button.on_click(lambda _: self.unpin(str(self.pinned_choice.value or "")))
        self.save_button.on_click(lambda _: self.save())
        self.reload_button.on_click(lambda _: self.reload())
        self.diff_button.on_click(lambda _: self.show_diff())

        super().__init__(
            [
                self.heading,
                *rows,
                widgets.HBox([self.fact_choice, self.pin_button]),
                widgets.HBox([self.pinned_choice, self.unpin_button]),
                widgets.HBox([self.save_button, self.reload_button, self.diff_button]),
                self.notice,
                self.diff,
            ]
        )
        self.add_class("agentkit-task-state-editor")
        self._filling = False
        self._fill(to_form(self.loaded.value))

    # -- the form ------------------------------------------------------------------------------

    def values(self) -> FormValues:
        """What the form holds now."""
        return {name: control.value for name, control in self.controls.items()}

    def set_values(self, values: FormValues) -> None:
        """Put *values* into the controls (unknown names are refused)."""
        unknown = sorted(set(values) - set(self.controls))
        if unknown:
            raise KeyError(f"the TaskState form has no field {unknown}")
        self._fill({**self.values(), **values})

    def _fill(self, values: FormValues) -> None:
        self._filling = True
        try:
            for name, value in values.items():
                self.controls[name].value = value
        finally:
            self._filling = False
        self._after_edit()

    def _on_change(self, _change: dict[str, Any]) -> None:
        if not self._filling:
            self._after_edit()

    def _after_edit(self) -> None:
        values = self.values()
        facts = [line.strip() for line in str(values["important_facts"]).splitlines()]
        pinned = [line.strip() for line in str(values["pinned_facts"]).splitlines()]
        for choice, items in ((self.fact_choice, facts), (self.pinned_choice, pinned)):
            current = choice.value
            choice.options = [item for item in items if item]
            choice.value = (
                current if current in choice.options else next(iter(choice.options), None)
            )
        self.heading.value = (
            f"<b>TaskState</b> of {self.agent.id} / {self.conversation_id} · "
            f"loaded version {self.loaded.version}"
        )
        self.show_diff(reread=False)

    def _show_errors(self, errors: dict[str, str]) -> None:
        for name, label in self.errors.items():
            label.value = notice_html(errors.get(name, ""), "error")
        unplaced = {name: why for name, why in errors.items() if name not in self.errors}
        if unplaced:
            self.notice.value = notice_html(str(InvalidFormError(unplaced)), "error")

    # -- actions -------------------------------------------------------------------------------

    def pin(self, fact: str) -> bool:
        """Move *fact* from important to pinned facts in the form (save to keep it)."""
        return self._move(fact, pin=True)

    def unpin(self, fact: str) -> bool:
        """Move *fact* back from pinned to important facts in the form."""
        return self._move(fact, pin=False)

    def _move(self, fact: str, *, pin: bool) -> bool:
        try:
            moved = move_fact(self.values(), fact, pin=pin)
        except InvalidFormError as error:
            self.notice.value = notice_html(str(error), "warn")
            return False
        self._fill(moved)
        self.notice.value = notice_html(f"{'Pinned' if pin else 'Unpinned'}; Save to keep it.")
        return True

    def show_diff(self, *, reread: bool = True) -> str:
        """Diff the form against the stored TaskState (read again unless ``reread=False``)."""
        try:
            stored = self.agent.task_state(self.conversation_id) if reread else self.loaded
            edited = parse_form(self.values(), base=self.loaded.value)
        except InvalidFormError as error:
            self._show_errors(error.errors)
            self.diff.value = notice_html("Fix the marked fields to see the diff.", "warn")
            return ""
        except AgentkitError as error:
            self.diff.value = notice_html(str(error), "error")
            return ""
        self._show_errors({})
        text = diff_text(stored.value, edited, stored_version=stored.version)
        self.diff.value = pre_html(text) if text else "<i>No changes against the stored state.</i>"
        if reread and stored.version != self.loaded.version:
            self.notice.value = notice_html(
                f"The stored TaskState changed since you loaded it (version {self.loaded.version}"
                f" → {stored.version}); saving would be refused. Reload to see it.",
                "warn",
            )
        return text

    def save(self) -> bool:
        """Write the form if the stored version is still the loaded one; True when saved."""
        try:
            edited = parse_form(self.values(), base=self.loaded.value)
        except InvalidFormError as error:
            self._show_errors(error.errors)
            self.notice.value = notice_html("Fix the marked fields; nothing was saved.", "error")
            return False
        try:
            saved = self.agent.save_task_state(
                self.conversation_id, edited, expected_version=self.loaded.version
            )
        except VersionConflictError as conflict:
            self.notice.value = notice_html(
                "Someone else changed this TaskState since you loaded it (you loaded version "
                f"{self.loaded.version}; it is now at version {conflict.actual}). Nothing was "
                "saved and your edits are still in the form: press Reload to see their version, "
                "then apply your change again.",
                "error",
            )
            return False
        except AgentkitError as error:
            self.notice.value = notice_html(f"Not saved: {error}", "error")
            return False
        self.loaded = saved
        self._fill(to_form(saved.value))
        self.notice.value = notice_html(f"Saved: version {saved.version}.", "ok")
        return True

    def reload(self) -> None:
        """Discard the form's edits and show the stored TaskState."""
        self.loaded = self.agent.task_state(self.conversation_id)
        self._fill(to_form(self.loaded.value))
        self.notice.value = notice_html(f"Reloaded version {self.loaded.version}.")
