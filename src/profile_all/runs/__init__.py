"""Run folders: made, locked, saved and loaded; reports from other tools' files and from
several nodes' run folders, written the same way."""
