"""Every name the admin and forms show for the app is a lazy translation: the app's,
each model's (singular and plural) and each field's."""

from __future__ import annotations

from django.apps import apps
from django.utils.functional import Promise


def untranslated() -> list[str]:
    """Where the app names something with a plain string instead of ``gettext_lazy``."""
    config = apps.get_app_config("llm_conversations")
    found = [] if isinstance(config.verbose_name, Promise) else ["the app"]
    models = list(config.get_models(include_auto_created=True))
    for model in models:
        options = model._meta
        for name in ("verbose_name", "verbose_name_plural"):
            if not isinstance(getattr(options, name), Promise):
                found.append(f"{model.__name__}.{name}")
        # Django names the primary key it adds itself ("ID"); every other field is ours.
        found.extend(
            f"{model.__name__}.{field.name}"
            for field in options.concrete_fields
            if not field.auto_created and not isinstance(field.verbose_name, Promise)
        )
    assert len(models) >= 10
    return found


def test_the_app_its_models_and_their_fields_have_translatable_names() -> None:
    assert untranslated() == []
