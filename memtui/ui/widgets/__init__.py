"""The dashboard's widgets: each draws the view the screen sets on it and posts messages up
(docs/architecture.md, "Attributes down, messages up"); one widget per module, no state of the
plan or the telemetry of their own and no workers.

Nothing is imported here: each screen imports the widget modules it composes, and the rarely
needed ones (the cluster rows, the snapshot view) stay lazy.
"""
