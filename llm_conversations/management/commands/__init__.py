"""``manage.py chat``."""
