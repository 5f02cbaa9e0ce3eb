"""Plain server-rendered pages: a shared snapshot read in a browser (docs/sharing.md)."""
