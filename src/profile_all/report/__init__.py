"""The Report (a tidy DataFrame and its metadata), its storage, and its renderers."""
