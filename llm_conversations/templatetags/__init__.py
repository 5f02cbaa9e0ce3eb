"""Template filters of the app's admin templates."""
