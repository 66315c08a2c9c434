"""Renderers: the Report as terminal tables, markdown, HTML, CSV and JSON."""
