import llm_conversations.models.waiting_calls
from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ('llm_conversations', '0027_verbose_names'),
    ]

    operations = [
        migrations.RenameField(
            model_name='run',
            old_name='pending_tool_calls',
            new_name='waiting_calls',
        ),
        migrations.AlterField(
            model_name='run',
            name='waiting_calls',
            field=llm_conversations.models.waiting_calls.WaitingCallsField(blank=True, default=list, verbose_name='waiting calls'),
        ),
    ]
