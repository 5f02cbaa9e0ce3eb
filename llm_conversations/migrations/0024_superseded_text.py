from typing import Any

from django.db import migrations, models


def mark_superseded(apps: Any, schema_editor: Any) -> None:
    """Runs whose log already supersedes text: a run.running or run.fallback names
    ``superseded_after``."""
    Run = apps.get_model("llm_conversations", "Run")
    RunEvent = apps.get_model("llm_conversations", "RunEvent")
    superseding = RunEvent.objects.filter(
        type__in=("run.running", "run.fallback"), data__has_key="superseded_after"
    ).values("run_id")
    Run.objects.filter(pk__in=superseding).update(superseded_text=True)


class Migration(migrations.Migration):
    dependencies = [
        ("llm_conversations", "0023_share_snapshot_messages"),
    ]

    operations = [
        migrations.AddField(
            model_name="run",
            name="superseded_text",
            field=models.BooleanField(
                default=False, editable=False, verbose_name="text superseded"
            ),
        ),
        migrations.RunPython(mark_superseded, migrations.RunPython.noop, elidable=False),
    ]
