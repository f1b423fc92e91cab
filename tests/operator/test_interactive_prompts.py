"""The interactive menu asks with rich prompts: a yes/no question is asked again until answered."""

from __future__ import annotations

import io

from compute.operator import EXIT_OK, main


def test_a_yes_no_question_is_asked_again_until_answered_and_eof_leaves(subnet, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    answers = iter(["1", "", "", "maybe", "y"])  # resources: any model/count, "maybe" re-asked, then yes

    def read(prompt: str = "") -> str:
        try:
            return next(answers)
        except StopIteration:
            raise EOFError from None  # end of input leaves the menu

    monkeypatch.setattr("builtins.input", read)
    out = io.StringIO()
    code = main([*subnet.flags("operator_a"), "interactive"], stdout=out, stderr=io.StringIO())
    text = out.getvalue()
    assert code == EXIT_OK
    assert "Only available machines? [y/n]" in text
    assert "Please enter Y or N" in text  # rich.prompt.Confirm re-asked instead of guessing "no"
    assert "Rentable machines (1)" in text  # --available-only applied: the offline machine is gone
