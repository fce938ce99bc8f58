"""Merge-field templates: fields with and without fallback, brace escapes, and nothing ever evaluated."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sender.campaigns.template import Field, TemplateError, fields, parse, render


def test_a_field_is_replaced_by_the_leads_value() -> None:
    assert render("Hi {first_name}, how is {company}?", {"first_name": "Eve", "company": "Bigco"}) == \
        "Hi Eve, how is Bigco?"


def test_a_fallback_fills_a_field_the_lead_has_empty_or_lacks() -> None:
    template = "Quick question, {first_name|there}"
    assert render(template, {"first_name": "Eve"}) == "Quick question, Eve"
    assert render(template, {"first_name": ""}) == "Quick question, there"
    assert render(template, {"first_name": "   "}) == "Quick question, there"
    assert render(template, {}) == "Quick question, there"
    assert render("{title|}Eve", {}) == "Eve"


def test_doubled_braces_are_literal_braces() -> None:
    assert render("{{first_name}} is {first_name} }}", {"first_name": "Eve"}) == "{first_name} is Eve }"
    assert parse("{{}}").parts == ("{}",)


def test_fields_tells_needed_fields_from_those_with_a_fallback() -> None:
    assert fields("Hi {first_name|there} at {company}, {first_name|you}") == \
        (frozenset({"company"}), frozenset({"first_name"}))
    # Used once without a fallback, a field is needed even where another use has one.
    assert fields("{first_name|there} {first_name}") == (frozenset({"first_name"}), frozenset())
    assert fields("no fields {{here}}") == (frozenset(), frozenset())


def test_a_fallback_may_hold_a_bar_and_spaces() -> None:
    assert parse("{x|a | b}").parts == (Field("x", "a | b"),)


def test_a_field_the_lead_lacks_without_a_fallback_is_an_error_naming_it() -> None:
    with pytest.raises(TemplateError, match=r"\{company\}: the lead has no field 'company'"):
        render("at {company}", {"first_name": "Eve"})


def test_an_empty_value_for_a_field_without_fallback_is_an_error_naming_it() -> None:
    with pytest.raises(TemplateError, match=r"the lead's 'company' is empty and the field has no fallback"):
        render("at {company}", {"company": " "})


@pytest.mark.parametrize(("text", "named"), [
    ("{0.__class__}", "'0.__class__' is not a field name"),
    ("{first_name.__class__.__mro__}", "is not a field name"),
    ("{first_name!r}", "is not a field name"),
    ("{first_name:>99999}", "is not a field name"),
    ("{first_name[0]}", "is not a field name"),
    ("{}", "'' is not a field name"),
    ("{ first_name }", "is not a field name"),
    ("{9lives}", "is not a field name"),
    ("Hi {first_name", "never closed"),
    ("Hi first_name}", "a lone '}' at character 14"),
    ("{a{b}}", "do not nest"),
    ("{" + "x" * 65 + "}", "is not a field name"),
])
def test_anything_but_a_plain_field_name_is_refused_never_evaluated(text: str, named: str) -> None:
    with pytest.raises(TemplateError, match=re.escape(named)):
        parse(text)


@given(st.text(max_size=40))
def test_text_without_braces_renders_as_itself_and_any_text_parses_or_is_refused(text: str) -> None:
    try:
        template = parse(text)
    except TemplateError:
        assert "{" in text or "}" in text
        return
    plain = text.replace("{", "").replace("}", "")
    assert render(plain, {}) == plain
    assert template.text == text


@given(st.text(max_size=40))
def test_a_literal_with_its_braces_doubled_renders_back_to_itself(text: str) -> None:
    assert render(text.replace("{", "{{").replace("}", "}}"), {}) == text
